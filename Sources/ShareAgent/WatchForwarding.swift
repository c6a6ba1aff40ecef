import ShareThreads
import CoreTransferable
import FoundationEssentials
import ShareProtocol
import ShareTLS
import ShareTrust
import UniformTypeIdentifiers
import ShareEngine
import ShareReach
import ShareNet

/// Watch forwarding, from a watch to one of the owner's devices: the agent receives the watch's items with the
/// receiver driver and, at the same time, sends them on with the sender driver. The far device negotiates with its
/// own accept list (its choices answer the watch), every chunk is verified here and streamed on through a small
/// bounded pipe (never kept whole), and the far device's acknowledgement of each item is the watch's.
/// (Not to be confused with relays: servers that carry a TLS session between two devices.)
final class ForwardingBridge: Sendable {
    private struct State {
        var choices: [Choice]?
        var acks: [Int: Ack] = [:]
        var failure: Error?
        var pipes: [Int: ChunkPipe] = [:]
        var farEnded = false
    }
    private let state = Guarded(State())

    /// The pipe of item `index` (made on first use by either side).
    func pipe(_ index: Int) -> ChunkPipe {
        state.withLock { state in
            if let pipe = state.pipes[index] { return pipe }
            let pipe = ChunkPipe()
            state.pipes[index] = pipe
            if let failure = state.failure { pipe.fail(failure) }
            return pipe
        }
    }

    /// The far device answered the offer.
    func chosen(_ choices: [Choice]) {
        state.withLock { $0.choices = choices }
    }

    /// The far device acknowledged item `index`.
    func delivered(_ index: Int, _ ack: Ack) {
        state.withLock { $0.acks[index] = ack }
    }

    /// The far side ended, well or not; its error (if any) stops the near side.
    func farFinished(_ error: Error?) {
        state.withLock { state in
            state.farEnded = true
            if let error, state.failure == nil { state.failure = error }
            for pipe in state.pipes.values {
                pipe.fail(state.failure ?? StreamEnded("the far device ended the session"))
            }
        }
    }

    /// The near side stopped: the far side's sources fail.
    func nearFailed(_ error: Error) {
        state.withLock { state in
            if state.failure == nil { state.failure = error }
            for pipe in state.pipes.values { pipe.fail(error) }
        }
    }

    /// Waits for the far device's choices (or its failure).
    func awaitChoices() throws -> [Choice] {
        try state.withLock(when: { $0.choices != nil || $0.failure != nil || $0.farEnded }) { state, _ in
            if let choices = state.choices { return choices }
            throw state.failure ?? ProtocolError(.cancelled, "the far device ended the session before choosing")
        }
    }

    /// Waits for the far device's acknowledgement of item `index`.
    func awaitAck(_ index: Int) throws -> Ack {
        try state.withLock(when: { $0.acks[index] != nil || $0.failure != nil || $0.farEnded }) { state, _ in
            if let ack = state.acks[index] { return ack }
            throw state.failure
                ?? ProtocolError(.cancelled, "the far device ended the session before acknowledging")
        }
    }
}

/// Chunks of one item on their way from the receiver driver to the sender driver: at most four at a time.
final class ChunkPipe: Sendable {
    private struct State {
        var queue: [[UInt8]] = []
        var ended = false
        var failure: Error?
    }
    private let state = Guarded(State())
    static let capacity = 4

    func push(_ bytes: UnsafeRawBufferPointer) throws {
        let piece = Array(bytes)
        try state.withLock(when: { $0.queue.count < Self.capacity || $0.failure != nil }) { state, _ in
            if let failure = state.failure { throw failure }
            state.queue.append(piece)
        }
    }

    func finish() {
        state.withLock { $0.ended = true }
    }

    func fail(_ error: Error) {
        state.withLock { state in
            if state.failure == nil { state.failure = error }
        }
    }

    /// The next piece; nil at the end.
    func pull() throws -> [UInt8]? {
        try state.withLock(when: { !$0.queue.isEmpty || $0.ended || $0.failure != nil }) { state, _ in
            if !state.queue.isEmpty { return state.queue.removeFirst() }
            if let failure = state.failure { throw failure }
            return nil
        }
    }
}

/// The far side's view of a forwarded item: the near item, naming its origin, streamed from its pipe.
final class ForwardedSource: ItemSource, SequentialSource {
    let offer: OfferItem
    private let pipe: ChunkPipe

    init(_ item: OfferItem, origin: String, pipe: ChunkPipe) {
        var forwarded = item
        forwarded.origin = origin
        // What a watch sends is made on request and cannot be resumed: no version, so no partial is kept for it.
        forwarded.version = nil
        offer = forwarded
        self.pipe = pipe
    }

    func produce(representation index: Int) throws -> ProducedChunks { .sequential(self) }

    /// Sizes are not announced: the far device counts the bytes against its limits as they arrive.
    var size: UInt64? { nil }

    func produce(_ emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        while let piece = try pipe.pull() {
            try piece.withUnsafeBytes { try emit($0) }
        }
    }

    func close() {}
}

/// The near side's sink: each verified chunk goes into the item's pipe; completing an item waits for the far
/// device's acknowledgement, which becomes the watch's.
final class ForwardingSink: ItemSink {
    let bridge: ForwardingBridge
    let target: String
    private var index: [String: Int] = [:]

    init(bridge: ForwardingBridge, target: String, offer: Offer) {
        self.bridge = bridge
        self.target = target
        for (position, item) in offer.items.enumerated() { index[item.id] = position }
    }

    /// Forwarded items are streamed on as they arrive; nothing is kept to resume.
    func held(item: OfferItem, representation: OfferedRepresentation, chunkSize: Int) -> HeldChunks { .nothing }

    func open(item: OfferItem, representation: OfferedRepresentation, chunkSize: Int, digest: DigestAlgorithm)
        throws -> IncomingPayload
    {
        guard let position = index[item.id] else { throw ProtocolError(.internalError, "unknown item \(item.id)") }
        return Forwarded(pipe: bridge.pipe(position), position: position, item: item, bridge: bridge, target: target)
    }

    final class Forwarded: IncomingPayload {
        let pipe: ChunkPipe
        let position: Int
        let item: OfferItem
        let bridge: ForwardingBridge
        let target: String
        let held: [Int: [UInt8]] = [:]

        init(pipe: ChunkPipe, position: Int, item: OfferItem, bridge: ForwardingBridge, target: String) {
            self.pipe = pipe
            self.position = position
            self.item = item
            self.bridge = bridge
            self.target = target
        }

        func write(index: Int, bytes: UnsafeRawBufferPointer, digest: [UInt8]) throws { try pipe.push(bytes) }

        func complete(done: Done) throws -> Ack {
            pipe.finish()
            let far = try bridge.awaitAck(position)
            return Ack(item: item.id, outcome: "\(far.outcome) on \(target)", savedAs: far.savedAs)
        }

        func discard() { pipe.fail(ProtocolError(.digestMismatch, "\(item.label) did not match its digest")) }
        func suspend() { pipe.fail(ProtocolError(.cancelled, "the watch's session ended")) }
    }
}

/// Items passed on between the owner's devices and the watches attached to this agent.
struct WatchForwarding: Sendable {
    static let log = PeerRouter.log
    let device: LocalDevice
    let trust: TrustCache
    let inbox: AgentInbox
    let watches: WatchLinks
    /// Discovery servers and relays, for reaching the device a watch sends to.
    let reach: ReachSettings

    private func check(_ capability: Capability, _ peer: TrustedDevice?, target: TrustedDevice? = nil) throws {
        try AccessPolicy.require(capability, peer: peer, target: target, localName: device.name)
    }

    /// Passes items on. From the owner's devices to this agent's watches: they are negotiated with the watch's
    /// accept list (as it would itself), kept in `STATE/forward/`, and become an outbox job delivered over the
    /// watch's link. From an attached watch to the owner's devices: streamed on as they arrive (see
    /// `ForwardingBridge`). The policy decides both, and refuses in the same words whether the name exists or not.
    /// The router has asked it whether `peer` may name a device here (`lookUpByName`) before this.
    func forward(_ session: Session, peer: TrustedDevice?, name: String, first: Frame, outbox: Outbox?) throws {
        let store = trust.store
        let target = store.find(name)
        guard let peer else { throw ProtocolError(.refused, AccessPolicy.notForwarded(device.name)) }
        if target.map({ AccessPolicy.decide(.forwardToWatch, peer: peer, target: $0).isAllowed }) == true,
            let target, let watch = watches.watch(target.id)
        {
            try keepForWatch(session, peer: peer.name, first: first, watch: watch, target: target, outbox: outbox)
            return
        }
        try check(.forwardFromWatch, peer, target: target)
        guard let target, watches.watch(peer.id) != nil else {
            throw ProtocolError(.refused, AccessPolicy.notForwarded(device.name))
        }
        try forwardFromWatch(session, watch: peer, first: first, to: target, trust: store)
    }

    private func keepForWatch(
        _ session: Session, peer: String, first: Frame, watch: WatchLinks.Known, target: TrustedDevice,
        outbox: Outbox?
    ) throws {
        let spool = device.paths.state.appendingPathComponent("forward", isDirectory: true)
            .appendingPathComponent(FileNamesOnDisk.sanitize(target.name, fallback: "device"), isDirectory: true)
        var options = ReceiveOptions(directory: spool, accept: watch.accept, maxSize: inbox.maxSize)
        options.keptFor = target.name
        options.folderMode = 0o700
        let receiver = try ReceiveSession(options: options, progress: ProgressReporter())
        let report = try receiver.serve(session, peerName: peer, peer: trust.store.device(session.peerID), first: first)
        Self.log.info(
            "received for a watch",
            metadata: [
                "peer": "\(peer)", "watch": "\(target.name)", "items": "\(report.savedItems.count)",
                "refused": "\(report.refused.count)",
            ])
        guard !report.savedItems.isEmpty else { return }
        var job = OutboxJob(to: target.name)
        job.forwarded = report.savedItems.map {
            ForwardedItem(path: $0.url.path, contentType: $0.contentType, label: $0.label, from: peer)
        }
        try outbox?.add(job)
    }

    /// Streams a watch's items to `target` as they arrive, with both drivers at once (see `ForwardingBridge`).
    private func forwardFromWatch(
        _ session: Session, watch: TrustedDevice, first: Frame, to target: TrustedDevice, trust: TrustStore
    ) throws {
        let offer = try Exchange.requireOffer(in: first)
        let far: Session
        do {
            let address = try PeerTarget.resolve(
                target.id.description, device: device, trust: trust, beyondLAN: !reach.isEmpty)
            far = try Reach.connect(
                from: device, to: address, trust: trust, hello: Hello(name: device.name, role: .agent),
                timeouts: SessionTimeouts(connect: 5, handshake: 10, idle: 60), settings: reach)
        } catch {
            throw ProtocolError(.timeout, "\(target.name) cannot be reached from \(device.name) now")
        }
        defer { far.connection.close() }
        guard far.peerHello.accept != nil else {
            throw ProtocolError(.refused, "\(target.name) is not receiving items")
        }
        let bridge = ForwardingBridge()
        let origin = "\(watch.name) via \(device.name)"
        let sources = offer.items.enumerated().map { index, item in
            ForwardedSource(item, origin: origin, pipe: bridge.pipe(index))
        }
        let finished = DispatchSemaphore(value: 0)
        let farConnection = far.connection
        let farHasher = far.chunkHasher()
        Threads.start(name: "share-forward") {
            let driver = SenderDriver(channel: farConnection.channel, hasher: farHasher) { event in
                switch event {
                case .answered(let choices): bridge.chosen(choices)
                case .delivered(let index, _, let ack): bridge.delivered(index, ack)
                default: break
                }
            }
            // An item's bytes reach the pipe only once the watch's previous item is complete, which waits for the
            // far device's acknowledgement of it.
            driver.oneAtATime = true
            do {
                _ = try driver.run(sources)
                bridge.farFinished(nil)
            } catch {
                farConnection.closeLingering()
                bridge.farFinished(SessionErrors.describe(error, peer: target.name, localID: self.device.id))
            }
            finished.signal()
        }
        defer { finished.wait() }
        let machine = ReceiverMachine(
            negotiator: Negotiator(accept: ReceiveOptions.everything),
            policy: .init(maxItemSize: inbox.maxSize),
            window: ReceiverMachine.window(forVersion: session.peerHello.agreedVersion))
        let driver = ReceiverDriver(
            channel: session.connection.channel, hasher: session.chunkHasher(), codec: ZstdChunkCodec())
        do {
            let summary = try driver.run(
                machine: machine, sink: ForwardingSink(bridge: bridge, target: target.name, offer: offer),
                first: first, decide: { _ in try bridge.awaitChoices() })
            Self.log.info(
                "forwarded from a watch",
                metadata: [
                    "watch": "\(watch.name)", "to": "\(target.name)", "items": "\(summary.delivered.count)",
                    "refused": "\(summary.refused.count)",
                ])
        } catch {
            bridge.nearFailed(error)
            throw error is ProtocolError ? error : ProtocolError(.cancelled, "\(error)")
        }
    }
}
