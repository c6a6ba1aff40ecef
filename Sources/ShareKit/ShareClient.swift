import CoreTransferable
import Synchronization
import FoundationEssentials
import ShareThreads
import ShareProtocol
import ShareTrust
import ShareReach
import UniformTypeIdentifiers
import ShareEngine

/// This device, as a Swift program uses it: sends `Transferable` values to trusted devices and receives items as the
/// types it declares. The same identity, trust store, settings and transfer engine as the `share` command (which is
/// itself a client of this API): a device paired with `share pair` is a device a program can send to.
///
///     let client = try ShareClient()
///     try await client.send(recipe, preview: SharePreview("Paella"), to: "desk")
///
///     for try await item in try client.receive(accepting: [Recipe.self, String.self]) {
///         if let recipe = try? await item.load(Recipe.self) { … } else { print(try await item.load(String.self)) }
///     }
public final class ShareClient: Sendable {
    /// This device: its name, identity and folders.
    public let device: LocalDevice

    /// The device whose configuration lives in `configDirectory` (default: `$SHARE_CONFIG_DIR`, else
    /// `$XDG_CONFIG_HOME/share`); its identity is made on first use.
    public init(configDirectory: String? = nil) throws {
        device = try LocalDevice.loadOrCreate(paths: DevicePaths.resolve(configOverride: configDirectory))
    }

    /// A device already loaded.
    public init(device: LocalDevice) {
        self.device = device
    }

    /// How a send goes.
    public struct SendOptions: Sendable {
        /// Hand the values to this device's running agent instead of sending them from this process: every
        /// representation the peer may get is exported now into the agent's outbox (data representations written
        /// out; a file representation that allows access to its original file is referred to, any other is copied),
        /// so the program may exit; the agent delivers when the peer can be reached, and resumes after a restart.
        /// The cost: every representation is produced, not only the chosen one, and copies take disk space until
        /// the job ends.
        public var queue = false
        /// Seconds to wait for the device to be reached and to answer (connect and handshake).
        public var timeout: Double = 10
        /// How long to wait for the receiving person to accept, when that device asks first (0: do not wait).
        public var waitForAnswer: Double = 600
        /// Compress chunks when the link and the content make it pay.
        public var compression = true
        /// Bytes per chunk.
        public var chunkSize = 1 << 20
        /// Send only what changed when the receiver holds an earlier version of a file (false: always whole, as
        /// rsync's `--whole-file`).
        public var delta = true
        /// Send through this device's agent, which passes the items on to the device named in `to` (a watch).
        public var via: String?
        /// What happens, as it happens (offers, choices, progress, deliveries); called on the sending thread.
        public var events: (@Sendable (TransferEvent) -> Void)?
        /// Lines and a progress bar on standard error, as the `share` command shows them (none by default).
        package var progress: ProgressReporter?
        /// With `queue`: someone waits for the job, so the agent sends it at its normal CPU priority.
        public var waiting = false
        /// The PIN a LocalSend device asks for.
        public var localSendPin: String?
        /// The defaults: direct from this process, 10 s to connect, compression when it pays, 1 MiB chunks.
        public init() {}
    }

    /// What became of a send.
    public struct Delivery: Sendable {
        /// Per item delivered: its label, and what the receiver did with it (`saved`, `printed`, `imported` …).
        public var delivered: [(label: String, outcome: String, savedAs: String?)] = []
        /// Per item refused: its label and the receiver's reason.
        public var refused: [(label: String, reason: String)] = []
        /// `direct` or `via relay HOST`.
        public var route: String = "direct"
        /// Bytes of the chosen representations sent in this session.
        public var bytesSent: UInt64 = 0
        /// Bytes on the wire for those (fewer when compressed).
        public var wireBytes: UInt64 = 0
        /// Bytes the receiver already held (a resume).
        public var bytesAlreadyThere: UInt64 = 0
        /// Bytes the receiver made from the earlier version it held (delta transfer; counted in `bytesSent`).
        public var bytesFromEarlierVersion: UInt64 = 0
        /// Everything that crossed the link for the items, both ways (offers, answers, a delta's descriptions of
        /// the earlier version, chunks), framing included: what the link carried.
        public var linkBytes: UInt64 = 0
        /// From the first connection attempt to the last answer.
        public var seconds: Double = 0
        /// With `queue`: the agent's job.
        public var job: String?

        /// Nothing delivered yet.
        package init() {}
    }

    /// Sends one value to `peer` (a trusted device's name or ID, or `HOST:PORT`) with what its receiving person sees
    /// first. Only the representation the receiver chooses is produced (unless `options.queue`). Throws a
    /// `ShareFailure` saying what went wrong when the receiver refuses the value (code `refused`, with its reason:
    /// for instance nothing it accepts among the types offered), when the device cannot be reached, or when the
    /// connection or the protocol fails.
    @discardableResult
    public func send<T: Transferable>(
        _ value: T, preview: SharePreview? = nil, to peer: String, options: SendOptions = SendOptions()
    ) async throws -> Delivery {
        let delivery = try await send([ShareItem(value, preview: preview)], to: peer, options: options)
        if delivery.job == nil, delivery.delivered.isEmpty, let refusal = delivery.refused.first {
            throw ShareFailure(.refused, "\(peer) refused \(refusal.label): \(refusal.reason)")
        }
        return delivery
    }

    /// Sends several values at once (one offer; each is chosen, refused and delivered on its own, and the items
    /// refused are listed in the delivery with the receiver's reasons).
    @discardableResult
    public func send(_ items: [ShareItem], to peer: String, options: SendOptions = SendOptions()) async throws
        -> Delivery
    {
        try await onThread { [self] in try sendNow(items, to: peer, options: options) }
    }

    /// `send`, blocking the calling thread (for programs without concurrency, like the `share` command).
    public func sendNow(_ items: [ShareItem], to peer: String, options: SendOptions = SendOptions()) throws -> Delivery
    {
        let trust = try TrustStore.load(device.paths.trustFile)
        // A name that is no trusted device but a device of another protocol (a LocalSend phone the agent has seen).
        if options.via == nil, trust.find(peer) == nil {
            for devices in Self.otherDevices.withLock({ $0 }) {
                if let delivery = try devices.send(items, to: peer, from: self, options: options) { return delivery }
            }
        }
        try PeerTarget.check(options.via ?? peer, device: device, trust: trust)
        if options.queue { return try queue(items, to: peer, trust: trust, options: options) }
        let reach = try ReachSettings.load(device.paths)
        let target = try PeerTarget.resolve(
            options.via ?? peer, device: device, trust: trust, beyondLAN: !reach.isEmpty)
        var sending = ShareEngine.SendOptions()
        sending.reach = reach
        sending.forwardTo = options.via == nil ? nil : peer
        sending.chunkSize = options.chunkSize
        sending.compression = options.compression
        sending.delta = options.delta
        sending.timeouts = SessionTimeouts(connect: options.timeout, handshake: options.timeout, idle: 300)
        sending.waitForAnswer = options.waitForAnswer
        let progress = options.progress ?? ProgressReporter(events: options.events)
        let report = try SendSession(device: device, progress: progress, options: sending).run(to: target, trust: trust)
        { relation in try items.map { try $0.outgoing(for: relation) } }
        return Delivery(report)
    }

    /// Exports the items for the peer into the agent's outbox and queues them as one job.
    private func queue(_ items: [ShareItem], to peer: String, trust: TrustStore, options: SendOptions) throws
        -> Delivery
    {
        let relation = AccessPolicy.visibility(for: trust.find(options.via ?? peer))
        var job = OutboxJob(to: peer)
        job.via = options.via
        job.foreground = options.waiting ? true : nil
        let folder = OutboxJob.exportFolder(device.paths, job: job.id)
        job.items = try items.map { try $0.queued(for: relation, into: folder) }
        let answer = try ControlClient.request(.send(job), paths: device.paths)
        var delivery = Delivery()
        delivery.job = answer.job?.id ?? job.id
        return delivery
    }

    /// Runs blocking work on a thread of its own (never on Swift's cooperative pool) and awaits it.
    func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Threads.start(name: "share-client", stackSize: 1 << 20) { continuation.resume(with: Result { try body() }) }
        }
    }
}

extension ShareClient.Delivery {
    init(_ report: SendReport) {
        delivered = report.delivered.map { ($0.label, $0.ack.outcome, $0.ack.savedAs) }
        refused = report.refused
        route = report.route.description
        bytesSent = report.bytesSent
        wireBytes = report.wireBytes
        bytesAlreadyThere = report.bytesSkipped
        bytesFromEarlierVersion = report.bytesFromBasis
        linkBytes = report.linkBytes
        seconds = report.seconds
    }
}

/// Devices of another protocol that `ShareClient.sendNow` reaches by name when no trusted device has that name.
/// None unless a program links a module that speaks one and turns it on (the `ShareKitLocalSend` product:
/// `ShareClient.reachLocalSendDevices()`, as the `share` command does), so the library links no other protocol
/// unless asked.
package protocol OtherDevices: Sendable {
    /// The delivery to `name` when it names one of these devices; nil when it does not.
    func send(_ items: [ShareItem], to name: String, from client: ShareClient, options: ShareClient.SendOptions)
        throws -> ShareClient.Delivery?
}

extension ShareClient {
    static let otherDevices = Mutex<[any OtherDevices]>([])

    /// Lets every client of this process reach `devices` by name (once per kind: a second of the same type is
    /// ignored).
    package static func reach(_ devices: any OtherDevices) {
        otherDevices.withLock { list in
            if !list.contains(where: { type(of: $0) == type(of: devices) }) { list.append(devices) }
        }
    }
}
