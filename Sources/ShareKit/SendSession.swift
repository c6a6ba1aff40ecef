import CoreTransferable
import Foundation
import Glibc
import ShareArchive
import ShareProtocol
import ShareTLS

/// What happened to each item of a send.
public struct SendReport: Sendable {
    public var delivered: [(label: String, ack: Ack)] = []
    public var refused: [(label: String, reason: String)] = []
    /// Chunk bytes sent in this session (resent bytes included).
    public var bytesSent: UInt64 = 0
    /// Bytes that went over the connection for those chunks (less than `bytesSent` when chunks were compressed).
    public var wireBytes: UInt64 = 0
    /// Bytes the receiver already held when each item started.
    public var bytesSkipped: UInt64 = 0
    public var seconds: Double = 0
}

public struct SendOptions: Sendable {
    /// Bytes per chunk (1 MiB: see docs/PROTOCOL.md for the measurements behind it).
    public var chunkSize = 1 << 20
    public var timeouts = SessionTimeouts()
    /// Compress chunks with zstd when the receiver decodes it and the content shrinks (see `ChunkCompressor`).
    public var compression = true
    /// The items are for this device, which the receiving agent passes them on to (its watch).
    public var relayTo: String?
    public init() {}
}

/// Drives `SenderMachine` over one session: offers the items, streams what the receiver chose and lacks, checks
/// that each source did not change, and reports.
public final class SendSession: @unchecked Sendable {  // used by one thread
    let device: LocalDevice
    let progress: ProgressReporter
    let options: SendOptions
    private var buffer: [UInt8]
    fileprivate var report = SendReport()
    /// Whether the current peer decodes zstd chunks.
    fileprivate var peerDecodesZstd = false

    public init(device: LocalDevice, progress: ProgressReporter, options: SendOptions = SendOptions()) {
        self.device = device
        self.progress = progress
        self.options = options
        buffer = [UInt8](repeating: 0, count: options.chunkSize)
    }

    /// Connects to `target` and sends the items `makeItems` builds for the peer's relation.
    public func run(to target: PeerTarget, trust: TrustStore, makeItems: (PeerRelation) throws -> [OutgoingItem]) throws
        -> SendReport
    {
        let start = ContinuousClock.now
        let session = try SessionOpener.connect(
            from: device, to: target.address, hello: Hello(name: device.name, role: .cli, relayTo: options.relayTo),
            verifier: target.verifier(trust: trust), timeouts: options.timeouts)
        defer { session.connection.close() }
        let peerName = trust.device(session.peerID)?.name ?? session.peerHello.name
        do {
            guard session.peerHello.accept != nil else {
                throw ProtocolError(.refused, "\(peerName) is not receiving items (no accept list in its hello)")
            }
            peerDecodesZstd = options.compression && (session.peerHello.compression ?? []).contains("zstd")
            let relation = trust.device(session.peerID).map { Self.relation($0.relation) } ?? .trusted
            let items = try makeItems(relation)
            try exchange(session, items: items, peerName: peerName)
        } catch let error as ShareError {
            throw error
        } catch let error as ProtocolError where error.code == .sourceChanged {
            session.connection.fail(with: error)
            throw ShareError(.interrupted, error.message)
        } catch {
            throw SessionErrors.describe(error, peer: "\(peerName) at \(target.address)", localID: device.id)
        }
        report.seconds = (ContinuousClock.now - start).seconds
        return report
    }

    /// Sends over a session the peer opened (an agent answering a clipboard request): the same exchange as `run`.
    public func serve(_ session: Session, peerName: String, relation: PeerRelation, items: [OutgoingItem]) throws
        -> SendReport
    {
        let start = ContinuousClock.now
        guard session.peerHello.accept != nil else {
            throw ProtocolError(.refused, "\(peerName) did not say what it accepts")
        }
        peerDecodesZstd = options.compression && (session.peerHello.compression ?? []).contains("zstd")
        try exchange(session, items: items, peerName: peerName)
        report.seconds = (ContinuousClock.now - start).seconds
        return report
    }

    static func relation(_ trust: TrustRelation) -> PeerRelation {
        switch trust {
        case .trusted: return .trusted
        case .team: return .ownDevice
        case .group(let name): return .group(name)
        }
    }

    private func exchange(_ session: Session, items: [OutgoingItem], peerName: String) throws {
        let offer = Offer(items: items.map(\.offerItem), chunkSize: options.chunkSize)
        try offer.validate()
        var machine = SenderMachine(offer: offer)
        var actions = machine.peerReady()
        while true {
            for action in actions {
                switch action {
                case .sendOffer(let offer):
                    for item in offer.items {
                        progress.note(
                            "offered \(item.label): " + item.representations.map(\.contentType).joined(separator: ", "),
                            event: "offered",
                            fields: ["item": item.label, "types": item.representations.map(\.contentType)])
                    }
                    try session.connection.send(.offer, offer)
                case .refused(let index, let choice):
                    report.refused.append((items[index].label, choice.reason))
                    progress.note(
                        "refused by \(peerName): \(items[index].label): \(choice.reason)", event: "refused",
                        fields: ["item": items[index].label, "reason": choice.reason])
                case .stream(let index, let representation, let verified):
                    let chosen = items[index].representations[representation].offered
                    progress.note(
                        "chosen for \(items[index].label): \(chosen.contentType) (\(machine.choices[index].reason))",
                        event: "chosen", fields: ["item": items[index].label, "type": chosen.contentType])
                    let done = try stream(
                        items[index], representation: representation, verified: verified,
                        number: index + 1, count: items.count, connection: session.connection)
                    for case .sendDone(let done) in try machine.finishedStreaming(done) {
                        try session.connection.send(.done, done)
                    }
                case .sendDone(let done):
                    try session.connection.send(.done, done)
                case .delivered(let index, let ack):
                    report.delivered.append((items[index].label, ack))
                    let whereTo = ack.savedAs.map { " as \($0)" } ?? ""
                    progress.note(
                        "delivered \(items[index].label) to \(peerName): \(ack.outcome)\(whereTo)", event: "delivered",
                        fields: ["item": items[index].label, "outcome": ack.outcome, "savedAs": ack.savedAs ?? ""])
                case .sendBye:
                    try session.connection.send(.bye, Bye())
                    return
                }
            }
            if machine.state == .finished { return }
            actions = try machine.received(frame: session.connection.receive())
        }
    }

    /// Streams the chunks of the chosen representation the receiver lacks, hashing each once; the chunks it holds
    /// are hashed from the local source on another thread meanwhile, for the whole-item digest.
    private func stream(
        _ item: OutgoingItem, representation: Int, verified: Set<Int>, number: Int, count: Int,
        connection: FramedConnection
    ) throws -> Done {
        let chunkSize = options.chunkSize
        let produced = try blockingAwait(item.representations[representation].produce)
        let source: ChunkSource
        switch produced {
        case .data(let data): source = .memory(Array(data))
        case .file(let url): source = try .open(url)
        case .archive(let plan):
            return try streamArchive(
                plan, item: item, representation: representation, verified: verified, number: number,
                connection: connection)
        }
        defer { source.close() }
        let offeredSize = item.representations[representation].offered.size
        if let offeredSize, offeredSize != source.size {
            throw ProtocolError(
                .sourceChanged,
                "\(item.label) changed size since it was offered; run the command again to send the new version")
        }
        let chunks = ChunkMath.count(size: source.size, chunkSize: chunkSize)
        let frameType: FrameType = source.isFile ? .chunk : .data
        let held = verified.filter { $0 < chunks }
        let heldBytes = held.reduce(UInt64(0)) { $0 + UInt64(source.length(of: $1, chunkSize: chunkSize)) }
        report.bytesSkipped += heldBytes
        progress.startItem(item.label, number: number, total: source.size, alreadyHeld: heldBytes)
        if !held.isEmpty {
            progress.note(
                "resuming \(item.label): the receiver holds \(ProgressReporter.bytes(heldBytes)) verified; sending \(ProgressReporter.bytes(source.size - heldBytes))",
                event: "resume", fields: ["item": item.label, "held": heldBytes])
        }
        let background =
            held.isEmpty ? nil : HeldChunkHasher(source: source, indices: held.sorted(), chunkSize: chunkSize)
        // Whatever ends this item (a lost connection included), the hashing thread is stopped before the source
        // closes and before the process may exit: OpenSSL's exit-time cleanup under a running hash crashes.
        defer { background?.cancelAndWait() }
        let compressor =
            peerDecodesZstd && offeredSize != nil && frameType == .chunk ? ChunkCompressor() : nil
        var digests = [[UInt8]](repeating: [], count: chunks)
        let hasher = SHA256Hasher()
        for index in 0..<chunks where !held.contains(index) {
            let length = source.length(of: index, chunkSize: chunkSize)
            let read = try source.read(index: index, chunkSize: chunkSize, into: &buffer)
            guard read == length else {
                throw ProtocolError(
                    .sourceChanged, "\(item.label) became shorter while it was being sent; run the command again")
            }
            hasher.update(buffer[0..<length])
            let digest = hasher.finalize()
            digests[index] = digest
            try sendChunk(
                buffer[0..<length], index: index, digest: digest, type: frameType, compressor: compressor,
                connection: connection)
        }
        if let background {
            for (index, digest) in try background.wait() { digests[index] = digest }
        }
        progress.finishItem()
        if let version = item.version, case .fileURL(let url) = source.origin,
            OutgoingItem.currentVersion(of: url) != version
        {
            throw ProtocolError(
                .sourceChanged,
                "\(item.label) changed while it was being sent; run the command again to send the new version")
        }
        let root = SHA256Hasher.hash(digests.flatMap { $0 })
        return Done(item: item.id, size: source.size, chunks: chunks, digest: root.hexString)
    }
}

extension SendSession {
    /// Streams a tar archive produced as it goes: libarchive's output is cut into chunks; chunks the receiver holds
    /// (a prefix, after an interruption) are regenerated and hashed but not sent.
    fileprivate func streamArchive(
        _ plan: ArchivePlan, item: OutgoingItem, representation: Int, verified: Set<Int>, number: Int,
        connection: FramedConnection
    ) throws -> Done {
        let chunkSize = options.chunkSize
        let size = plan.streamSize
        if let offered = item.representations[representation].offered.size, offered != size {
            throw ProtocolError(
                .sourceChanged, "\(item.label) changed since it was offered; run the command again to send it")
        }
        let chunks = ChunkMath.count(size: size, chunkSize: chunkSize)
        let held = verified.filter { $0 < chunks }
        let heldBytes = held.reduce(UInt64(0)) {
            $0 + min(UInt64(chunkSize), size - min(size, UInt64($1) * UInt64(chunkSize)))
        }
        report.bytesSkipped += heldBytes
        progress.startItem(item.label, number: number, total: size, alreadyHeld: heldBytes)
        if !held.isEmpty {
            progress.note(
                "resuming \(item.label): the receiver holds \(ProgressReporter.bytes(heldBytes)) verified; sending \(ProgressReporter.bytes(size - heldBytes))",
                event: "resume", fields: ["item": item.label, "held": heldBytes])
        }
        let cutter = ChunkCutter(chunkSize: chunkSize, chunks: chunks)
        let hasher = SHA256Hasher()
        let compressor = peerDecodesZstd ? ChunkCompressor() : nil
        let emit: (ArraySlice<UInt8>, Int) throws -> Void = { [self] bytes, index in
            hasher.update(bytes)
            let digest = hasher.finalize()
            cutter.digests[index] = digest
            guard !held.contains(index) else { return }
            try sendChunk(
                bytes, index: index, digest: digest, type: .chunk, compressor: compressor, connection: connection)
        }
        let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { readBuffer.deallocate() }
        do {
            let writer = try ArchiveWriter { try cutter.append($0, emit: emit) }
            try plan.write(to: writer, buffer: readBuffer)
            try cutter.finish(emit: emit)
        } catch let error as ArchiveError {
            switch error.kind {
            case .sourceChanged:
                throw ProtocolError(.sourceChanged, "\(error.message); run the command again to send the new version")
            default:
                throw ShareError(.noInput, "cannot archive \(item.label): \(error.message)")
            }
        }
        guard cutter.total == size, cutter.index == chunks else {
            throw ProtocolError(
                .sourceChanged, "\(item.label) changed while it was being sent; run the command again to send it")
        }
        progress.finishItem()
        let root = SHA256Hasher.hash(cutter.digests.flatMap { $0 })
        return Done(item: item.id, size: size, chunks: chunks, digest: root.hexString)
    }
}

extension SendSession {
    /// Sends one verified chunk: zstd-compressed when `compressor` finds it worth it, else as it is. Between chunks
    /// it listens for the receiver, which speaks mid-item only to stop the transfer (disk full, a limit).
    fileprivate func sendChunk(
        _ bytes: ArraySlice<UInt8>, index: Int, digest: [UInt8], type: FrameType, compressor: ChunkCompressor?,
        connection: FramedConnection
    ) throws {
        if connection.hasIncomingData {
            let frame = try connection.receive()
            if frame.type == .error { throw MessageCoding.peerError(from: frame) }
            throw ProtocolError(.badMessage, "the receiver sent \(frame.type) in the middle of an item")
        }
        let compressed = compressor?.compress(bytes)
        let payload = compressed.map { $0[...] } ?? bytes
        var header = Frame.header(
            type: compressed == nil ? type : .zchunk, length: ChunkHeader.size + payload.count)
        header += ChunkHeader(index: index, digest: digest).encoded()
        do {
            try connection.tls.write(header)
            if !payload.isEmpty { try connection.tls.write(payload) }
        } catch let error as TLSError where error.kind == .connectionLost {
            throw connection.pendingPeerError() ?? error
        }
        report.bytesSent += UInt64(bytes.count)
        report.wireBytes += UInt64(payload.count)
        progress.advance(bytes.count)
    }
}

/// Decides, chunk by chunk, whether zstd is worth it: a 64 KiB sample of every 16th chunk is compressed (cheap), and
/// only while samples shrink by at least a fifth are whole chunks compressed (level 1, about 400 MiB/s on one core
/// here); a chunk that does not shrink by 5 % goes as it is. Random or already-compressed content (video, archives)
/// thus costs well under 1 % extra CPU, and text, logs and source trees travel smaller.
final class ChunkCompressor {
    private var count = 0
    private var worthIt = false
    static let sampleSize = 64 << 10

    func compress(_ bytes: ArraySlice<UInt8>) -> [UInt8]? {
        defer { count += 1 }
        guard bytes.count >= 4096 else { return nil }
        if count % 16 == 0 {
            let sample = bytes.prefix(Self.sampleSize)
            let packed = sample.withUnsafeBytes { ZstdCodec.compress($0, worthIt: 0.2) }
            worthIt = packed != nil
        }
        guard worthIt else { return nil }
        let packed = bytes.withUnsafeBytes { ZstdCodec.compress($0) }
        if packed == nil { worthIt = false }
        return packed
    }
}

/// Cuts a byte stream into chunks of a fixed size.
private final class ChunkCutter {
    let chunkSize: Int
    var buffer: [UInt8]
    var fill = 0
    var index = 0
    var total: UInt64 = 0
    var digests: [[UInt8]]

    init(chunkSize: Int, chunks: Int) {
        self.chunkSize = chunkSize
        buffer = [UInt8](repeating: 0, count: chunkSize)
        digests = [[UInt8]](repeating: [], count: chunks)
    }

    func append(_ bytes: UnsafeRawBufferPointer, emit: (ArraySlice<UInt8>, Int) throws -> Void) throws {
        var offset = 0
        while offset < bytes.count {
            let n = min(chunkSize - fill, bytes.count - offset)
            guard index < digests.count else {
                throw ArchiveError(.sourceChanged, "the folder grew after it was offered")
            }
            buffer.withUnsafeMutableBytes { destination in
                destination.baseAddress!.advanced(by: fill).copyMemory(
                    from: bytes.baseAddress!.advanced(by: offset), byteCount: n)
            }
            fill += n
            offset += n
            total += UInt64(n)
            if fill == chunkSize {
                try emit(buffer[0..<fill], index)
                index += 1
                fill = 0
            }
        }
    }

    func finish(emit: (ArraySlice<UInt8>, Int) throws -> Void) throws {
        guard fill > 0 || (index == 0 && digests.count > 0) else { return }
        try emit(buffer[0..<fill], index)
        index += 1
        fill = 0
    }
}

/// Where chunk bytes come from.
final class ChunkSource: @unchecked Sendable {  // reads are positional; safe from two threads
    enum Origin { case memory, fileURL(URL) }

    let origin: Origin
    let size: UInt64
    private let fd: Int32
    private let bytes: [UInt8]

    private init(origin: Origin, size: UInt64, fd: Int32, bytes: [UInt8]) {
        self.origin = origin
        self.size = size
        self.fd = fd
        self.bytes = bytes
    }

    static func memory(_ bytes: [UInt8]) -> ChunkSource {
        ChunkSource(origin: .memory, size: UInt64(bytes.count), fd: -1, bytes: bytes)
    }

    static func open(_ url: URL) throws -> ChunkSource {
        let fd = Glibc.open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw ShareError(.noInput, "cannot open \(url.path): \(String(cString: strerror(errno)))")
        }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            Glibc.close(fd)
            throw ShareError(.noInput, "cannot read \(url.path)")
        }
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL)
        return ChunkSource(origin: .fileURL(url), size: UInt64(info.st_size), fd: fd, bytes: [])
    }

    var isFile: Bool { fd >= 0 }

    func length(of index: Int, chunkSize: Int) -> Int {
        let start = UInt64(index) * UInt64(chunkSize)
        return Int(min(UInt64(chunkSize), size - min(size, start)))
    }

    func read(index: Int, chunkSize: Int, into buffer: inout [UInt8]) throws -> Int {
        let length = length(of: index, chunkSize: chunkSize)
        let offset = index * chunkSize
        if fd < 0 {
            buffer.replaceSubrange(0..<length, with: bytes[offset..<(offset + length)])
            return length
        }
        do {
            return try Syscalls.pread(fd, into: &buffer, count: length, offset: Int64(offset))
        } catch {
            throw ShareError(.noInput, "cannot read the file being sent: \(error)")
        }
    }

    func close() {
        if fd >= 0 { Glibc.close(fd) }
    }
}

/// Hashes the chunks the receiver already holds, on its own thread, while the missing ones are sent.
final class HeldChunkHasher: @unchecked Sendable {  // result and cancelled guarded by `condition`
    private let condition = NSCondition()
    private var result: Result<[(Int, [UInt8])], Error>?
    private var cancelled = false

    init(source: ChunkSource, indices: [Int], chunkSize: Int) {
        let thread = Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: chunkSize)
            let hasher = SHA256Hasher()
            var out: [(Int, [UInt8])] = []
            do {
                for index in indices {
                    if isCancelled { throw CancellationError() }
                    let n = try source.read(index: index, chunkSize: chunkSize, into: &buffer)
                    hasher.update(buffer[0..<n])
                    out.append((index, hasher.finalize()))
                }
                finish(.success(out))
            } catch {
                finish(.failure(error))
            }
        }
        thread.start()
    }

    private func finish(_ value: Result<[(Int, [UInt8])], Error>) {
        condition.lock()
        result = value
        condition.broadcast()
        condition.unlock()
    }

    private var isCancelled: Bool { condition.withLock { cancelled } }

    /// Stops hashing (after the chunk in progress) and waits until the thread is done with the source.
    func cancelAndWait() {
        condition.lock()
        defer { condition.unlock() }
        cancelled = true
        while result == nil { condition.wait() }
    }

    func wait() throws -> [(Int, [UInt8])] {
        condition.lock()
        defer { condition.unlock() }
        while result == nil { condition.wait() }
        return try result!.get()
    }
}
