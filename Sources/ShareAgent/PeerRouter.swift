import Synchronization
import CoreTransferable
import Foundation
import Logging
import ShareProtocol
import ShareThreads
import ShareTLS
import ShareNet
import ShareTrust
import ShareReach
import UniformTypeIdentifiers
import ShareEngine
import ShareFolders

/// Serves each authenticated session of the agent: tells what the device asks (a ping, a send into the inbox, a
/// paste, a watch attaching, a forwarding), asks `AccessPolicy` whether it may, and hands the session to the one
/// part that does it. A device has at most `maxSessionsPerDevice` sessions at once and one receiving session.
final class PeerRouter: Sendable {
    static let log = Log.logger("share.agent")
    /// Sessions one device may hold at once (a watch's link counts as one).
    static let maxSessionsPerDevice = 4

    let device: LocalDevice
    let trust: TrustCache
    let inbox: AgentInbox
    let watches: WatchLinks
    private let parts = Mutex<(outbox: Outbox?, courier: NoticeCourier?, folders: FolderService?)>((nil, nil, nil))
    /// Queues what is kept for a watch; set once the outbox exists.
    var outbox: Outbox? {
        get { parts.withLock { $0.outbox } }
        set { parts.withLock { $0.outbox = newValue } }
    }
    /// Shared folders: their links and pulls.
    var folders: FolderService? {
        get { parts.withLock { $0.folders } }
        set { parts.withLock { $0.folders = newValue } }
    }
    /// Carries trust notices; woken when a device connects (it may have been away).
    var courier: NoticeCourier? {
        get { parts.withLock { $0.courier } }
        set { parts.withLock { $0.courier = newValue } }
    }
    private struct State {
        var sessions: [DeviceID: Int] = [:]
        /// The connection of the session receiving from each device.
        var receiving: [DeviceID: PeerConnection] = [:]
    }
    private let state = Guarded(State())

    /// Discovery servers and relays, for reaching the device a watch sends to.
    let reach: ReachSettings

    /// The program receiving through the agent, when one is.
    let programs: RegisteredPrograms

    init(
        device: LocalDevice, trust: TrustCache, inbox: AgentInbox, watches: WatchLinks, reach: ReachSettings,
        programs: RegisteredPrograms
    ) {
        self.programs = programs
        self.reach = reach
        self.device = device
        self.trust = trust
        self.inbox = inbox
        self.watches = watches
    }

    func serve(_ session: Session) {
        let entry = trust.store.device(session.peerID)
        let peer = entry?.name ?? session.peerID.short
        guard admit(session.peerID) else {
            Self.log.notice("too many sessions from one device", metadata: ["peer": "\(peer)"])
            session.connection.fail(
                with: ProtocolError(
                    .refused, "\(device.name) already serves \(Self.maxSessionsPerDevice) sessions of this device"))
            return
        }
        defer { release(session.peerID) }
        courier?.wake(for: session.peerID)
        folders?.heard(session.peerID)
        // A session from a trusted device says it is there: the jobs waiting for it are tried now.
        if let entry { outbox?.retryNow(to: [entry.name.lowercased(), entry.id.description.lowercased()]) }
        do {
            if session.peerHello.role == .pair { try check(.pair, entry) }
            if session.peerHello.role == .watch, session.peerHello.forwardTo == nil, session.peerHello.accept != nil {
                try check(.attachAsWatch, entry)
                let names: Set<String> = [peer.lowercased(), session.peerID.description.lowercased()]
                watches.serve(session, name: peer) { [outbox] in outbox?.retryNow(to: names) }
                return
            }
            guard let first = try PingClient.answerPings(session) else { return }
            switch first.type {
            case .offer:
                if let name = session.peerHello.forwardTo {
                    try forward(session, peer: entry, name: name, first: first)
                } else {
                    try check(.sendToInbox, entry)
                    try receive(session, peer: peer, entry: entry, first: first)
                }
            case .trustNotices:
                try check(.sendNotices, entry)
                let notices = try Exchange.notices(in: first, as: TrustNotice.self)
                let taken: Int
                do {
                    taken = try NoticeCourier.take(notices, from: session.peerID, paths: device.paths)
                } catch let failure as ShareFailure {
                    throw ProtocolError(.refused, failure.message)
                }
                try Exchange.answerNotices(session.connection.channel, taken: taken)
                if taken > 0 { courier?.wake() }
            case .folderHello:
                try check(.syncFolders, entry)
                guard let folders else { throw ProtocolError(.refused, "\(device.name) shares no folders") }
                folders.serveLink(session, first: first, peerName: peer)
            case .folderPull:
                try check(.syncFolders, entry)
                guard let folders else { throw ProtocolError(.refused, "\(device.name) shares no folders") }
                try folders.servePull(session, first: first, peerName: peer)
            case .folderPush:
                try check(.syncFolders, entry)
                guard let folders else { throw ProtocolError(.refused, "\(device.name) shares no folders") }
                try folders.receivePush(session, first: first, peerName: peer)
            case .clipboardRequest:
                try check(.pasteClipboard, entry)
                try serveClipboard(
                    session, peer: peer, visibility: AccessPolicy.visibility(for: entry),
                    request: Exchange.clipboardRequest(in: first))
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

    private func check(_ capability: Capability, _ peer: TrustedDevice?, target: TrustedDevice? = nil) throws {
        if case .refused(let reason) = AccessPolicy.decide(
            capability, peer: peer, target: target, localName: device.name)
        {
            throw ProtocolError(.refused, reason)
        }
    }

    private func admit(_ id: DeviceID) -> Bool {
        state.withLock { state in
            guard state.sessions[id, default: 0] < Self.maxSessionsPerDevice else { return false }
            state.sessions[id, default: 0] += 1
            return true
        }
    }

    private func release(_ id: DeviceID) {
        state.withLock { state in
            state.sessions[id, default: 1] -= 1
            if state.sessions[id] == 0 { state.sessions[id] = nil }
        }
    }

    /// The inbox folder of a device: named by the name this device gave it when it trusted it, made safe.
    func inboxFolder(_ peer: String) -> URL {
        inbox.directory.appendingPathComponent(FileNamesOnDisk.sanitize(peer, fallback: "device"), isDirectory: true)
    }

    /// Receives one sending session into the peer's inbox folder. A device that connects again while its previous
    /// session is still open has lost that connection (it crashed, or the network dropped): the old session is
    /// interrupted (its partial kept) and this one takes over.
    private func receive(_ session: Session, peer: String, entry: TrustedDevice?, first: Frame) throws {
        let old = state.withLock { $0.receiving[session.peerID] }
        old?.interrupt()
        let taken = state.withLock(when: { $0.receiving[session.peerID] == nil }, seconds: 10) { state, free in
            if free { state.receiving[session.peerID] = session.connection }
            return free
        }
        guard taken else {
            throw ProtocolError(.refused, "\(device.name) is still finishing a session with \(peer); try again")
        }
        defer { state.withLock { $0.receiving[session.peerID] = nil } }
        var options = ReceiveOptions(directory: inboxFolder(peer), accept: inbox.accept, maxSize: inbox.maxSize)
        options.folderMode = 0o700
        options.versions = try? Versions(directory: device.paths.versions)
        let program = programs.active
        if let program {
            // A program receives: its accept list decides, every item is kept in its folder and handed to it.
            options.directory = URL(fileURLWithPath: program.registration.directory, isDirectory: true)
            options.accept = program.registration.accept
            options.handOver = { item in program.deliver(item) }
        } else {
            options.catalogFile = device.paths.profilesFile
            options.mediaDirectory = device.paths.data
            options.history = inbox.history
        }
        if let entry, entry.asks {
            // The user answers first (share pending / accept / decline); the sender offers again to learn it.
            let (paths, localName, sender) = (device.paths, device.name, session.peerID)
            let address =
                PeerAddress(parsing: session.connection.remoteAddress)?.host ?? session.connection.remoteAddress
            options.gate = { offer, name in
                try PendingOffers.decide(
                    offer, from: sender, name: name, paths: paths, localName: localName, address: address,
                    announce: DesktopNotice.announce)
            }
        }
        let receiver = try ReceiveSession(options: options, progress: ProgressReporter(mode: .quiet))
        let report = try receiver.serve(session, peerName: peer, peer: entry, first: first)
        program?.refused(report.refused, from: peer)
        if let held = report.held {
            Self.log.info("offer held for an answer", metadata: ["peer": "\(peer)", "pending": "\(held.id)"])
            return
        }
        Self.log.info(
            "received",
            metadata: [
                "peer": "\(peer)", "saved": "\(report.saved.count)", "texts": "\(report.printed.count)",
                "profiles": "\(report.importedProfiles.count)", "refused": "\(report.refused.count)",
                "bytes": "\(report.bytesReceived)", "crossed": "\(report.bytesCrossed)",
                "fromCopy": "\(report.bytesFromCopy)",
            ])
    }

    /// Answers a paste: the item's representations for the peer are offered and only the one it chooses is
    /// produced.
    private func serveClipboard(
        _ session: Session, peer: String, visibility: PeerRelation, request: ClipboardRequest
    ) throws {
        guard let item = ClipboardItem.load(device.paths) else {
            throw ProtocolError(.refused, "nothing is copied on \(device.name) (or the copy expired)")
        }
        let items: [OutgoingItem]
        do {
            items = try item.items(device: device, relation: visibility)
        } catch let error as ShareFailure {
            throw ProtocolError(.refused, "the copied item on \(device.name) is gone: \(error.message)")
        }
        if request.peek {
            let info = ClipboardInfo(
                copied: item.copied.timeIntervalSince1970, expires: item.expires.timeIntervalSince1970,
                labels: items.map(\.label), types: items.map { $0.representations.map(\.offered.contentType) })
            try Exchange.answerPeek(session.connection.channel, info)
            return
        }
        let sender = SendSession(device: device, progress: ProgressReporter(mode: .quiet))
        let report = try sender.serve(session, peerName: peer, items: items)
        Self.log.info("clipboard pasted", metadata: ["peer": "\(peer)", "items": "\(report.delivered.count)"])
    }

    // MARK: Watch forwarding

    /// Passes items on. From the owner's devices to this agent's watches: they are negotiated with the watch's
    /// accept list (as it would itself), kept in `STATE/forward/`, and become an outbox job delivered over the
    /// watch's link. From an attached watch to the owner's devices: streamed on as they arrive (see
    /// `ForwardingBridge`). The policy decides both, and refuses in the same words whether the name exists or not.
    private func forward(_ session: Session, peer: TrustedDevice?, name: String, first: Frame) throws {
        let store = trust.store
        try check(.lookUpByName, peer)
        let target = store.find(name)
        guard let peer else { throw ProtocolError(.refused, AccessPolicy.notForwarded(device.name)) }
        if target.map({ AccessPolicy.decide(.forwardToWatch, peer: peer, target: $0).isAllowed }) == true,
            let target, let watch = watches.watch(target.id)
        {
            try keepForWatch(session, peer: peer.name, first: first, watch: watch, target: target)
            return
        }
        try check(.forwardFromWatch, peer, target: target)
        guard let target, watches.watch(peer.id) != nil else {
            throw ProtocolError(.refused, AccessPolicy.notForwarded(device.name))
        }
        try forwardFromWatch(session, watch: peer, first: first, to: target, trust: store)
    }

    private func keepForWatch(
        _ session: Session, peer: String, first: Frame, watch: WatchLinks.Known, target: TrustedDevice
    ) throws {
        let spool = device.paths.state.appendingPathComponent("forward", isDirectory: true)
            .appendingPathComponent(FileNamesOnDisk.sanitize(target.name, fallback: "device"), isDirectory: true)
        var options = ReceiveOptions(directory: spool, accept: watch.accept, maxSize: inbox.maxSize)
        options.keptFor = target.name
        options.folderMode = 0o700
        let receiver = try ReceiveSession(options: options, progress: ProgressReporter(mode: .quiet))
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
