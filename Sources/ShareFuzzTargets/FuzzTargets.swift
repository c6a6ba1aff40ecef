import ShareHTTP
import CoreTransferable
import Foundation
import ShareArchive
import ShareTrust
import ShareProtocol
import ShareReach
import ShareTLS
import UniformTypeIdentifiers
import ShareNet

/// Every decoder that reads bytes a peer controls, as a function of those bytes. Errors are the expected answer to
/// bad input; a crash, a trap or a sanitizer report is a bug. The fuzzer (`share-fuzz` built by `scripts/fuzz.sh`)
/// and the regression tests (`FuzzRegressionTests`, every committed input) run the same functions.
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// A byte stream of frames as a receiving session reads it, driving the receiver's state machine.
    case frames
    /// One control message: the first byte picks the type, the rest is its JSON payload.
    case messages
    /// Custom type declarations, as a property list or JSON.
    case declarations
    /// A device ID as a user or a peer writes it.
    case deviceID = "device-id"
    /// A tar, pax or zip stream extracted under the network extraction policy.
    case archive
    /// What a relay or a discovery server sends: relay messages (first byte 0), or an HTTP answer (first byte 1).
    case servers

    public func run(_ bytes: [UInt8]) {
        switch self {
        case .frames: Self.receiveFrames(bytes)
        case .messages: Self.messages(bytes)
        case .declarations: Self.declarations(bytes)
        case .deviceID: Self.deviceID(bytes)
        case .archive: Self.archive(bytes)
        case .servers: Self.serverMessages(bytes)
        }
    }

    // MARK: frames

    /// Runs the receiver driver — the one every receiving session uses — over `bytes` as the incoming stream, into
    /// a sink that keeps nothing. Returns whether the session completed (a whole well-formed session does).
    @discardableResult
    static func receiveFrames(_ bytes: [UInt8]) -> Bool {
        let accept = AcceptList([AcceptedType(.plainText, maxSize: 1 << 20), AcceptedType(.item, maxSize: 64 << 20)])
        let machine = ReceiverMachine(
            negotiator: Negotiator(accept: accept), policy: .init(maxItemSize: 64 << 20, freeSpace: 1 << 30))
        let driver = ReceiverDriver(channel: FrameChannel(stream: FuzzStream(bytes)), hasher: FuzzHasher())
        var first: Frame?
        // A session starts with the sender's hello, read by the session layer before the driver.
        let channel = driver.channel
        do {
            let hello = try channel.receive()
            if hello.type == .hello {
                try MessageCoding.decode(Hello.self, from: hello).validate()
            } else {
                first = hello
            }
            _ = try driver.run(machine: machine, sink: DiscardingSink(), first: first)
            return true
        } catch {
            return false
        }
    }

    // MARK: messages

    static let messageTypeCount = 15

    static func messages(_ bytes: [UInt8]) {
        guard let first = bytes.first else { return }
        let payload = Data(bytes.dropFirst())
        let decoder = JSONDecoder()
        switch Int(first) % messageTypeCount {
        case 0: try? (try? decoder.decode(Hello.self, from: payload))?.validate()
        case 1: try? (try? decoder.decode(Offer.self, from: payload))?.validate()
        case 2: _ = try? decoder.decode(Select.self, from: payload)
        case 3: _ = try? decoder.decode(Resume.self, from: payload)
        case 4: _ = try? decoder.decode(Done.self, from: payload)
        case 5: _ = try? decoder.decode(Ack.self, from: payload)
        case 6: _ = try? decoder.decode(Ping.self, from: payload)
        case 7: _ = try? decoder.decode(PairDecision.self, from: payload)
        case 8: _ = try? decoder.decode(ClipboardRequest.self, from: payload)
        case 9: _ = try? decoder.decode(ClipboardInfo.self, from: payload)
        case 10: _ = try? decoder.decode(ProtocolError.self, from: payload)
        case 11: _ = try? decoder.decode(Bye.self, from: payload)
        // A folder's messages, read as a link or a pull reads them (binary or JSON).
        case 12: _ = try? FolderPull.decode(Frame(type: .folderPull, payload: Array(payload)))
        case 13: _ = try? IndexUpdate.decode(Array(payload))
        default: _ = try? FolderFiles.decode(Array(payload), codec: nil)
        }
    }

    // MARK: declarations

    static func declarations(_ bytes: [UInt8]) {
        guard let declarations = try? UTTypeDeclaration.parse(Data(bytes), name: "fuzz input") else { return }
        // What a receiver does with a peer's declarations: resolve them beside the system types and negotiate.
        let accept = AcceptList(
            declarations.prefix(8).map { AcceptedType(identifier: $0.identifier) }, declarations: declarations)
        _ = Negotiator(accept: accept)
        for declaration in declarations.prefix(8) {
            _ = UTType(declaration.identifier)?.conforms(to: .data)
        }
    }

    // MARK: device-id

    static func deviceID(_ bytes: [UInt8]) {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let id = try? DeviceID(parsing: text) else { return }
        guard let again = try? DeviceID(parsing: id.description), again == id else {
            fatalError("device ID \(id) does not parse back from its own text")
        }
    }

    // MARK: archive

    static func archive(_ bytes: [UInt8]) {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent(
            "share-fuzz-\(getpid())-\(UUID().uuidString)", isDirectory: true)
        let root = base.appendingPathComponent("root", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: base) }
        do {
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        } catch {
            fatalError("cannot create \(root.path): \(error)")
        }
        var policy = ExtractionPolicy()
        policy.maxEntries = 2_000
        policy.maxTotalBytes = 16 << 20
        policy.ratioFloor = 1 << 20
        var completed = false
        if let extraction = try? StreamExtraction(rootPath: root.path, policy: policy) {
            var offset = 0
            var failed = false
            while offset < bytes.count, !failed {
                let end = min(bytes.count, offset + 4096)
                failed = (try? extraction.push(bytes[offset..<end])) == nil
                offset = end
            }
            if failed { extraction.cancel() } else { completed = (try? extraction.finish()) != nil }
        }
        // The oracle: whatever the input, nothing may appear beside the extraction root, and a completed
        // extraction holds no link that resolves outside it.
        let beside = (try? FileManager.default.contentsOfDirectory(atPath: base.path)) ?? []
        if beside != ["root"] { fatalError("extraction wrote outside its root: \(beside)") }
        guard completed else { return }
        let resolvedRoot = root.resolvingSymlinksInPath().path
        for path in (try? FileManager.default.subpathsOfDirectory(atPath: root.path)) ?? [] {
            let full = root.appendingPathComponent(path)
            guard (try? FileManager.default.destinationOfSymbolicLink(atPath: full.path)) != nil else { continue }
            let resolved = full.resolvingSymlinksInPath().path
            if resolved != resolvedRoot && !resolved.hasPrefix(resolvedRoot + "/") {
                fatalError("the extracted link \(path) resolves outside the root, to \(resolved)")
            }
        }
    }

    // MARK: servers

    /// Relay messages read one after another as a relay connection does (header, then a body of the length it
    /// gives, within the limit), or an HTTP answer parsed as it arrives in two pieces and whole.
    static func serverMessages(_ bytes: [UInt8]) {
        guard let kind = bytes.first else { return }
        let rest = Array(bytes.dropFirst())
        if kind % 2 == 0 {
            var offset = 0
            while offset + RelayMessage.headerSize <= rest.count {
                guard
                    let (type, length) = try? RelayMessage.parseHeader(
                        Array(rest[offset..<(offset + RelayMessage.headerSize)]))
                else { return }
                offset += RelayMessage.headerSize
                guard offset + length <= rest.count else { return }
                if let message = try? RelayMessage.decode(type: type, body: Array(rest[offset..<(offset + length)])) {
                    // What decodes encodes back to the same bytes, padding aside.
                    let again = message.encoded()
                    precondition(Array(again.prefix(8)) == Array(rest[(offset - 12)..<(offset - 4)]))
                    if case .sessionInvitation(let invitation) = message { _ = invitation.host }
                }
                offset += length
            }
        } else {
            let cut = rest.count / 2
            _ = try? HTTPResponse.parse(Array(rest[0..<cut]), complete: false)
            _ = try? HTTPResponse.parse(rest, complete: true)
        }
    }
}

/// The bytes of a fuzz input as a stream that ends where they end; what is written is dropped.
final class FuzzStream: ByteStream {
    private let bytes: [UInt8]
    private var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let n = min(buffer.count, bytes.count - offset)
        guard n > 0 else { return 0 }
        bytes.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + n)])) }
        offset += n
        return n
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {}
    var hasInput: Bool { true }
    func setReadTimeout(_ seconds: Double) {}
}

/// SHA-256 for the driver.
final class FuzzHasher: ChunkHasher {
    private let hasher = SHA256Hasher()
    var algorithm: DigestAlgorithm { .sha256 }
    func another() -> ChunkHasher { FuzzHasher() }
    func make(_ algorithm: DigestAlgorithm) -> ChunkHasher { algorithm == .sha256 ? FuzzHasher() : BLAKE3Hasher() }

    func digest(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        hasher.update(bytes)
        return hasher.finalize()
    }
}

/// A sink with nothing held that keeps nothing: every verified item is acknowledged.
final class DiscardingSink: ItemSink, IncomingPayload {
    let held: [Int: [UInt8]] = [:]
    private var item = ""

    func held(item: OfferItem, representation: OfferedRepresentation, chunkSize: Int) -> HeldChunks { .nothing }

    func open(item: OfferItem, representation: OfferedRepresentation, chunkSize: Int, digest: DigestAlgorithm)
        throws -> IncomingPayload
    {
        self.item = item.id
        return self
    }

    func write(index: Int, bytes: UnsafeRawBufferPointer, digest: [UInt8]) throws {}
    func complete(done: Done) throws -> Ack { Ack(item: item, outcome: "discarded") }
    func discard() {}
    func suspend() {}
}
