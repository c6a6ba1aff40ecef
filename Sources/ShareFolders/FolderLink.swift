import FoundationEssentials
import Logging
import ShareEngine
import ShareNet
import ShareProtocol
import ShareSync
import ShareThreads
import ShareTLS
import ShareTrust

/// A folder link with one device: one session that carries both devices' index updates for every folder they
/// share, both ways, for as long as both run. One thread does all of it — it reads the peer's frames and sends what
/// this device's folders recorded, woken by a doorbell — so one TLS connection is never used by two threads. The
/// exchange itself is `FolderLinkMachine`'s; this is its driver.
final class FolderLink: Sendable {
    static let log = Log.logger("share.folders")
    /// Seconds of silence before a ping, and without any frame before the link counts as dead.
    static let pingAfter = 30.0
    static let deadAfter = 100.0

    let peer: DeviceID
    let peerName: String
    /// Whether this device opened it.
    let outgoing: Bool
    let session: Session
    private let wakeup = Wakeup()
    private weak let service: FolderService?

    private struct State {
        var machine: FolderLinkMachine
        /// Folders with entries to announce.
        var pending: Set<String> = []
        /// Frames to send (asks for files).
        var queued: [Frame] = []
        var stopped = false
    }
    private let state: Guarded<State>

    init(
        session: Session, peerName: String, outgoing: Bool, local: [FolderAnnouncement], withheld: [FolderWithheld],
        service: FolderService
    ) {
        self.session = session
        peer = session.peerID
        self.peerName = peerName
        self.outgoing = outgoing
        self.service = service
        state = Guarded(State(machine: FolderLinkMachine(local: local, withheld: withheld)))
    }

    /// The folders this link was opened for.
    var folders: Set<String> { state.withLock { Set($0.machine.local.keys) } }

    /// What the peer announced of the folders both have.
    var peerAnnouncements: [FolderAnnouncement] { state.withLock { Array($0.machine.peer.values) } }

    /// Whether both ends have `folder`, so its entries cross on this link.
    func shares(_ folder: String) -> Bool { state.withLock { $0.machine.shares(folder) } }

    /// Whether the peer said which folders it shares and `folder` was not among them (it removed it, or has not
    /// accepted it yet).
    func declines(_ folder: String) -> Bool {
        state.withLock { $0.machine.heard && !$0.machine.shares(folder) }
    }

    /// Why the peer does not share `folder` back, when its hello said (`FolderWithheld`'s states).
    func withholds(_ folder: String) -> String? { state.withLock { $0.machine.peerWithheld[folder] } }

    /// `folder` recorded entries: sent on this link's thread at once.
    func announce(_ folder: String) {
        _ = state.withLock { $0.pending.insert(folder) }
        wakeup.ring()
    }

    /// This device's folders shared with the peer changed (one added or accepted): the peer hears the new list on
    /// this link, and the index of a folder it offered and this device accepted starts at once. False when a folder
    /// went from the list (the caller makes the link again). The same list as before says nothing.
    func reannounce(_ folders: [FolderAnnouncement], withheld: [FolderWithheld]) -> Bool {
        let announced = state.withLock { state -> Bool? in
            // Said again when a folder came or went, or one's devices, type or name changed (the peer learns of a
            // device the folder is shared with now, and shares it with that device too where it trusts it).
            let same =
                Set(folders.map(\.id)) == Set(state.machine.local.keys)
                && folders.allSatisfy { folder in
                    state.machine.local[folder.id].map {
                        $0.devices == folder.devices && $0.type == folder.type && $0.label == folder.label
                    } ?? false
                } && withheld == state.machine.withheld
            guard !same else { return nil }
            guard let (hello, actions) = state.machine.announce(folders, withheld: withheld) else { return false }
            // Before any of the new folder's entries: the peer takes entries only of folders it knows both have.
            state.queued.append(MessageCoding.frame(.folderHello, hello))
            for case .sendIndex(let folder, _) in actions { state.pending.insert(folder) }
            return true
        }
        if announced == true { wakeup.ring() }
        return announced ?? true
    }

    /// Asks the peer to open a session to this device and send these files (this device cannot open one to it).
    func ask(_ pull: FolderPull) {
        let frame = pull.frame(.folderAsk, binary: session.peerHello.readsBinaryPulls)
        state.withLock { $0.queued.append(frame) }
        wakeup.ring()
    }

    /// Tells the peer that files it asked for will not come in a push.
    func notComing(_ pull: FolderPull) {
        let frame = pull.frame(.folderPush, binary: session.peerHello.readsBinaryPulls)
        state.withLock { $0.queued.append(frame) }
        wakeup.ring()
    }

    /// Ends the link (from any thread).
    func stop() {
        state.withLock { $0.stopped = true }
        wakeup.ring()
        session.connection.interrupt()
    }

    /// Runs the link on the calling thread until it ends. `first`: the peer's hello, when the peer opened the link
    /// (the router read it); this side's hello goes first when it opened the link. Returns the peer's refusal, when
    /// it refused the link (its policy, say).
    @discardableResult
    func run(first: Frame?) -> String? {
        var refusal: String?
        let connection = session.connection
        // Index updates are compressed when that pays (both ends of a link are agents, which decode zstd).
        let codec = ZstdChunkCodec()
        do {
            if outgoing { try connection.send(.folderHello, state.withLock { $0.machine.hello }) }
            if let first {
                try connection.send(.folderHello, state.withLock { $0.machine.hello })
                try handle(first, codec: codec)
            }
            var lastHeard = ContinuousClock.now
            var lastSent = ContinuousClock.now
            while !state.withLock({ $0.stopped }) {
                try checkTrusted()
                if try flush(codec: codec) { lastSent = .now }
                if (ContinuousClock.now - lastHeard).seconds > Self.deadAfter {
                    throw ProtocolError(.timeout, "\(peerName) said nothing for \(Int(Self.deadAfter)) s")
                }
                if (ContinuousClock.now - lastSent).seconds > Self.pingAfter {
                    try connection.send(.ping, Ping(nonce: UInt64.random(in: 0...UInt64.max)))
                    lastSent = .now
                }
                // Woken at least every second: a device no longer trusted is cut off within a second.
                guard connection.waitForInput(or: wakeup, timeout: 1) else { continue }
                let frame = try connection.receive()
                lastHeard = .now
                try checkTrusted()
                try handle(frame, codec: codec)
            }
            try? connection.send(.bye, Bye())
        } catch {
            if !state.withLock({ $0.stopped }) {
                Self.log.info("folder link ended", metadata: ["peer": "\(peerName)", "reason": "\(error)"])
            }
            if let error = error as? ProtocolError {
                if error.code == .refused, connection.channel.errorExchanged { refusal = error.message }
                if !connection.channel.errorExchanged { try? connection.send(.error, error) }
            }
        }
        state.withLock { $0.stopped = true }
        connection.close()
        return refusal
    }

    /// A device no longer trusted as the owner's (`share trust remove`, no longer `--team`) loses its link at once:
    /// nothing more of any index goes to it or is taken from it, and every file on its way to or from it stops.
    private func checkTrusted() throws {
        guard let service, !service.mayLink(peer) else { return }
        service.cutTransfers(with: peer)
        throw ProtocolError(.refused, "\(service.device.name) no longer shares folders with this device")
    }

    /// Sends what the folders recorded since they were last sent, and what was queued; whether anything went.
    private func flush(codec: ZstdChunkCodec) throws -> Bool {
        let queued = state.withLock { state -> [Frame] in
            defer { state.queued = [] }
            return state.queued
        }
        for frame in queued { try session.connection.send(frame) }
        let pending = state.withLock { state -> [(String, UInt64)] in
            let folders = state.pending
            state.pending = []
            return folders.flatMap { folder in
                state.machine.localChanged(folder).compactMap { action in
                    if case .sendIndex(let folder, let since) = action { return (folder, since) }
                    return nil
                }
            }
        }
        for (folder, since) in pending { try sendIndex(folder, since: since, codec: codec) }
        return !pending.isEmpty || !queued.isEmpty
    }

    private func sendIndex(_ folder: String, since: UInt64, codec: ZstdChunkCodec) throws {
        guard let service else { return }
        var from = since
        while true {
            guard let update = service.indexUpdate(folder, since: from) else { break }
            try session.connection.channel.send(
                Frame(type: .indexUpdate, payload: Packed.pack(update.encoded(), codec: codec)))
            state.withLock { $0.machine.sent(folder, upTo: update.to) }
            from = update.to
        }
    }

    private func handle(_ frame: Frame, codec: ZstdChunkCodec) throws {
        guard let service else { throw ProtocolError(.cancelled, "the agent is stopping") }
        switch frame.type {
        case .folderHello:
            let hello = try MessageCoding.decode(FolderHello.self, from: frame)
            let actions = try state.withLock { try $0.machine.received(hello) }
            for action in actions {
                switch action {
                case .sendIndex(let folder, let since): try sendIndex(folder, since: since, codec: codec)
                case .offered(let announcement): service.offered(announcement, by: peer, name: peerName)
                default: break
                }
            }
            service.linked(self)
        case .indexUpdate:
            let update = try IndexUpdate.decode(
                Packed.unpack(frame.payload, codec: codec, limit: Limits.maxIndexPayload, what: "index update"))
            let held = service.held(update.folder, of: peer)
            let actions = try state.withLock { try $0.machine.received(update, held: held) }
            for action in actions {
                switch action {
                case .apply(let update, let reset): try service.apply(update, reset: reset, from: peer)
                case .gap(let folder):
                    throw ProtocolError(.badMessage, "\(peerName) skipped part of its index of \(folder)")
                default: break
                }
            }
        case .folderAsk:
            let pull = try FolderPull.decode(frame)
            service.push(pull, to: peer, name: peerName, link: self)
        case .folderPush:
            let missing = try FolderPull.decode(frame)
            service.notComing(missing, from: peer)
        case .ping:
            try session.connection.send(.pong, try MessageCoding.decode(Ping.self, from: frame))
        case .pong:
            break
        case .bye:
            state.withLock { $0.stopped = true }
        case .error:
            throw MessageCoding.peerError(from: frame)
        default:
            throw ProtocolError(.badMessage, "\(frame.type) on a folder link")
        }
    }
}
