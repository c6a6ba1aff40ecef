import CoreTransferable
import Foundation
import ShareArchive
import ShareProtocol
import ShareTLS

/// One direction of an in-memory byte stream, bounded so a writer far ahead of its reader waits (as a socket would).
final class MemoryPipe: @unchecked Sendable {  // guarded by `condition`
    private let condition = NSCondition()
    private var bytes: [UInt8] = []
    private var closed = false
    private let capacity: Int
    /// Changes bytes as they are written (a tampering link): (offset in the stream, bytes) → bytes.
    var tamper: ((Int, [UInt8]) -> [UInt8])?
    private var written = 0
    /// Bytes written so far.
    var total: Int { condition.withLock { written } }

    /// Holds back what is written from the first write it says yes to, in order, until `release()`: a link that
    /// delays one direction (its reader sees nothing of it meanwhile).
    var holdFrom: (([UInt8]) -> Bool)?
    private var heldBack: [UInt8] = []
    private var holding = false

    init(capacity: Int = 8 << 20) { self.capacity = capacity }

    /// Lets what was held back through.
    func release() {
        condition.lock()
        holdFrom = nil
        holding = false
        bytes += heldBack
        heldBack = []
        condition.broadcast()
        condition.unlock()
    }

    func write(_ raw: UnsafeRawBufferPointer) throws {
        var data = Array(raw)
        condition.lock()
        defer { condition.unlock() }
        if let tamper { data = tamper(written, data) }
        written += data.count
        if holding || holdFrom?(data) == true {
            holding = true
            heldBack += data
            return
        }
        var offset = 0
        while offset < data.count {
            while bytes.count >= capacity && !closed { condition.wait() }
            if closed { throw StreamEnded("the pipe is closed") }
            let n = min(capacity - bytes.count, data.count - offset)
            bytes += data[offset..<(offset + n)]
            offset += n
            condition.broadcast()
        }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        condition.lock()
        defer { condition.unlock() }
        while bytes.isEmpty && !closed { condition.wait() }
        let n = min(buffer.count, bytes.count)
        bytes.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        bytes.removeFirst(n)
        condition.broadcast()
        return n
    }

    var hasInput: Bool { condition.withLock { !bytes.isEmpty || closed } }

    func close() {
        condition.lock()
        closed = true
        condition.broadcast()
        condition.unlock()
    }
}

/// One end of an in-memory stream pair.
final class MemoryStream: ByteStream, @unchecked Sendable {  // its pipes are thread-safe
    let incoming: MemoryPipe
    let outgoing: MemoryPipe

    init(incoming: MemoryPipe, outgoing: MemoryPipe) {
        self.incoming = incoming
        self.outgoing = outgoing
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int { incoming.read(into: buffer) }
    func write(_ bytes: UnsafeRawBufferPointer) throws { try outgoing.write(bytes) }
    var hasInput: Bool { incoming.hasInput }
    func setReadTimeout(_ seconds: Double) {}

    func close() {
        incoming.close()
        outgoing.close()
    }

    /// Two connected ends.
    static func pair() -> (MemoryStream, MemoryStream) {
        let ab = MemoryPipe()
        let ba = MemoryPipe()
        return (MemoryStream(incoming: ba, outgoing: ab), MemoryStream(incoming: ab, outgoing: ba))
    }
}

/// zstd through libarchive, as the transport gives it to the protocol.
final class TestZstd: ChunkCodec {
    func compress(_ bytes: UnsafeRawBufferPointer, level: Int32, minSaving: Double) -> [UInt8]? {
        ZstdCodec.compress(bytes, level: Int(level), worthIt: minSaving)
    }

    func decompress(_ compressed: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer, expected: Int)
        throws
    {
        try ZstdCodec.decompress(compressed, into: output, expected: expected)
    }
}

/// A sink that keeps items in memory; it may start with chunks already held (a resumed item).
final class MemorySink: ItemSink, @unchecked Sendable {  // used by the receiving thread, read after it ends
    final class Payload: IncomingPayload {
        let held: [Int: [UInt8]]
        var chunks: [Int: [UInt8]] = [:]
        var outcome: String?
        let sink: MemorySink
        let item: OfferItem

        init(held: [Int: [UInt8]], sink: MemorySink, item: OfferItem) {
            self.held = held
            self.sink = sink
            self.item = item
        }

        func write(index: Int, bytes: UnsafeRawBufferPointer, digest: [UInt8]) throws {
            chunks[index] = Array(bytes)
        }

        func complete(done: Done) throws -> Ack {
            var whole: [UInt8] = []
            for index in 0..<done.chunks { whole += chunks[index] ?? sink.heldBytes[item.id]?[index] ?? [] }
            sink.items[item.id] = whole
            return Ack(item: item.id, outcome: "kept")
        }

        func discard() { sink.discarded.append(item.id) }
        func suspend() { sink.suspended.append(item.id) }
    }

    var items: [String: [UInt8]] = [:]
    var discarded: [String] = []
    var suspended: [String] = []
    var opened: [(String, String)] = []
    /// Chunks held before the session, by item id: index → bytes.
    var heldBytes: [String: [Int: [UInt8]]] = [:]

    /// The digest `heldBytes` are recorded with.
    var heldDigest: DigestAlgorithm = .sha256
    /// The digest each opened item was opened with.
    var openedDigests: [String: DigestAlgorithm] = [:]
    /// Earlier versions held, by item id (delta transfer), and what the basis reads as once indexed when it
    /// changed meanwhile.
    var bases: [String: [UInt8]] = [:]
    var basesAfterIndex: [String: [UInt8]] = [:]
    /// Items whose basis was indexed.
    var indexed: [String] = []

    final class BasisBytes: BasisReader {
        let bytes: [UInt8]
        init(_ bytes: [UInt8]) { self.bytes = bytes }
        func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws -> Int {
            try MemorySource(bytes).read(into: buffer, at: offset)
        }
        func close() {}
    }

    func basis(item: OfferItem, representation: OfferedRepresentation, hasher: ChunkHasher) -> ItemBasis? {
        guard let bytes = bases[item.id] else { return nil }
        indexed.append(item.id)
        let source = MemorySource(bytes)
        guard
            let index = try? BasisIndex.build(
                item: item.id, size: UInt64(bytes.count),
                read: { try source.read(into: $0, at: $1) })
        else { return nil }
        let later = basesAfterIndex[item.id] ?? bytes
        return ItemBasis(index: index) { BasisBytes(later) }
    }

    func held(item: OfferItem, representation: OfferedRepresentation, chunkSize: Int) -> HeldChunks {
        let hasher: ChunkHasher = heldDigest == .sha256 ? TestSHA() : TestBLAKE3()
        return HeldChunks(
            digests: (heldBytes[item.id] ?? [:]).mapValues { hasher.digest($0) }, algorithm: heldDigest)
    }

    func open(item: OfferItem, representation: OfferedRepresentation, chunkSize: Int, digest: DigestAlgorithm)
        throws -> IncomingPayload
    {
        openedDigests[item.id] = digest
        opened.append((item.id, representation.contentType))
        // Held chunks recorded with another digest are dropped, as a disk partial's are.
        let held =
            digest == heldDigest
            ? self.held(item: item, representation: representation, chunkSize: chunkSize).digests : [:]
        if digest != heldDigest { heldBytes[item.id] = nil }
        return Payload(held: held, sink: self, item: item)
    }
}

/// A stream source that makes its bytes in pieces of odd sizes (an archive being written).
final class PiecesSource: SequentialSource {
    let bytes: [UInt8]
    let size: UInt64?
    init(_ bytes: [UInt8], announced: Bool) {
        self.bytes = bytes
        size = announced ? UInt64(bytes.count) : nil
    }

    func produce(_ emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        var offset = 0
        var piece = 1
        while offset < bytes.count {
            let n = min(piece, bytes.count - offset)
            try bytes.withUnsafeBytes { try emit(UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + n)])) }
            offset += n
            piece = piece * 3 + 7
        }
    }

    func close() {}
}

/// An item whose representations are given sources.
final class FixedItem: ItemSource {
    let offer: OfferItem
    let make: [() -> ProducedChunks]
    var produced: [Int] = []

    init(_ offer: OfferItem, _ make: [() -> ProducedChunks]) {
        self.offer = offer
        self.make = make
    }

    func produce(representation index: Int) throws -> ProducedChunks {
        produced.append(index)
        return make[index]()
    }
}

/// `count` random bytes from the kernel's generator (a byte at a time took half a second a MiB in a debug build, and
/// more under a sanitizer).
func randomBytes(_ count: Int) -> [UInt8] {
    guard count > 0 else { return [] }
    let random = FileHandle(forReadingAtPath: "/dev/urandom")!
    defer { try? random.close() }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(count)
    while bytes.count < count {
        let data = try! random.read(upToCount: count - bytes.count)!
        bytes += data
    }
    return bytes
}

/// SHA-256 from the transport's OpenSSL, as the protocol takes it.
final class TestSHA: ChunkHasher {
    private let hasher = SHA256Hasher()
    var algorithm: DigestAlgorithm { .sha256 }
    func another() -> ChunkHasher { TestSHA() }
    func make(_ algorithm: DigestAlgorithm) -> ChunkHasher { algorithm == .sha256 ? TestSHA() : TestBLAKE3() }
    func digest(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        hasher.update(bytes)
        return hasher.finalize()
    }
}

/// BLAKE3 from the transport, as the protocol takes it.
final class TestBLAKE3: ChunkHasher {
    private let hasher = BLAKE3Hasher()
    var algorithm: DigestAlgorithm { .blake3 }
    func another() -> ChunkHasher { TestBLAKE3() }
    func make(_ algorithm: DigestAlgorithm) -> ChunkHasher { algorithm == .sha256 ? TestSHA() : TestBLAKE3() }
    func digest(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        hasher.update(bytes)
        return hasher.finalize()
    }
}
