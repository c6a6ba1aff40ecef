import FoundationEssentials
import ShareNet
import ShareText
import Synchronization
import ShareDisk
import ShareTrust
import ShareProtocol
import ShareTLS
import ShareEngine
import ShareWormhole
import CoreTransferable
import UniformTypeIdentifiers

/// Where sends by code meet and relay: the servers the `wormhole` command uses unless `agent.json` names others
/// (`"wormhole": {"server": "ws://HOST:PORT/v1", "relay": "tcp:HOST:PORT"}`) or the command line does.
package struct CodeOptions: Sendable {
    package var wormhole = WormholeOptions()
    package var transfer = WormholeTransferOptions()

    package init() {}

    package static func load(_ paths: DevicePaths) throws -> CodeOptions {
        var options = CodeOptions()
        let file = paths.agentConfigFile
        guard let data = PosixFiles.read(file.path) else { return options }
        guard let object = JSONText.object(data) else {
            throw ShareFailure(.configuration, "\(file.path) is not a JSON object; fix or remove it")
        }
        guard let wormhole = object["wormhole"] else { return options }
        guard let settings = wormhole as? [String: Any] else {
            throw ShareFailure(.configuration, "\(file.path): \"wormhole\" must be an object with server and relay")
        }
        if let server = settings["server"] as? String { options.wormhole.server = server }
        if let relay = settings["relay"] as? String {
            do {
                options.transfer.relays = [try TransitHint(parsing: relay)]
            } catch {
                throw ShareFailure(.configuration, "\(file.path): \(error.message)")
            }
        }
        return options
    }
}

/// What share says of itself in magic-wormhole's version exchange, so that two share ends move to share's own
/// session: the one-off certificate it will present. The exchange is encrypted and authenticated by the key both
/// sides derived from the code, so each end pins exactly the certificate the other end announced.
enum ShareCodeVersion {
    static let key = "share-v1"
    /// The transit key's purpose between two share ends (not the wormhole transfer's: the connections differ).
    static let transitPurpose = "share/code/transit-key"

    static func ours(_ device: DeviceID) -> [String: Any] { [key: ["device": device.description]] }

    static func theirs(_ versions: [String: Any]) -> DeviceID? {
        guard let share = versions[key] as? [String: Any], let text = share["device"] as? String else { return nil }
        return try? DeviceID(parsing: text)
    }

    /// The id a receiver keeps an interrupted transfer under: the same for the same code (the one-off certificates
    /// change every run), so running both ends again with that code resumes.
    static func resumeID(_ code: WormholeCode) -> DeviceID {
        DeviceID(bytes: SHA256Hasher.hash(Array("share code resume\0\(code)".utf8)))
    }

    /// Both ends' transit messages, then the race; the winner's socket, for TLS.
    static func connect(_ session: WormholeSession, role: Transit.Role, options: CodeOptions) throws(WormholeError)
        -> (fd: Int32, route: String)
    {
        let transit = Transit(
            role: role, relays: options.transfer.relays, listen: options.transfer.listen,
            addresses: options.transfer.addresses)
        let ours: [String: Any] = ["transit": ["abilities-v1": Transit.abilities, "hints-v1": transit.hints]]
        if role == .sender { try session.send(ours) }
        var theirs: [String: Any]?
        while theirs == nil {
            let message = try session.receive()
            theirs = message["transit"] as? [String: Any]
        }
        if role == .receiver { try session.send(ours) }
        transit.add(theirHints: theirs?["hints-v1"] as? [Any] ?? [])
        let connection = try transit.connect(
            key: session.derivedKey(purpose: transitPurpose), timeout: options.transfer.connectTimeout)
        return (connection.takeDescriptor(), connection.route)
    }
}

extension WormholeError {
    /// The same failure as share reports others: one line, and the exit status its kind calls for.
    var failure: ShareFailure {
        switch code {
        case .badCode: return ShareFailure(.usage, message)
        case .wrongCode, .badPAKE: return ShareFailure(.refused, message + " (ask for the code again)")
        case .refused: return ShareFailure(.refused, message)
        case .expired, .server, .transit: return ShareFailure(.unavailable, message)
        case .hostile, .badMessage: return ShareFailure(.protocolError, message)
        case .disk: return ShareFailure(.cannotCreate, message)
        }
    }
}

/// `share send --code`: a code for one exchange. A share receiver gets share's whole engine (TLS pinned through
/// the code, the offer and its accept list, previews, verified chunks, compression, resume); a magic-wormhole
/// client gets the one item it can take, by magic-wormhole's own transfer protocol.
package enum CodeSend {
    package struct Outcome: Sendable {
        /// The receiver was share (the engine's report), else a wormhole client (the transfer's).
        package var report: SendReport?
        package var wormhole: WormholeTransferReport?
        package var peerName: String
    }

    /// `code`: the one to use (else the mailbox server allocates a nameplate); `announce` is called with the code as
    /// soon as it is known. `plain` is the item for a wormhole client (nil when the send has several).
    package static func run(
        items: [ShareItem], plain: WormholeSender.Item?, name: String, paths: DevicePaths, code: WormholeCode?,
        options: CodeOptions, sending: SendOptions, progress: ProgressReporter, announce: (WormholeCode) -> Void
    ) throws -> Outcome {
        do {
            let session: WormholeSession
            if let code {
                session = try WormholeSession.join(code, options: options.wormhole)
            } else {
                session = try WormholeSession.allocate(options: options.wormhole)
            }
            announce(session.code)
            var mood = "errory"
            defer { session.close(mood: mood) }
            let device = try LocalDevice.oneOff(name: name, paths: paths)
            // A wrong code closes the mailbox as "scary" there.
            try session.establish(versions: ShareCodeVersion.ours(device.id))
            guard let theirs = ShareCodeVersion.theirs(session.theirVersions) else {
                guard let plain else {
                    // The client is told why, as wormhole's own sender tells it (an `error` message in place of the
                    // offer): it prints the reason and exits instead of waiting.
                    try? session.send([
                        "error": "the sender has several items, and a magic-wormhole client takes one per code"
                    ])
                    throw ShareFailure(
                        .usage,
                        "the receiver is a magic-wormhole client, which takes one file, folder or text per code; "
                            + "send a folder, or receive with share")
                }
                var transfer = options.transfer
                transfer.progress = progress.wormholeProgress(label: plain.label)
                let report = try WormholeSender.send(plain, over: session, options: transfer)
                progress.finishWormhole()
                mood = "happy"
                return Outcome(wormhole: report, peerName: "a wormhole client")
            }
            let (fd, route) = try ShareCodeVersion.connect(session, role: .sender, options: options)
            let tls = try SessionOpener.establish(
                fileDescriptor: fd, remoteAddress: route, from: device, hello: Hello(name: name, role: .cli),
                verifier: { $0 == theirs }, timeouts: sending.timeouts, route: .code(route))
            defer { tls.connection.close() }
            let relation = AccessPolicy.visibility(for: nil)
            let peerName = tls.peerHello.name
            let report = try SendSession(device: device, progress: progress, options: sending).serve(
                tls, peerName: peerName, items: try items.map { try $0.outgoing(for: relation) })
            mood = "happy"
            return Outcome(report: report, peerName: peerName)
        } catch let error as WormholeError {
            throw error.failure
        }
    }
}

/// `share receive CODE`: joins the exchange, shows what is offered, and receives what the user accepts through the
/// same disk layer and limits as any receive. Nothing is added to the trust store; the sender is a stranger met by
/// code, which the policy lets deliver the accepted items and nothing else.
package enum CodeReceive {
    package struct Outcome: Sendable {
        package var report: ReceiveReport?
        package var wormhole: WormholeTransferReport?
        package var peerName: String
    }

    /// `ask` decides on a wormhole client's offer; a share sender's offer goes through `receive.gate`.
    package static func run(
        code: WormholeCode, name: String, paths: DevicePaths, receive: ReceiveOptions, options: CodeOptions,
        progress: ProgressReporter, timeouts: SessionTimeouts = SessionTimeouts(),
        ask: (WormholeOffer) -> Bool
    ) throws -> Outcome {
        guard case .allowed = AccessPolicy.decide(.sendToInbox, stranger: .byCode, localName: name) else {
            throw ShareFailure(.refused, "this device takes nothing by code")
        }
        do {
            let session = try WormholeSession.join(code, options: options.wormhole)
            var mood = "errory"
            defer { session.close(mood: mood) }
            let device = try LocalDevice.oneOff(name: name, paths: paths)
            // A wrong code closes the mailbox as "scary" there.
            try session.establish(versions: ShareCodeVersion.ours(device.id))
            guard let theirs = ShareCodeVersion.theirs(session.theirVersions) else {
                let folder: Directory
                do {
                    folder = try Directory.open(receive.directory.path, create: true, mode: receive.folderMode)
                } catch let error as DiskError {
                    throw ShareFailure(
                        .cannotCreate, "cannot receive into \(receive.directory.path): \(error.message)")
                }
                var transfer = options.transfer
                transfer.progress = progress.wormholeProgress(label: "from \(code)")
                // The receiver's accept list and limits, as for any sender: on the offer, then on what arrives.
                transfer.maxSize = receive.maxSize
                let negotiator = Negotiator(accept: receive.accept)
                transfer.refuse = { offer in
                    let offered: OfferedRepresentation
                    switch offer {
                    case .text(let text):
                        offered = OfferedRepresentation(
                            contentType: UTType.utf8PlainText.identifier, kind: .data, size: UInt64(text.utf8.count))
                    case .file(let name, let size):
                        let type = UTType(filenameExtension: PathText.pathExtension(name)) ?? .data
                        offered = OfferedRepresentation(contentType: type.identifier, kind: .file, size: size)
                    case .directory(_, _, let bytes, _):
                        offered = OfferedRepresentation(
                            contentType: UTType.folder.identifier, kind: .archive, size: bytes)
                    }
                    if case .failure(let failure) = negotiator.choose(from: [offered], senderDeclarations: []) {
                        return failure.description
                    }
                    return nil
                }
                let report = try WormholeReceiver.receive(
                    over: session, into: folder, folderURL: receive.directory, options: transfer,
                    decide: { offer in ask(offer) ? .accept : .decline("declined by the receiver") })
                progress.finishWormhole()
                mood = "happy"
                return Outcome(wormhole: report, peerName: "a wormhole client")
            }
            let (fd, route) = try ShareCodeVersion.connect(session, role: .receiver, options: options)
            let context = try TLSContext(identity: device.identity, role: .server, verifier: { $0 == theirs })
            let tls = try SessionOpener.accept(
                fileDescriptor: fd, remoteAddress: route, context: context,
                hello: ReceiveSession.hello(name: name, accept: receive.accept), timeouts: timeouts,
                route: .code(route))
            defer { tls.connection.close() }
            let peerName = ProgressReporter.neutralized(tls.peerHello.name) + " (by code)"
            let report = try ReceiveSession(options: receive, progress: progress).serve(
                tls.keyed(as: ShareCodeVersion.resumeID(code)), peerName: peerName, peer: nil)
            mood = "happy"
            return Outcome(report: report, peerName: peerName)
        } catch let error as WormholeError {
            throw error.failure
        }
    }
}

extension WormholeSender.Item {
    var label: String {
        switch self {
        case .text: return "text"
        case .file(let url), .directory(let url): return url.lastPathComponent
        }
    }
}

extension ProgressReporter {
    /// Progress of a magic-wormhole transfer (one item, bytes as they go), drawn like any other item's.
    func wormholeProgress(label: String) -> @Sendable (UInt64, UInt64) -> Void {
        let reported = Mutex<UInt64?>(nil)
        return { [self] done, total in
            let previous = reported.withLock { last in
                defer { last = done }
                return last
            }
            if previous == nil {
                setSessionTotal(total, count: 1)
                startItem(label, number: 1, total: total, alreadyHeld: 0)
            }
            advance(Int(done &- (previous ?? 0)))
        }
    }

    func finishWormhole() { finishItem() }
}
