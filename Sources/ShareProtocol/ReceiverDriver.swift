import CoreTransferable

/// Where a receiver puts what it accepts: the disk (an inbox, `--into`, the relay store), a watch's memory and shelf,
/// a pipe to another device. The driver checks every chunk and the whole item before the sink hears of it.
public protocol ItemSink: AnyObject {
    /// What is already held and verified of the chosen representation of `item` from an earlier session (chunk →
    /// digest, and the digest they were recorded with), looked up without keeping anything open: the receiver
    /// announces it in `resume`, items ahead of the one it receives.
    func held(item: OfferItem, representation: OfferedRepresentation, chunkSize: Int) throws -> HeldChunks
    /// Opens where the chosen representation of `item` goes, when its bytes begin, with what is held of it; its
    /// chunks are recorded with `digest` (what is held under another digest is dropped).
    func open(item: OfferItem, representation: OfferedRepresentation, chunkSize: Int, digest: DigestAlgorithm)
        throws -> IncomingPayload
    /// An earlier version of `item` to receive it as a delta against, with its index (by `hasher`'s digest).
    func basis(item: OfferItem, representation: OfferedRepresentation, hasher: ChunkHasher) -> ItemBasis?
}

extension ItemSink {
    /// No earlier version: every item arrives whole.
    public func basis(item: OfferItem, representation: OfferedRepresentation, hasher: ChunkHasher) -> ItemBasis? {
        nil
    }
}

/// An earlier version of an item the receiver holds (delta transfer): its index, and how to read it again while
/// the patches arrive (`open` checks it is still what was indexed).
public final class ItemBasis {
    public let index: BasisIndex
    public let open: () throws -> BasisReader

    public init(index: BasisIndex, open: @escaping () throws -> BasisReader) {
        self.index = index
        self.open = open
    }
}

/// The basis, open for reading.
public protocol BasisReader: AnyObject {
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws -> Int
    func close()
    /// Where `length` bytes of the basis at `offset` lie on disk, for a payload that can share them rather than
    /// write a copy (nil: it cannot tell).
    func origin(at offset: UInt64, length: Int) -> ChunkOrigin?
}

extension BasisReader {
    public func origin(at offset: UInt64, length: Int) -> ChunkOrigin? { nil }
}

/// Where a verified chunk's bytes already are on this machine's disk, byte for byte (a range of the basis): a
/// payload may share those blocks with the new version (a clone) instead of writing a copy. Made by the basis
/// reader and understood only by the payloads of the same sink.
public protocol ChunkOrigin: AnyObject {}

/// Chunks held from an earlier session: chunk → digest, with the digest they were recorded with.
public struct HeldChunks: Sendable {
    public var digests: [Int: [UInt8]]
    public var algorithm: DigestAlgorithm

    public init(digests: [Int: [UInt8]], algorithm: DigestAlgorithm) {
        self.digests = digests
        self.algorithm = algorithm
    }

    public static let nothing = HeldChunks(digests: [:], algorithm: .sha256)
}

/// One item being received.
public protocol IncomingPayload: AnyObject {
    /// Chunks held and verified before this session, with their digests.
    var held: [Int: [UInt8]] { get }
    /// Takes one chunk whose digest the driver has checked.
    func write(index: Int, bytes: UnsafeRawBufferPointer, digest: [UInt8]) throws
    /// Takes one checked chunk that is, byte for byte, the basis range `origin` names: the payload may share its
    /// blocks (by default it is written as any chunk).
    func write(index: Int, bytes: UnsafeRawBufferPointer, digest: [UInt8], origin: ChunkOrigin) throws
    /// Every chunk is in and the whole-item digest matched: hands the item over and says what became of it.
    func complete(done: Done) throws -> Ack
    /// The item is bad (its digest does not match): drops it.
    func discard()
    /// The session stopped before the item ended: keeps what is verified, for a resume.
    func suspend()
}

extension IncomingPayload {
    public func write(index: Int, bytes: UnsafeRawBufferPointer, digest: [UInt8], origin: ChunkOrigin) throws {
        try write(index: index, bytes: bytes, digest: digest)
    }
}

/// The one receiving side of every transfer: negotiates each offered item (or takes choices made elsewhere),
/// announces what it holds, checks every chunk (index, order, length, digest, limits, free space) and the whole-item
/// digest, and hands only verified items to its sink. It runs `ReceiverMachine` over a `FrameChannel`.
public final class ReceiverDriver {
    public let channel: FrameChannel
    let hasher: ChunkHasher
    let codec: ChunkCodec?
    let events: TransferEvents
    var summary = TransferSummary()
    var incoming: IncomingPayload?
    /// The item `incoming` belongs to.
    var incomingItem: Int?
    var digests = ItemDigest(chunks: 0)
    /// What each announced item held, as its `resume` said.
    var announced: [Int: [Int: [UInt8]]] = [:]
    /// The digest of each announced item: the session's, or SHA-256 for a partial recorded with it.
    var itemDigests: [Int: DigestAlgorithm] = [:]
    /// The current item's hasher (for this thread) and another of the same digest for the writer thread.
    var itemHasher: ChunkHasher
    var writerHasher: ChunkHasher
    /// Checks and writes the chunks of large items (made on the first one).
    var writer: ChunkWriter?
    /// How many chunks of a large item may wait, read but not yet written (at most `writeAheadBytes` of them, at
    /// least three): enough that a busy neighbour holding up one thread for a few milliseconds does not stall the
    /// other. A client short of memory asks for fewer.
    public var writeAhead = 8
    /// Whether the sender speaks delta transfer (its hello lists `Delta.feature`): an item the sink holds an earlier
    /// version of is then announced with that version's index.
    public var delta = false
    /// Per announced item: the basis its index described.
    var bases: [Int: ItemBasis] = [:]
    /// The current item's basis, open while its patches arrive.
    var basisReader: (item: Int, reader: BasisReader?)?

    public init(
        channel: FrameChannel, hasher: ChunkHasher, codec: ChunkCodec? = nil,
        events: @escaping TransferEvents = { _ in }
    ) {
        self.channel = channel
        self.hasher = hasher
        itemHasher = hasher
        writerHasher = hasher.another()
        self.codec = codec
        self.events = events
    }

    /// Serves one batch, from the offer to the sender's `bye`. `first` is the offer when it was already read (a
    /// session that first answered pings). `decide`, when given, makes the choices instead of the negotiator.
    /// On any failure the item in progress is suspended (its verified chunks kept) or, after a digest mismatch,
    /// discarded; a failure found here is reported to the peer in an `error` frame; then the error is thrown.
    public func run(
        machine: ReceiverMachine, sink: ItemSink, first: Frame? = nil, decide: ((Offer) throws -> [Choice])? = nil
    ) throws -> TransferSummary {
        var machine = machine
        var pending = first
        // Chunks of small items are read, checked and written here; those of large items are checked and written
        // by the writer thread while the next ones are read (see `ChunkWriter`).
        let own = ChunkBuffer(size: Limits.maxChunkPayload)
        var ownPlain: ChunkBuffer?
        defer { writer?.stop() }
        do {
            while true {
                let arrived: FrameChannel.Incoming
                let large = isLarge(machine)
                var target = own
                if let frame = pending {
                    arrived = .control(frame)
                    pending = nil
                } else {
                    // Reading ahead of the writer only while the next bytes are already here: before waiting on the
                    // network, what was queued is written and checked, so a bad chunk is answered at once even when
                    // the sender sends nothing more.
                    if let writer, !channel.hasIncomingData {
                        for (chunk, digest) in try writer.drain() { digests.record(chunk, digest) }
                    }
                    if large, let chunkSize = machine.offer?.chunkSize {
                        if writer == nil {
                            // `writeAhead` chunks, but at most `writeAheadBytes` of them (and never fewer than three).
                            let depth = max(3, min(writeAhead, Self.writeAheadBytes / chunkSize))
                            writer = ChunkWriter(depth: depth)
                        }
                        target = try writer!.takeBuffer()
                        // A chunk's data is at most the offer's chunk size (a compressed one is smaller): a longer
                        // frame is refused before any of it is read, so no buffer holds more than a chunk.
                        arrived = try channel.receive(
                            into: UnsafeMutableRawBufferPointer(rebasing: target.bytes[0..<chunkSize]))
                    } else {
                        arrived = try channel.receive(into: target.bytes)
                    }
                }
                var actions: [ReceiverMachine.Action]
                switch arrived {
                case .binary(let type, let header, var length):
                    try openCurrent(machine: machine, sink: sink)
                    if type == .patch {
                        summary.wireBytes += UInt64(length)
                        try patched(
                            header: header, length: length, target: target, large: large, machine: &machine,
                            ownPlain: &ownPlain)
                        continue
                    }
                    summary.wireBytes += UInt64(length)
                    if type == .zchunk {
                        let plain = try plainBuffer(large: large, own: &ownPlain)
                        length = try decompress(
                            UnsafeRawBufferPointer(rebasing: target.bytes[0..<length]), index: header.index,
                            machine: machine, into: plain.bytes)
                        if large { writer!.giveBack(target) }
                        target = plain
                    }
                    for case .write(let index) in try machine.receivedChunk(index: header.index, length: length) {
                        guard let payload = incoming else { throw ProtocolError(.internalError, "no item open") }
                        if large {
                            try writer!.submit(
                                index: index, buffer: target, length: length, digest: header.digest, payload: payload,
                                hasher: writerHasher)
                        } else {
                            let data = UnsafeRawBufferPointer(rebasing: target.bytes[0..<length])
                            guard itemHasher.digest(data) == header.digest else {
                                throw ProtocolError(.digestMismatch, "chunk \(header.index) does not match its digest")
                            }
                            try payload.write(index: index, bytes: data, digest: header.digest)
                            digests.record(index, header.digest)
                        }
                        summary.bytes += UInt64(length)
                        events(.progress(bytes: length))
                    }
                    continue
                case .control(let frame):
                    if target !== own { writer?.giveBack(target) }
                    switch frame.type {
                    case .offer:
                        let offer = try MessageCoding.decode(Offer.self, from: frame)
                        if let decide {
                            try offer.validate()
                            actions = try machine.received(offer, decided: try decide(offer))
                        } else {
                            actions = try machine.received(offer)
                        }
                    case .done:
                        try openCurrent(machine: machine, sink: sink)
                        actions = try machine.received(MessageCoding.decode(Done.self, from: frame))
                    case .bye:
                        actions = try machine.receivedBye()
                    case .basisQuery:
                        try answer(query: frame, machine: &machine)
                        continue
                    case .blockQuery:
                        try answer(blocks: frame, machine: &machine)
                        continue
                    case .deltaEnd:
                        try openCurrent(machine: machine, sink: sink)
                        let end = try MessageCoding.decode(DeltaEnd.self, from: frame)
                        // What the patches made is written and checked before the answer.
                        if let writer {
                            for (chunk, digest) in try writer.drain() { digests.record(chunk, digest) }
                        }
                        let redo = try machine.patchesEnded(item: end.item)
                        closeBasis()
                        try channel.send(.deltaResult, DeltaResult(item: end.item, redo: redo))
                        continue
                    case .error:
                        let error = MessageCoding.peerError(from: frame)
                        if error.code == .sourceChanged {
                            writer?.stop()
                            writer = nil
                            incoming?.discard()
                            incoming = nil
                        }
                        throw error
                    default:
                        throw ProtocolError(.badMessage, "the sender sent \(frame.type) out of place")
                    }
                }
                if try perform(actions, machine: &machine, sink: sink) { return summary }
            }
        } catch {
            closeBasis()
            machine.failed()
            // Chunks that arrived whole are still checked and written (a lost connection loses none of them; after a
            // bad chunk the writer has stopped by itself), then the writer lets go of the item before it is
            // suspended.
            if let writer {
                _ = try? writer.drain()
                writer.stop()
            }
            writer = nil
            incoming?.suspend()
            incoming = nil
            if !channel.errorExchanged, let error = error as? ProtocolError { try? channel.send(.error, error) }
            throw error
        }
    }

    /// Where a chunk's plain bytes go when it arrived compressed or as a patch: a buffer of the writer thread for a
    /// large item (handed to it with the chunk), else this thread's own, made on first use.
    func plainBuffer(large: Bool, own: inout ChunkBuffer?) throws -> ChunkBuffer {
        if large { return try writer!.takeBuffer() }
        if own == nil { own = ChunkBuffer(size: Limits.maxChunkPayload) }
        return own!
    }

    /// Whether the item whose chunks come now is large enough for the writer thread.
    func isLarge(_ machine: ReceiverMachine) -> Bool {
        guard let index = machine.currentItem, let offer = machine.offer,
            let size = offer.items[index].representations[machine.choices[index].representation!].size
        else { return false }
        return ChunkMath.count(size: size, chunkSize: offer.chunkSize) > Self.writerThreshold
    }

    /// Items with more chunks than this are checked and written by the writer thread.
    static let writerThreshold = 2
    /// The most chunk bytes the writer thread holds in hand, whatever the chunk size.
    static let writeAheadBytes = 8 << 20

    /// Decodes a zstd chunk into `output`; its length must be the one the item's size implies.
    func decompress(
        _ compressed: UnsafeRawBufferPointer, index: Int, machine: ReceiverMachine,
        into output: UnsafeMutableRawBufferPointer
    ) throws -> Int {
        guard let codec else {
            throw ProtocolError(.badMessage, "a compressed chunk, though this receiver decodes none")
        }
        guard let expected = machine.expectedLength(of: index) else {
            throw ProtocolError(.badMessage, "compressed chunk \(index) is outside an item of known size")
        }
        do {
            try codec.decompress(
                compressed, into: UnsafeMutableRawBufferPointer(rebasing: output[0..<(expected + 1)]),
                expected: expected)
        } catch let error as ProtocolError {
            throw error
        } catch {
            throw ProtocolError(.badMessage, "chunk \(index): \(error)")
        }
        return expected
    }
}
