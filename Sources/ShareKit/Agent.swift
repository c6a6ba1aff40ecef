import CoreTransferable
import Foundation
import Logging
import ServiceLifecycle
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
/// what they send into the inbox, one session per peer at a time, several peers at once — with the outbox, the
/// control socket and discovery beside it. `run()` runs them as a service group until SIGTERM or SIGINT.
public final class Agent: @unchecked Sendable {  // `receiving` guarded by `lock`; the rest immutable after init
    static let log = Log.logger("share.agent")
    static let outboxLog = Log.logger("share.outbox")
    /// With `lowPriority`, transfers (sessions and the outbox) run this many nice steps below the agent's control
    /// socket and discovery, as Syncthing's low-priority setting does: a bulk transfer yields the CPU to the user's
    /// own work, and `share status` answers at once while 50 devices send.
    public static let transferNice: Int32 = 9
    public let device: LocalDevice
    public let trust: TrustCache
    public let inbox: AgentInbox
    public private(set) var listener: Listener!
    public private(set) var outbox: Outbox!
    /// The watches attached to this agent, and those it has seen.
    public let watches: WatchLinks
    private var control: ControlServer?
    private var discovery: Discovery?
    private let started = Date()
    private let lock = NSCondition()
    /// The socket of the session receiving from each device.
    private var receiving: [DeviceID: Int32] = [:]

    public init(
        device: LocalDevice, host: String, port: Int, inbox: AgentInbox, timeouts: SessionTimeouts = SessionTimeouts(),
        discovery: (port: Int, interval: Double, interface: String?)? = nil, lowPriority: Bool = true,
        keepalive: Double = 15
    ) throws {
        self.device = device
        self.inbox = inbox
        watches = WatchLinks(stateDirectory: device.paths.state, keepalive: keepalive)
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
            hello: { agentHello }, timeouts: timeouts, sessionNice: lowPriority ? Self.transferNice : 0
        ) { [weak self] session in
            self?.serve(session)
        }
        let paths = device.paths
        let watches = watches
        outbox = try Outbox(
            directory: paths.state.appendingPathComponent("outbox", isDirectory: true),
            nice: lowPriority ? Self.transferNice : 0
        ) {
            job, progress in Self.run(job, device: device, watches: watches, progress: progress)
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
                Self.log.warning("continuing without discovery", metadata: ["reason": "\(error.message)"])
            }
        }
    }

    public var port: Int { listener.port }

    /// The agent's parts as services, in start order; a graceful shutdown stops them in reverse order: discovery
    /// falls silent, the control socket closes, the outbox finishes its current attempt, and the listener lets its
    /// sessions end (their partials kept) before the process exits.
    public var services: [any Service] {
        var services: [any Service] = [
            ThreadedService(
                "listener", start: listener.start,
                stop: { [listener, watches] in
                    watches.stop()
                    listener?.stop()
                }),
            ThreadedService("outbox", start: outbox.start, stop: outbox.stop),
        ]
        if let control { services.append(ThreadedService("control socket", start: control.start, stop: control.stop)) }
        if let discovery { services.append(ThreadedService("discovery", start: discovery.start, stop: discovery.stop)) }
        return services
    }

    /// Runs the services until SIGTERM or SIGINT asks for a graceful shutdown, or one of them fails.
    public func run() async throws {
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: Self.log))
        try await group.run()
        Self.log.info("stopped", metadata: ["uptime": "\(Int(Date().timeIntervalSince(started)))s"])
    }

    /// `run()` for a synchronous caller: blocks the calling thread until the agent has stopped.
    public func runUntilStopped() throws {
        let outcome = Outcome()
        Task { [self] in
            do {
                try await run()
            } catch {
                outcome.error = error
            }
            outcome.done.signal()
        }
        outcome.done.wait()
        if let error = outcome.error { throw error }
    }

    private final class Outcome: @unchecked Sendable {  // `error` is written before `done` is signalled, read after
        let done = DispatchSemaphore(value: 0)
        var error: (any Error)?
    }

    /// One attempt at an outbox job: the items are checked and planned again (a file may have changed or gone).
    static func run(
        _ job: OutboxJob, device: LocalDevice, watches: WatchLinks,
        progress: @escaping @Sendable (TransferProgress) -> Void
    ) -> Result<SendReport, ShareError> {
        var log = Self.outboxLog
        log[metadataKey: "job"] = "\(job.id)"
        log[metadataKey: "to"] = "\(job.to)"
        log[metadataKey: "attempt"] = "\(job.attempts)"
        do {
            let trust = try TrustStore.load(device.paths.trustFile)
            var items = SendItems()
            try items.add(paths: job.files.map { URL(fileURLWithPath: $0) }, type: job.contentType.flatMap(UTType.init))
            for relayed in job.relayed ?? [] {
                try items.add(relayed: relayed)
            }
            items.texts = job.texts
            items.urls = job.urls.compactMap { URL(string: $0) }
            try items.add(profiles: job.profiles, all: job.allProfiles, catalogFile: device.paths.profilesFile)
            let report: SendReport
            if job.via == nil, let watch = trust.find(job.to), watches.watch(watch.id) != nil {
                // A watch is reached over the link it opened to this agent, never by connecting to it.
                report = try watches.deliver(
                    to: watch.id, name: watch.name, items: items.items(for: SendSession.relation(watch.relation)),
                    device: device, progress: progress)
            } else {
                let target = try PeerTarget.resolve(
                    job.via ?? job.to, trust: trust, discovered: Discovery.load(device.paths))
                var options = SendOptions()
                options.relayTo = job.via == nil ? nil : job.to
                let session = SendSession(
                    device: device, progress: ProgressReporter(mode: .quiet, observer: progress), options: options)
                report = try session.run(to: target, trust: trust) { try items.items(for: $0) }
            }
            log.info(
                "delivered",
                metadata: [
                    "delivered": "\(report.delivered.count)", "refused": "\(report.refused.count)",
                    "sent": "\(report.bytesSent)", "skipped": "\(report.bytesSkipped)",
                ])
            return .success(report)
        } catch let error as ShareError {
            log.notice("attempt failed", metadata: ["reason": "\(error.message)"])
            return .failure(error)
        } catch {
            log.error("attempt failed", metadata: ["reason": "\(error)"])
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
            response.watches = watches.all.map { "\($0.watch.name) (\($0.attached ? "attached" : "away"))" }
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
            if session.peerHello.role == .watch, session.peerHello.relayTo == nil, session.peerHello.accept != nil {
                let names: Set<String> = [peer.lowercased(), session.peerID.description.lowercased()]
                watches.serve(session, name: peer) { [outbox] in outbox?.retryNow(to: names) }
                return
            }
            guard let first = try PingClient.answerPings(session) else { return }
            switch first.type {
            case .offer:
                if let relayTo = session.peerHello.relayTo {
                    try relay(session, peer: peer, first: first, to: relayTo)
                } else {
                    try receive(session, peer: peer, first: first)
                }
            case .clipboardRequest:
                try serveClipboard(
                    session, peer: peer, request: MessageCoding.decode(ClipboardRequest.self, from: first))
            default: throw ProtocolError(.badMessage, "unexpected \(first.type) at the start of a session")
            }
        } catch let error as TLSError where error.kind == .timeout {
            Self.log.debug("session closed after being idle", metadata: ["peer": "\(peer)"])
        } catch let error as ProtocolError {
            Self.log.warning("session ended", metadata: ["peer": "\(peer)", "reason": "\(error.message)"])
            session.connection.fail(with: error)
        } catch {
            Self.log.warning("session ended", metadata: ["peer": "\(peer)", "reason": "\(error)"])
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
        Self.log.info("clipboard pasted", metadata: ["peer": "\(peer)", "items": "\(report.delivered.count)"])
    }

    /// Passes items on. From any trusted device to one of this agent's watches: they are negotiated with the
    /// watch's accept list (as it would itself), kept in `STATE/relay/`, and become an outbox job delivered when the
    /// watch is attached. From a watch to one of this agent's trusted devices: the session is forwarded frame by frame
    /// to that device, which negotiates with its own accept list (the full negotiation happens on the far side).
    private func relay(_ session: Session, peer: String, first: Frame, to name: String) throws {
        let store = trust.store
        guard let target = store.find(name) else {
            throw ProtocolError(.refused, "\(device.name) knows no device called \(name) to pass items on to")
        }
        guard let watch = watches.watch(target.id) else {
            guard watches.watch(session.peerID) != nil else {
                throw ProtocolError(
                    .refused,
                    "\(device.name) passes items on only to its watches and from them; \(target.name) has never attached as a watch"
                )
            }
            try forward(session, peer: peer, first: first, to: target, trust: store)
            return
        }
        let spool = device.paths.state.appendingPathComponent("relay", isDirectory: true)
            .appendingPathComponent(FileNamesOnDisk.sanitize(target.name, fallback: "device"), isDirectory: true)
        try DevicePaths.ensurePrivateDirectory(spool)
        var options = ReceiveOptions(directory: spool, accept: watch.accept, maxSize: inbox.maxSize)
        options.relayTo = target.name
        let receiver = try ReceiveSession(options: options, progress: ProgressReporter(mode: .quiet))
        let report = try receiver.serve(session, peerName: peer, first: first)
        Self.log.info(
            "received for a watch",
            metadata: [
                "peer": "\(peer)", "watch": "\(target.name)", "items": "\(report.savedItems.count)",
                "refused": "\(report.refused.count)",
            ])
        guard !report.savedItems.isEmpty else { return }
        var job = OutboxJob(to: target.name)
        job.relayed = report.savedItems.map {
            RelayedItem(path: $0.url.path, contentType: $0.contentType, label: $0.label, from: peer)
        }
        try outbox.add(job)
    }

    /// Forwards a watch's sending session to `target`: the offer, then every frame either way, one at a time on
    /// this thread, until the watch says bye or either side fails. Chunk digests and the whole-item digest are the
    /// watch's own, checked by the far device.
    private func forward(_ session: Session, peer: String, first: Frame, to target: TrustedDevice, trust: TrustStore)
        throws
    {
        let far: Session
        do {
            let address = try PeerTarget.resolve(
                target.id.description, trust: trust, discovered: Discovery.load(device.paths))
            far = try SessionOpener.connect(
                from: device, to: address.address, hello: Hello(name: device.name, role: .agent),
                verifier: address.verifier(trust: trust), timeouts: SessionTimeouts(connect: 5, handshake: 10, idle: 60)
            )
        } catch {
            throw ProtocolError(.timeout, "\(target.name) cannot be reached from \(device.name) now (\(error))")
        }
        defer { far.connection.close() }
        guard far.peerHello.accept != nil else {
            throw ProtocolError(.refused, "\(target.name) is not receiving items")
        }
        try far.connection.send(first)
        let near = session.connection
        let remote = far.connection
        var frames = 1
        while true {
            if !near.hasIncomingData && !remote.hasIncomingData {
                guard Syscalls.waitReadable([near.tls.fileDescriptor, remote.tls.fileDescriptor], timeout: 120) else {
                    throw ProtocolError(.timeout, "neither \(peer) nor \(target.name) said anything for 120 s")
                }
            }
            if near.hasIncomingData {
                let frame = try near.receive()
                try remote.send(frame)
                frames += 1
                if frame.type == .bye || frame.type == .error { break }
            }
            if remote.hasIncomingData {
                let frame = try remote.receive()
                try near.send(frame)
                frames += 1
                if frame.type == .error { break }
            }
        }
        Self.log.info(
            "passed on from a watch", metadata: ["watch": "\(peer)", "to": "\(target.name)", "frames": "\(frames)"])
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
        Self.log.info(
            "received",
            metadata: [
                "peer": "\(peer)", "saved": "\(report.saved.count)", "texts": "\(report.printed.count)",
                "profiles": "\(report.importedProfiles.count)", "refused": "\(report.refused.count)",
            ])
    }
}

/// A part of the agent that runs on its own threads, as a service: started when the group runs, stopped when the
/// group shuts down gracefully (or is cancelled).
struct ThreadedService: Service, CustomStringConvertible {
    let description: String
    private let start: @Sendable () -> Void
    private let stop: @Sendable () -> Void

    init(_ name: String, start: @escaping @Sendable () -> Void, stop: @escaping @Sendable () -> Void) {
        description = name
        self.start = start
        self.stop = stop
    }

    func run() async throws {
        start()
        try? await gracefulShutdown()
        stop()
    }
}
