/// One item a sender offers, and how each of its representations is produced. Only the representation the receiver
/// chooses is ever produced, and only once it has chosen.
public protocol ItemSource: AnyObject {
    var offer: OfferItem { get }
    /// Produces representation `index` of `offer.representations`.
    func produce(representation index: Int) throws -> ProducedChunks
}

/// How a produced representation yields its bytes.
public enum ProducedChunks {
    /// Bytes at known positions (a file, bytes in memory): the chunks the receiver holds are hashed but not sent.
    case positional(PositionalSource)
    /// A stream made as it goes (an archive): the chunks the receiver holds are made and hashed, not sent.
    case sequential(SequentialSource)
}

/// Bytes at known positions.
public protocol PositionalSource: AnyObject {
    var size: UInt64 { get }
    /// Reads up to `buffer.count` bytes at `offset`; fewer only at the end.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws -> Int
    /// Starts hashing the chunks the receiver already holds (they are not sent). The source may do it on another
    /// thread while the missing chunks are sent.
    func hashHeld(_ indices: [Int], chunkSize: Int, hasher: ChunkHasher) -> HeldDigests
    /// After the last chunk: throws `sourceChanged` when the source is no longer what was offered.
    func checkUnchanged() throws
    func close()
    /// The name of the file the bytes come from, when they come from one (told to the receiver when the offer
    /// named no file).
    var fileName: String? { get }
}

extension PositionalSource {
    public var fileName: String? { nil }
}

/// The digests of the chunks a receiver already held, being computed.
public protocol HeldDigests: AnyObject {
    /// The digests, once every one is computed.
    func wait() throws -> [(index: Int, digest: [UInt8])]
    /// Stops and waits until nothing reads the source any more (the item failed).
    func cancel()
}

/// A stream made as it goes.
public protocol SequentialSource: AnyObject {
    /// The stream's length when known before it is made (an archive's is computed from its plan).
    var size: UInt64? { get }
    /// Makes the whole stream, handing bytes to `emit` in order.
    func produce(_ emit: (UnsafeRawBufferPointer) throws -> Void) throws
    func close()
}

/// Held digests computed at once, on the calling thread (small sources).
public final class ComputedDigests: HeldDigests {
    private let result: Result<[(index: Int, digest: [UInt8])], Error>

    public init(source: PositionalSource, indices: [Int], chunkSize: Int, hasher: ChunkHasher) {
        var buffer = [UInt8](repeating: 0, count: chunkSize)
        do {
            var out: [(index: Int, digest: [UInt8])] = []
            for index in indices {
                let n = try buffer.withUnsafeMutableBytes {
                    try source.read(into: $0, at: UInt64(index) * UInt64(chunkSize))
                }
                out.append(
                    (index, buffer.withUnsafeBytes { hasher.digest(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }))
            }
            result = .success(out)
        } catch {
            result = .failure(error)
        }
    }

    public func wait() throws -> [(index: Int, digest: [UInt8])] { try result.get() }
    public func cancel() {}
}

/// Bytes in memory as a positional source.
public final class MemorySource: PositionalSource {
    public let bytes: [UInt8]

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public var size: UInt64 { UInt64(bytes.count) }

    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws -> Int {
        guard offset < UInt64(bytes.count) else { return 0 }
        let start = Int(offset)
        let n = min(buffer.count, bytes.count - start)
        bytes.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[start..<(start + n)])) }
        return n
    }

    public func hashHeld(_ indices: [Int], chunkSize: Int, hasher: ChunkHasher) -> HeldDigests {
        ComputedDigests(source: self, indices: indices, chunkSize: chunkSize, hasher: hasher)
    }

    public func checkUnchanged() throws {}
    public func close() {}
}

/// An item whose representations are bytes made on request (a text, a URL, a codable value).
public final class DataItemSource: ItemSource {
    public let offer: OfferItem
    private let makers: [() throws -> [UInt8]]

    /// `makers[i]` produces representation `i`.
    public init(offer: OfferItem, makers: [() throws -> [UInt8]]) {
        precondition(makers.count == offer.representations.count)
        self.offer = offer
        self.makers = makers
    }

    public func produce(representation index: Int) throws -> ProducedChunks {
        .positional(MemorySource(try makers[index]()))
    }
}
