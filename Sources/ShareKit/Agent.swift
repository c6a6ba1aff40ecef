import CoreTransferable
import Foundation
import ShareProtocol
import ShareTLS

/// What an agent receives and where it keeps it.
public struct AgentInbox: Sendable {
    /// Items land in `<directory>/<peer name>/`; text and URLs in `<directory>/history.jsonl`.
    public var directory: URL
    public var accept: AcceptList
    public var maxSize: UInt64?

    public init(directory: URL, accept: AcceptList = ReceiveOptions.everything, maxSize: UInt64? = nil) {
        self.directory = directory
        self.accept = accept
        self.maxSize = maxSize
    }

    public var history: TextHistory { TextHistory(file: directory.appendingPathComponent("history.jsonl")) }
}

/// The long-running service of one device: a TLS listener serving trusted peers — answering pings and receiving
/// what they send into the inbox, one session per peer at a time, several peers at once.
public final class Agent: @unchecked Sendable {  // `receiving` guarded by `lock`; the rest immutable after init
    public let device: LocalDevice
    public let trust: TrustCache
    public let inbox: AgentInbox
    public private(set) var listener: Listener!
    public private(set) var outbox: Outbox!
    private var control: ControlServer?
    private var discovery: Discovery?
    private let started = Date()
    private let lock = NSCondition()
    /// The socket of the session receiving from each device.
    private var receiving: [DeviceID: Int32] = [:]

    public init(
        device: LocalDevice, host: String, port: Int, inbox: AgentInbox, timeouts: SessionTimeouts = SessionTimeouts(),
        discovery: (port: Int, interval: Double, interface: String?)? = nil
    ) throws {
        self.device = device
        self.inbox = inbox
        if ControlClient.agentIsRunning(device.paths) {
            throw ShareError(
                .unavailable,
                "an agent is already running for this device (\(ControlClient.socketPath(device.paths))); stop it first"
            )
        }
        trust = try TrustCache(file: device.paths.trustFile)
        do {
            try DevicePaths.ensurePrivateDirectory(inbox.directory)
        } catch {
            throw ShareError(.cannotCreate, "cannot use \(inbox.directory.path) as the inbox: \(error)")
        }
        let trust = trust
        let hello = ReceiveSession.hello(name: device.name, accept: inbox.accept)
        let agentHello = Hello(
            name: hello.name, role: .agent, accept: hello.accept, compression: hello.compression)
        listener = try Listener(
            device: device, host: host, port: port, verifier: { trust.isTrusted($0) },
            hello: { agentHello }, timeouts: timeouts
        ) { [weak self] session in
            self?.serve(session)
        }
        let paths = device.paths
        outbox = try Outbox(directory: paths.state.appendingPathComponent("outbox", isDirectory: true)) {
            job in Self.run(job, device: device)
        }
        try DevicePaths.ensurePrivateDirectory(paths.state)
        control = try ControlServer(path: ControlClient.socketPath(paths)) { [weak self] request in
            self?.answer(request) ?? ControlResponse(ok: false, error: "the agent is stopping")
        }
        if let discovery {
            do {
                self.discovery = try Discovery(
                    device: device, listenPort: listener.port, port: discovery.port, interval: discovery.interval,
                    interface: discovery.interface)
            } catch let error as ShareError {
                // Discovery is a convenience: the agent serves without it.
                Log.line("\(error.message); continuing without discovery", level: .warning)
            }
        }
    }

    public var port: Int { listener.port }

    public func start() {
        listener.start()
        outbox.start()
        control?.start()
        discovery?.start()
    }

    public func stop() {
        discovery?.stop()
        control?.stop()
        outbox.stop()
        listener.stop()
    }

    /// One attempt at an outbox job: the items are checked and planned again (a file may have changed or gone).
    static func run(_ job: OutboxJob, device: LocalDevice) -> Result<SendReport, ShareError> {
        do {
            let trust = try TrustStore.load(device.paths.trustFile)
            let target = try PeerTarget.resolve(job.to, trust: trust, discovered: Discovery.load(device.paths))
            var items = SendItems()
            try items.add(paths: job.files.map { URL(fileURLWithPath: $0) }, type: job.contentType.flatMap(UTType.init))
            items.texts = job.texts
            items.urls = job.urls.compactMap { URL(string: $0) }
            try items.add(profiles: job.profiles, all: job.allProfiles, catalogFile: device.paths.profilesFile)
            let session = SendSession(device: device, progress: ProgressReporter(mode: .quiet))
            let report = try session.run(to: target, trust: trust) { try items.items(for: $0) }
            Log.line(
                "outbox: job \(job.id) to \(job.to): delivered \(report.delivered.count), refused \(report.refused.count)"
            )
            return .success(report)
        } catch let error as ShareError {
            Log.line("outbox: job \(job.id) to \(job.to): \(error.message)")
            return .failure(error)
        } catch {
            Log.line("outbox: job \(job.id) to \(job.to): \(error)")
            return .failure(ShareError(.failure, "\(error)"))
        }
    }

    private func answer(_ request: ControlRequest) -> ControlResponse {
        var response = ControlResponse(ok: true)
        switch request.op {
        case .send:
            guard let job = request.job else { return ControlResponse(ok: false, error: "a send needs a job") }
            do {
                try outbox.add(job)
            } catch {
                return ControlResponse(ok: false, error: "cannot queue the job: \(error)")
            }
            response.job = job
        case .status:
            response.jobs = outbox.all
            response.name = device.name
            response.id = device.id.description
            response.port = port
            response.version = "share 0.1 (protocol \(Limits.protocolVersion))"
            response.uptime = Date().timeIntervalSince(started)
            response.clipboard = ClipboardItem.load(device.paths)
            response.trusted = trust.store.devices.map { device in
                "\(device.name)" + (device.address.map { " \($0)" } ?? "")
            }
            response.discovered = Discovery.load(device.paths)
        case .copy:
            guard let item = request.clipboard else { return ControlResponse(ok: false, error: "a copy needs an item") }
            do {
                try item.save(device.paths)
            } catch {
                return ControlResponse(ok: false, error: "cannot keep the clipboard item: \(error)")
            }
        case .wait:
            guard let id = request.id, let job = outbox.wait(for: id, timeout: request.timeout ?? 86_400) else {
                return ControlResponse(ok: false, error: "no job \(request.id ?? "")")
            }
            response.job = job
        }
        return response
    }

    private func serve(_ session: Session) {
        let peer = trust.store.device(session.peerID)?.name ?? session.peerID.short
        do {
            guard let first = try PingClient.answerPings(session) else { return }
            switch first.type {
            case .offer: try receive(session, peer: peer, first: first)
            case .clipboardRequest:
                try serveClipboard(
                    session, peer: peer, request: MessageCoding.decode(ClipboardRequest.self, from: first))
            default: throw ProtocolError(.badMessage, "unexpected \(first.type) at the start of a session")
            }
        } catch let error as TLSError where error.kind == .timeout {
            Log.line("session with \(peer) closed after being idle", level: .debug)
        } catch let error as ProtocolError {
            Log.line("session with \(peer) ended: \(error.message)", level: .warning)
            session.connection.fail(with: error)
        } catch {
            Log.line("session with \(peer) ended: \(error)", level: .warning)
        }
    }

    /// Answers a paste: only the owner's own devices (trusted with `--team`) get the clipboard; the item's
    /// representations for that peer are offered and only the one it chooses is produced.
    private func serveClipboard(_ session: Session, peer: String, request: ClipboardRequest) throws {
        guard let trusted = trust.store.device(session.peerID), trusted.relation == .team else {
            throw ProtocolError(
                .refused, "\(device.name) shares its clipboard only with its owner's devices (trust them with --team)")
        }
        guard let item = ClipboardItem.load(device.paths) else {
            throw ProtocolError(.refused, "nothing is copied on \(device.name) (or the copy expired)")
        }
        let items: [OutgoingItem]
        do {
            items = try item.items(device: device, relation: .ownDevice)
        } catch let error as ShareError {
            throw ProtocolError(.refused, "the copied item on \(device.name) is gone: \(error.message)")
        }
        if request.peek {
            let info = ClipboardInfo(
                copied: item.copied.timeIntervalSince1970, expires: item.expires.timeIntervalSince1970,
                labels: items.map(\.label), types: items.map { $0.representations.map(\.offered.contentType) })
            try session.connection.send(.clipboardInfo, info)
            return
        }
        let sender = SendSession(device: device, progress: ProgressReporter(mode: .quiet))
        let report = try sender.serve(session, peerName: peer, relation: .ownDevice, items: items)
        Log.line("clipboard: pasted on \(peer): \(report.delivered.count) item(s)")
    }

    /// Receives one sending session into the peer's inbox folder.
    private func receive(_ session: Session, peer: String, first: Frame) throws {
        // A device that connects again while its previous session is still open has lost that connection (it
        // crashed, or the network dropped): the old session is shut down (its partial kept) and this one takes over.
        let deadline = Date().addingTimeInterval(10)
        lock.lock()
        while let old = receiving[session.peerID] {
            Syscalls.shutdownSocket(old)
            guard lock.wait(until: deadline) else {
                lock.unlock()
                throw ProtocolError(.refused, "this agent is still finishing a session with \(peer); try again")
            }
        }
        receiving[session.peerID] = session.connection.tls.fileDescriptor
        lock.unlock()
        defer {
            lock.lock()
            receiving[session.peerID] = nil
            lock.broadcast()
            lock.unlock()
        }
        var options = ReceiveOptions(
            directory: inbox.directory.appendingPathComponent(FileNamesOnDisk.sanitize(peer, fallback: "peer")),
            accept: inbox.accept, maxSize: inbox.maxSize)
        options.catalogFile = device.paths.profilesFile
        options.mediaDirectory = device.paths.data
        options.history = inbox.history
        let receiver = try ReceiveSession(options: options, progress: ProgressReporter(mode: .quiet))
        let report = try receiver.serve(session, peerName: peer, first: first)
        let summary = [
            report.saved.isEmpty ? nil : "saved " + report.saved.map(\.lastPathComponent).joined(separator: ", "),
            report.printed.isEmpty ? nil : "\(report.printed.count) text item(s) kept",
            report.importedProfiles.isEmpty ? nil : "profiles " + report.importedProfiles.joined(separator: ", "),
            report.refused.isEmpty ? nil : "\(report.refused.count) refused",
        ].compactMap { $0 }
        Log.line("received from \(peer): \(summary.isEmpty ? "nothing" : summary.joined(separator: "; "))")
    }
}
