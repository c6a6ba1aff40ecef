import CoreTransferable
import Foundation
import Glibc
import ShareArchive
import ShareDisk
import ShareProfiles
import ShareProtocol
import ShareTLS

public struct ReceiveOptions: Sendable {
    /// Where items are saved.
    public var directory: URL
    /// What this receiver accepts, in order.
    public var accept: AcceptList
    /// Largest item accepted.
    public var maxSize: UInt64?
    /// Text and URLs up to this size are printed rather than saved.
    public var printLimit = 1 << 20
    /// Partials not touched for this long are removed when a session starts.
    public var partialMaxAge: TimeInterval = 24 * 3600
    /// Flush each completed item to disk before it is moved into place (survives a power loss right after).
    public var durable = false
    /// Profiles received in their rich form are imported here (the same id updates, never duplicates).
    public var catalogFile: URL?
    /// Where imported profiles' portraits and videos go (beside the catalog when nil).
    public var mediaDirectory: URL?
    /// When set, received text and URLs are appended here (one JSON object per line) rather than printed: the
    /// agent's history, listed by `share inbox`.
    public var history: TextHistory?
    /// Set when an agent receives items to pass on to this device (its watch, or a device its watch sends to): every
    /// item is kept as it arrived (nothing printed, imported or added to the history) and acknowledged as relayed.
    public var relayTo: String?

    public init(directory: URL, accept: AcceptList, maxSize: UInt64? = nil) {
        self.directory = directory
        self.accept = accept
        self.maxSize = maxSize
    }

    /// Accept anything, the sender's first representation first.
    public static let everything = AcceptList([AcceptedType(.item)])
}

/// What happened to each offered item.
public struct ReceiveReport: Sendable {
    /// An item kept on disk, with the type it arrived as.
    public struct SavedItem: Sendable {
        public var url: URL
        public var contentType: String
        public var label: String
    }

    public var saved: [URL] = []
    public var savedItems: [SavedItem] = []
    public var printed: [String] = []
    public var importedProfiles: [String] = []
    public var refused: [(label: String, reason: String)] = []
    public var bytesReceived: UInt64 = 0
    public var bytesAlreadyHeld: UInt64 = 0
}

/// Drives `ReceiverMachine` over one authenticated session: negotiates, resumes partials, verifies every chunk and
/// the whole item, and moves only verified items into place.
public final class ReceiveSession: @unchecked Sendable {  // used by one thread
    let options: ReceiveOptions
    let progress: ProgressReporter
    let store: PartialStore
    private var report = ReceiveReport()
    private var incoming: IncomingPayload?
    private var currentPeer = ""
    /// Catalog imports from concurrent sessions (an agent) happen one at a time.
    static let catalogLock = NSLock()

    public init(options: ReceiveOptions, progress: ProgressReporter) throws {
        self.options = options
        self.progress = progress
        store = try PartialStore(directory: options.directory)
        // The types this receiver imports are known before any offer names them.
        _ = (UTType.shareProfile, UTType.shareProfilesArchive)
    }

    /// The hello this receiver answers with: its name and accept list.
    public static func hello(name: String, accept: AcceptList) -> Hello {
        Hello(name: name, role: .cli, accept: accept, compression: ["zstd"])
    }

    /// Serves one session. `first` is a frame already read from it (the agent reads one to tell a ping from an
    /// offer).
    public func serve(_ session: Session, peerName: String, first: Frame? = nil) throws -> ReceiveReport {
        var pending = first
        currentPeer = peerName
        store.removeStale(maxAge: options.partialMaxAge)
        let policy = ReceiverMachine.Policy(
            maxItemSize: options.maxSize, freeSpace: Syscalls.freeSpace(options.directory.path))
        var machine = ReceiverMachine(negotiator: Negotiator(accept: options.accept), policy: policy)
        let hasher = SHA256Hasher()
        var peerFailed = false
        do {
            var chunk = [UInt8](repeating: 0, count: 1 << 20)
            var plain = [UInt8]()
            while true {
                let incomingFrame: FramedConnection.Incoming
                if let frame = pending {
                    incomingFrame = .control(frame)
                    pending = nil
                } else {
                    incomingFrame = try session.connection.receive(chunk: &chunk)
                }
                var actions: [ReceiverMachine.Action]
                let frame: Frame
                switch incomingFrame {
                case .binary(let type, let header, var length):
                    if type == .zchunk {
                        length = try decompress(chunk[0..<length], index: header.index, machine: machine, into: &plain)
                        swap(&chunk, &plain)
                    }
                    let data = chunk[0..<length]
                    hasher.update(data)
                    guard hasher.finalize() == header.digest else {
                        throw ProtocolError(.digestMismatch, "chunk \(header.index) does not match its digest")
                    }
                    actions = try machine.receivedChunk(index: header.index, length: length)
                    for case .write(let index) in actions {
                        try incoming?.write(index: index, bytes: data, digest: header.digest)
                        report.bytesReceived += UInt64(length)
                        progress.advance(length)
                    }
                    continue
                case .control(let control):
                    frame = control
                }
                switch frame.type {
                case .offer:
                    actions = try machine.received(MessageCoding.decode(Offer.self, from: frame))
                case .done:
                    actions = try machine.received(MessageCoding.decode(Done.self, from: frame))
                case .bye:
                    actions = try machine.receivedBye()
                case .error:
                    let error = MessageCoding.peerError(from: frame)
                    peerFailed = true
                    if error.code == .sourceChanged {
                        incoming?.discard()
                        incoming = nil
                    }
                    throw error
                default:
                    throw ProtocolError(.badMessage, "the sender sent \(frame.type) out of place")
                }
                if try perform(actions, machine: &machine, session: session, peerName: peerName, peerID: session.peerID)
                {
                    return report
                }
            }
        } catch let error as ProtocolError {
            machine.failed()
            incoming?.suspend()
            if !peerFailed { session.connection.fail(with: error) }
            throw error
        } catch {
            machine.failed()
            incoming?.suspend()
            throw error
        }
    }

    /// Decodes a zstd chunk into `output`; its length must be the one the item's size implies.
    private func decompress(
        _ compressed: ArraySlice<UInt8>, index: Int, machine: ReceiverMachine, into output: inout [UInt8]
    ) throws -> Int {
        guard let expected = machine.expectedLength(of: index) else {
            throw ProtocolError(.badMessage, "compressed chunk \(index) is outside an item of known size")
        }
        if output.count < expected + 1 { output = [UInt8](repeating: 0, count: expected + 1) }
        do {
            try compressed.withUnsafeBytes { source in
                try output.withUnsafeMutableBytes { try ZstdCodec.decompress(source, into: $0, expected: expected) }
            }
        } catch let error as ArchiveError {
            throw ProtocolError(.badMessage, "chunk \(index): \(error.message)")
        }
        return expected
    }

    /// Performs actions; returns true when the session is complete.
    private func perform(
        _ actions: [ReceiverMachine.Action], machine: inout ReceiverMachine, session: Session,
        peerName: String, peerID: DeviceID
    ) throws -> Bool {
        var queue = actions
        while !queue.isEmpty {
            let action = queue.removeFirst()
            switch action {
            case .sendSelect(let select):
                let offer = machine.offer!
                var total: UInt64 = 0
                for (item, choice) in zip(offer.items, select.choices) {
                    let types = item.representations.map(\.contentType).joined(separator: ", ")
                    if let index = choice.representation {
                        total += item.representations[index].size ?? 0
                        progress.note(
                            "from \(peerName): \(item.label): offered \(types); chose \(item.representations[index].contentType) — \(choice.reason)",
                            event: "chosen",
                            fields: [
                                "item": item.label, "type": item.representations[index].contentType,
                                "offered": item.representations.map(\.contentType),
                            ])
                    } else {
                        report.refused.append((item.label, choice.reason))
                        progress.note(
                            "from \(peerName): \(item.label): offered \(types); refused — \(choice.reason)",
                            event: "refused", fields: ["item": item.label, "reason": choice.reason])
                    }
                }
                progress.setSessionTotal(total, count: select.choices.filter { $0.representation != nil }.count)
                try session.connection.send(.select, select)
            case .prepare(let index, let representation):
                let offer = machine.offer!
                let item = offer.items[index]
                let chosen = item.representations[representation]
                let opened: IncomingPayload
                if Self.isArchive(chosen) {
                    var policy = ExtractionPolicy()
                    if let maxSize = options.maxSize { policy.maxTotalBytes = maxSize }
                    opened = try store.openArchive(
                        sender: peerID, item: item, representation: chosen, chunkSize: offer.chunkSize,
                        policy: policy)
                } else {
                    opened = try store.open(
                        sender: peerID, item: item, representation: chosen, chunkSize: offer.chunkSize)
                }
                incoming = opened
                let held = opened.verifiedBytes(size: chosen.size)
                report.bytesAlreadyHeld += held
                if held > 0 {
                    progress.note(
                        "resuming \(item.label): \(ProgressReporter.bytes(held)) already verified", event: "resume",
                        fields: ["item": item.label, "held": held])
                }
                progress.startItem(item.label, number: index + 1, total: chosen.size, alreadyHeld: held)
                queue = try machine.prepared(verified: opened.verified) + queue
            case .sendResume(let resume):
                try session.connection.send(.resume, resume)
            case .write:
                break
            case .verify(let index, let done):
                progress.finishItem()
                let ack = try finish(
                    item: machine.offer!.items[index], representation: machine.choices[index].representation!,
                    done: done)
                queue = try machine.verified(ack) + queue
            case .sendAck(let ack):
                try session.connection.send(.ack, ack)
            case .complete:
                return true
            }
        }
        return false
    }

    /// A tar stream to extract as it arrives (rather than a file to store).
    static func isArchive(_ representation: OfferedRepresentation) -> Bool {
        guard representation.kind == .archive, let type = UTType(representation.contentType) else { return false }
        return type.conforms(to: .tarArchive)
    }

    /// Verifies the whole item and stores it: small text and URLs are printed, folders are moved into place,
    /// profiles are imported, everything else is saved.
    private func finish(item: OfferItem, representation: Int, done: Done) throws -> Ack {
        guard let incoming else { throw ProtocolError(.internalError, "no item in progress") }
        self.incoming = nil
        let chosen = item.representations[representation]
        if incoming is IncomingArchive {
            return try finishArchive(incoming, item: item, chosen: chosen, done: done)
        }
        let type = UTType(chosen.contentType) ?? UTType(identifier: chosen.contentType, allowUndeclared: true)
        if options.relayTo != nil {
            var name = FileNamesOnDisk.sanitize(chosen.suggestedFileName ?? item.label, fallback: "item")
            name = withExtension(name, type)
            let target = try incoming.complete(done: done, name: name, durable: options.durable)
            return saved(target, item: item, type: chosen.contentType)
        }
        if let catalogFile = options.catalogFile, type?.conforms(to: .shareProfile) == true, done.size <= 16 << 20 {
            let received = try incoming.complete(
                done: done, name: ".share-profile-\(UUID().uuidString)", durable: false)
            defer { unlink(received.path) }
            // A path from another machine names nothing here: the profile arrives without portrait and video
            // (they travel inside a profiles bundle), and keeps the ones this catalog already has for it.
            guard let profile = try? JSONDecoder().decode(Profile.self, from: Data(contentsOf: received)).withoutMedia
            else {
                throw ProtocolError(.badMessage, "\(item.label) is not a valid profile")
            }
            let isNew = try Self.catalogLock.withLock {
                try ProfilesArchive(profiles: [profile]).merge(into: catalogFile).added == 1
            }
            report.importedProfiles.append(profile.name)
            progress.note(
                "\(isNew ? "imported" : "updated") profile \(profile.name)", event: "imported",
                fields: ["item": item.label, "profile": profile.name])
            return Ack(item: item.id, outcome: isNew ? "imported" : "updated")
        }
        // Plain text and URLs are printed; structured text (CSV, JSON, source code) is saved as a file.
        let printable =
            type.map { [UTType.plainText, .utf8PlainText, .utf16PlainText].contains($0) || $0.conforms(to: .url) }
            ?? false
        if printable, done.size <= UInt64(options.printLimit) {
            let received = try incoming.complete(done: done, name: ".share-text-\(UUID().uuidString)", durable: false)
            defer { unlink(received.path) }
            let data = (try? Data(contentsOf: received)) ?? Data()
            if let text = String(data: data, encoding: .utf8) {
                report.printed.append(text)
                if let history = options.history {
                    try history.append(
                        TextHistory.Entry(
                            date: Date(), from: currentPeer, type: chosen.contentType, text: text))
                    progress.note(
                        "kept \(item.label) from \(currentPeer) in the inbox history", event: "kept",
                        fields: ["item": item.label])
                    return Ack(item: item.id, outcome: "kept")
                }
                progress.output(text, fields: ["item": item.label, "type": chosen.contentType])
                return Ack(item: item.id, outcome: "printed")
            }
            // Not UTF-8 after all: keep it as a file.
            let name = FileNamesOnDisk.sanitize(chosen.suggestedFileName ?? item.label, fallback: "text")
            let target = FileNamesOnDisk.unique(withExtension(name, type), in: options.directory)
            try FileManager.default.moveItem(at: received, to: target)
            return saved(target, item: item, type: chosen.contentType)
        }
        var name = FileNamesOnDisk.sanitize(chosen.suggestedFileName ?? item.label, fallback: "item")
        name = withExtension(name, type)
        let target = try incoming.complete(done: done, name: name, durable: options.durable)
        return saved(target, item: item, type: chosen.contentType)
    }

    private func finishArchive(
        _ incoming: IncomingPayload, item: OfferItem, chosen: OfferedRepresentation, done: Done
    ) throws -> Ack {
        let type = UTType(chosen.contentType)
        if options.relayTo == nil, let catalogFile = options.catalogFile, let type,
            type.conforms(to: .shareProfilesArchive)
        {
            let folder = try incoming.complete(done: done, name: ".share-profiles-\(UUID().uuidString)", durable: false)
            defer { IncomingArchive.removeTree(folder) }
            let result: ProfilesArchive.ImportResult
            do {
                let media = (options.mediaDirectory ?? catalogFile.deletingLastPathComponent()).path
                result = try Self.catalogLock.withLock {
                    try ProfilesArchive.importBundle(
                        at: try Directory.open(folder.path), into: catalogFile,
                        media: try Directory.open(media, create: true, mode: 0o700))
                }
            } catch {
                throw ProtocolError(.unsafeArchive, "\(item.label) is not a valid profiles archive: \(error)")
            }
            report.importedProfiles += result.names
            progress.note(
                "imported \(result.added) and updated \(result.updated) profiles: \(result.names.joined(separator: ", "))",
                event: "imported", fields: ["item": item.label, "profiles": result.names])
            return Ack(item: item.id, outcome: "imported")
        }
        let name = FileNamesOnDisk.sanitize(chosen.suggestedFileName ?? item.label, fallback: "folder")
        let target = try incoming.complete(done: done, name: name, durable: options.durable)
        return saved(target, item: item, type: chosen.contentType)
    }

    private func saved(_ target: URL, item: OfferItem, type: String) -> Ack {
        report.saved.append(target)
        report.savedItems.append(ReceiveReport.SavedItem(url: target, contentType: type, label: item.label))
        if let relayTo = options.relayTo {
            progress.note(
                "kept \(item.label) to pass on to \(relayTo)", event: "relayed",
                fields: ["item": item.label, "to": relayTo])
            return Ack(item: item.id, outcome: "relayed to \(relayTo)")
        }
        progress.note(
            "saved \(item.label) as \(target.path)", event: "saved", fields: ["item": item.label, "path": target.path])
        return Ack(item: item.id, outcome: "saved", savedAs: target.lastPathComponent)
    }

    private func withExtension(_ name: String, _ type: UTType?) -> String {
        guard (name as NSString).pathExtension.isEmpty, let ext = type?.preferredFilenameExtension else { return name }
        return name + "." + ext
    }
}
