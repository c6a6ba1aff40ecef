/// What a transfer driver reports as it goes, typed: the CLI turns events into progress and lines, the agent into
/// logs and job progress, a library caller into whatever it likes. No event carries item contents.
public enum TransferEvent: Sendable {
    /// The sender offered these items (with their representations, most faithful first).
    case offered([OfferItem])
    /// The receiver chose a representation for an item.
    case chosen(item: Int, label: String, offered: [String], contentType: String, reason: String)
    /// The receiver refused an item, or had nothing in common with it.
    case refused(item: Int, label: String, offered: [String], reason: String)
    /// The sender: the receiver's choices for every item, as they arrived.
    case answered([Choice])
    /// The accepted items and their known total size, once the selection is made.
    case selected(count: Int, totalBytes: UInt64)
    /// An item starts moving: its number (from 1), its size when known, and what the receiver already held.
    case started(item: Int, label: String, number: Int, total: UInt64?, held: UInt64)
    /// Chunk bytes moved (sent or received and verified).
    case progress(bytes: Int)
    /// The item's bytes have all moved.
    case finished(item: Int)
    /// The sender: the receiver verified and stored the item.
    case delivered(item: Int, label: String, ack: Ack)
    /// The receiver: the item was verified and handed over (saved, printed, imported, passed on).
    case completed(item: Int, label: String, ack: Ack)
}

/// Where events go. Called on the driver's thread.
public typealias TransferEvents = (TransferEvent) -> Void

/// Statistics of one driven session.
public struct TransferSummary: Sendable {
    public var delivered: [(label: String, ack: Ack)] = []
    public var refused: [(label: String, reason: String)] = []
    /// Chunk bytes moved in this session (resent bytes included).
    public var bytes: UInt64 = 0
    /// Bytes that crossed the stream for those chunks (fewer when chunks were compressed or made from a basis).
    public var wireBytes: UInt64 = 0
    /// Bytes the receiver already held when each item started.
    public var held: UInt64 = 0
    /// Bytes of chunks the receiver made from its basis rather than received (delta transfer).
    public var patchedBytes: UInt64 = 0
    /// Patched chunks the receiver asked for again, whole (its basis changed meanwhile).
    public var redone = 0

    public init() {}
}
