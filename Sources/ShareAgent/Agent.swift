import CoreTransferable
import FoundationEssentials
import ShareLocalSendRoute
import Logging
import ServiceLifecycle
import ShareDisk
import ShareProtocol
import ShareTLS
import Synchronization
import ShareNet
import ShareTrust
import ShareReach
import UniformTypeIdentifiers
import ShareEngine
import ShareFolders

/// The long-running service of one device, as a composition of services: the TLS listener (sessions routed by
/// `PeerRouter` under `AccessPolicy`), the outbox, the control socket and discovery. `run()` runs them as a service
/// group until SIGTERM or SIGINT, or until one of them fails.
package final class Agent: Sendable {
    static let log = Log.logger("share.agent")
    /// With `lowPriority`, transfers (sessions and the outbox) run this many nice steps below the agent's control
    /// socket and discovery, as Syncthing's low-priority setting does: a bulk transfer yields the CPU to the user's
    /// own work, and `share status` answers at once while 50 devices send.
    package static let transferNice: Int32 = 9
    package let device: LocalDevice
    package let trust: TrustCache
    package let inbox: AgentInbox
    package let listener: Listener
    package let outbox: Outbox
    /// The watches attached to this agent, and those it has seen.
    package let watches: WatchLinks
    let router: PeerRouter
    let courier: NoticeCourier
    private let control: ControlServer
    private let discovery: Discovery?
    /// Discovery servers and relays (none: the LAN only).
    let reach: ReachParts
    /// LocalSend's server and discovery, when turned on.
    package let localSend: LocalSendPart?
    /// Shared folders (`share sync`).
    package let folders: FolderService
    let started = Date()

    package init(
        device: LocalDevice, host: String, port: Int, inbox: AgentInbox, timeouts: SessionTimeouts = SessionTimeouts(),
        discovery: (port: Int, interval: Double, interface: String?)? = nil, lowPriority: Bool = true,
        keepalive: Double = 15, jobs: Outbox.Lifetimes = Outbox.Lifetimes(), reach: ReachSettings = ReachSettings(),
        localSend: LocalSendSettings? = nil, folders acceptance: FolderAcceptance = FolderAcceptance()
    ) throws {
        self.device = device
        self.inbox = inbox
        try DevicePaths.ensurePrivateDirectory(device.paths.state)
        // One agent per device for the whole life of the process: a lock on STATE/agent.lock, taken before
        // anything listens and let go only when the process ends (never by a stop that is still finishing).
        try Self.holdInstanceLock(device.paths)
        do {
            try DevicePaths.ensurePrivateDirectory(inbox.directory)
        } catch {
            throw ShareFailure(.cannotCreate, "cannot use \(inbox.directory.path) as the inbox: \(error)")
        }
        watches = WatchLinks(stateDirectory: device.paths.state, keepalive: keepalive)
        try Self.upgradeWatches(watches, paths: device.paths)
        trust = try TrustCache(file: device.paths.trustFile)
        let trust = trust
        let programs = RegisteredPrograms()
        router = PeerRouter(
            device: device, trust: trust, inbox: inbox, watches: watches, reach: reach, programs: programs)
        let inboxFolder = router.inboxFolder
        folders = try FolderService(
            device: device, trust: trust, reach: reach, acceptance: acceptance, inbox: { inboxFolder($0) },
            notify: { DesktopNotice.show(summary: $0, body: $1) })
        router.folders = folders
        courier = NoticeCourier(
            device: device, trust: trust, reach: reach,
            interval: ProcessInfo.processInfo.environment["SHARE_NOTICE_INTERVAL"].flatMap(Double.init) ?? 10)
        router.courier = courier
        let (name, agentAccept) = (device.name, inbox.accept)
        listener = try Listener(
            device: device, host: host, port: port, verifier: { trust.isTrusted($0) },
            hello: {
                // A program receiving through the agent answers with its accept list.
                let hello = ReceiveSession.hello(
                    name: name, accept: programs.active?.registration.accept ?? agentAccept)
                return Hello(
                    name: hello.name, role: .agent, accept: hello.accept, compression: hello.compression,
                    features: (hello.features ?? []) + [FolderPull.binaryFeature])
            }, timeouts: timeouts, sessionNice: lowPriority ? Self.transferNice : 0
        ) { [router] session in
            router.serve(session)
        }
        let watches = watches
        outbox = try Outbox(
            directory: device.paths.state.appendingPathComponent("outbox", isDirectory: true),
            nice: lowPriority ? Self.transferNice : 0, lifetimes: jobs
        ) { job, cancellation, progress in
            OutboxRunner.run(
                job, device: device, watches: watches, reach: reach, cancellation: cancellation,
                progress: progress)
        }
        router.outbox = outbox
        router.warden.alsoCheck { [weak outbox] store in outbox?.checkTrust { store.device($0) != nil } }
        // A mirror job of an earlier version is now a send-only shared folder (made once); the job ends.
        for job in outbox.all where job.mirror != nil && (!job.state.isFinal || job.state == .mirroring) {
            _ = folders.migrateMirror(folder: job.mirror!.folder, to: job.to)
            outbox.retire(job.id, note: "now a send-only shared folder (share sync lists it)")
        }
        control = try ControlServer(path: ControlClient.socketPath(device.paths))
        var heard: Discovery?
        if let discovery {
            let waiting = outbox
            do {
                heard = try Discovery(
                    device: device, listenPort: listener.port, port: discovery.port, interval: discovery.interval,
                    interface: discovery.interface, trust: trust
                ) { name, id in
                    // A trusted device heard again: what waits for it is tried now, not after its backoff.
                    waiting.retryNow(to: [name.lowercased(), id.lowercased()])
                }
            } catch let error as ShareFailure {
                // Discovery is a convenience: the agent serves without it.
                Self.log.warning("continuing without discovery", metadata: ["reason": "\(error.message)"])
            }
        }
        self.discovery = heard
        let queued = outbox
        self.localSend = try localSend.map {
            try LocalSendPart(device: device, host: host, inbox: inbox, settings: $0) { names in
                queued.retryNow(to: names)
            }
        }
        self.reach = ReachParts(settings: reach, device: device, trust: trust, listener: listener)
        control.attachProgram = { registration, stream in programs.register(registration, stream: stream) }
        control.handler = { [weak self] request, hungUp in
            self.map { ControlAPI(agent: $0).answer(request, hungUp: hungUp) } ?? .failure("the agent is stopping")
        }
    }

    package var port: Int { listener.port }

    /// The instance lock, held until the process exits.
    private static let instanceLock = Mutex<FileLock?>(nil)

    static func holdInstanceLock(_ paths: DevicePaths) throws {
        let state: Directory
        do {
            state = try Directory.open(paths.state.path)
        } catch {
            throw ShareFailure(.configuration, "cannot open \(paths.state.path): \(error)")
        }
        guard let lock = try? state.tryLock("agent.lock") else {
            throw ShareFailure(
                .unavailable,
                "an agent is already running for this device (it holds \(paths.state.appendingPathComponent("agent.lock").path)); stop it first"
            )
        }
        instanceLock.withLock { held in
            if held == nil { held = lock }
        }
    }

    /// The agent's parts as services, in start order; a graceful shutdown stops them in reverse order: discovery
    /// falls silent, the control socket closes, the outbox finishes its current attempt, and the listener lets its
    /// sessions end (their partials kept) before the process exits. A part whose threads fail ends the group, and
    /// with it the process, with that failure logged.
    package func services(with others: [any AgentPart] = []) -> [any Service] {
        var services: [any Service] = [
            PartService(listener, stopFirst: { [watches] in watches.stop() }), PartService(outbox),
            PartService(courier), PartService(folders), PartService(control), PartService(router.warden),
        ]
        if let discovery { services.append(PartService(discovery)) }
        if let localSend { services.append(PartService(localSend)) }
        services += reach.parts.map { PartService($0) }
        services += others.map { PartService($0) }
        return services
    }

    /// Runs the services (and `others`, parts the agent's program adds: the page) until SIGTERM or SIGINT asks for
    /// a graceful shutdown, or one of them fails.
    /// The page the agent serves (`share agent --web`), for a new address of it.
    let page = Mutex<(any PageLinks)?>(nil)

    package func run(with others: [any AgentPart] = []) async throws {
        page.withLock { page in page = others.lazy.compactMap { $0 as? any PageLinks }.first }
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: services(with: others), gracefulShutdownSignals: [.sigterm, .sigint], logger: Self.log))
        try await group.run()
        Self.log.info("stopped", metadata: ["uptime": "\(Int(Date().timeIntervalSince(started)))s"])
    }

    /// `run()` for a synchronous caller: blocks the calling thread until the agent has stopped.
    package func runUntilStopped(with others: [any AgentPart] = []) throws {
        let outcome = Outcome()
        Task { [self] in
            do {
                try await run(with: others)
            } catch {
                outcome.error = error
            }
            outcome.done.signal()
        }
        outcome.done.wait()
        if let error = outcome.error { throw error }
    }

    private final class Outcome: Sendable {
        let done = DispatchSemaphore(value: 0)
        let failure = Mutex<(any Error)?>(nil)
        var error: (any Error)? {
            get { failure.withLock { $0 } }
            set { failure.withLock { $0 = newValue } }
        }
    }

    /// Earlier versions let any device attach as a watch. A device of the owner's that attached before keeps doing
    /// so after an upgrade: it is marked as a watch in the trust store (once, logged; `STATE/watches-upgraded`
    /// records that it was done). Any other device that once attached (a friend) is not.
    static func upgradeWatches(_ watches: WatchLinks, paths: DevicePaths) throws {
        let marker = paths.state.appendingPathComponent("watches-upgraded")
        guard !PosixFiles.exists(marker.path) else { return }
        let known = watches.all.map(\.watch.id)
        if !known.isEmpty {
            try TrustStore.update(paths.trustFile) { store in
                for id in known {
                    guard let parsed = try? DeviceID(parsing: id), var entry = store.device(parsed),
                        AccessPolicy.mayBeWatch(entry.relation), !entry.watch
                    else { continue }
                    entry.watch = true
                    try store.add(entry)
                    log.notice("marked as a watch after an upgrade", metadata: ["device": "\(entry.name)"])
                }
            }
        }
        try AtomicFile.write(Data("1\n".utf8), to: marker, mode: 0o600, durable: false)
    }
}
