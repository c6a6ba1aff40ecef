import FoundationEssentials
import Synchronization
import ShareProtocol
import ShareThreads
import ShareTLS
import ShareNet
import ShareTrust
import ShareReach
import UniformTypeIdentifiers
import ShareEngine
import ShareFolders

/// Serves each authenticated session of the agent: tells by its hello and first frame what the device asks (a ping,
/// a send into the inbox, a paste, a watch attaching, a forwarding, trust notices, a shared folder's link, pull or
/// push), asks `AccessPolicy` whether it may, and hands the session to the one part that does it (`InboxReceiver`,
/// `ClipboardServer`, `WatchForwarding`, `WatchLinks`, `NoticeCourier`, `FolderService`). A device has at most `maxSessionsPerDevice` sessions at once and one receiving session.
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
    /// Sessions open per device.
    private let sessions = Guarded([DeviceID: Int]())
    /// The sessions being served and what each was let in for: the policy is asked again while they last.
    let warden: SessionWarden
    /// Sessions that send into the inbox (or to a program receiving through the agent).
    let inboxReceiver: InboxReceiver
    /// Paste requests.
    let clipboard: ClipboardServer
    /// Items passed on to and from watches.
    let forwarding: WatchForwarding

    /// Discovery servers and relays, for reaching the device a watch sends to.
    let reach: ReachSettings

    /// The program receiving through the agent, when one is.
    let programs: RegisteredPrograms

    /// The inbox folder of a device.
    func inboxFolder(_ peer: String) -> URL { inboxReceiver.inboxFolder(peer) }

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
        inboxReceiver = InboxReceiver(device: device, inbox: inbox, programs: programs)
        clipboard = ClipboardServer(device: device)
        forwarding = WatchForwarding(device: device, trust: trust, inbox: inbox, watches: watches, reach: reach)
        warden = SessionWarden(trust: trust, localName: device.name)
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
        defer {
            warden.ended(session)
            release(session.peerID)
        }
        courier?.wake(for: session.peerID)
        folders?.heard(session.peerID)
        // A session from a trusted device says it is there: the jobs waiting for it are tried now.
        if let entry { outbox?.retryNow(to: [entry.name.lowercased(), entry.id.description.lowercased()]) }
        do {
            if session.peerHello.role == .pair { try check(.pair, entry) }
            if session.peerHello.role == .watch, session.peerHello.forwardTo == nil, session.peerHello.accept != nil {
                try check(.attachAsWatch, entry)
                warden.admitted(session, name: peer, for: .attachAsWatch)
                let names: Set<String> = [peer.lowercased(), session.peerID.description.lowercased()]
                watches.serve(session, name: peer) { [outbox] in outbox?.retryNow(to: names) }
                return
            }
            guard let first = try PingClient.answerPings(session) else { return }
            switch first.type {
            case .offer:
                if let name = session.peerHello.forwardTo {
                    // Every forwarding needs the owner's device (the target is judged when it is named).
                    try check(.lookUpByName, entry)
                    warden.admitted(session, name: peer, for: .lookUpByName)
                    try forwarding.forward(session, peer: entry, name: name, first: first, outbox: outbox)
                } else {
                    try check(.sendToInbox, entry)
                    warden.admitted(session, name: peer, for: .sendToInbox)
                    try inboxReceiver.receive(session, peer: peer, entry: entry, first: first)
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
                warden.admitted(session, name: peer, for: .syncFolders)
                guard let folders else { throw ProtocolError(.refused, "\(device.name) shares no folders") }
                folders.serveLink(session, first: first, peerName: peer)
            case .folderPull:
                try check(.syncFolders, entry)
                warden.admitted(session, name: peer, for: .syncFolders)
                guard let folders else { throw ProtocolError(.refused, "\(device.name) shares no folders") }
                try folders.servePull(session, first: first, peerName: peer)
            case .folderPush:
                try check(.syncFolders, entry)
                warden.admitted(session, name: peer, for: .syncFolders)
                guard let folders else { throw ProtocolError(.refused, "\(device.name) shares no folders") }
                try folders.receivePush(session, first: first, peerName: peer)
            case .clipboardRequest:
                try check(.pasteClipboard, entry)
                warden.admitted(session, name: peer, for: .pasteClipboard)
                try clipboard.serve(
                    session, peer: peer, visibility: AccessPolicy.visibility(for: entry),
                    request: Exchange.clipboardRequest(in: first))
            default: throw ProtocolError(.badMessage, "unexpected \(first.type) at the start of a session")
            }
        } catch let error as TLSError where error.kind == .timeout {
            Self.log.debug("session closed after being idle", metadata: ["peer": "\(peer)"])
        } catch  where warden.wasCut(session) {
            // Cut because the policy no longer allows it (said here when it was cut): the device is told why, when
            // the session ended at a frame rather than broken off.
            if let error = error as? ProtocolError { session.connection.fail(with: error) }
        } catch let error as ProtocolError {
            Self.log.warning("session ended", metadata: ["peer": "\(peer)", "reason": "\(error.message)"])
            session.connection.fail(with: error)
        } catch {
            Self.log.warning("session ended", metadata: ["peer": "\(peer)", "reason": "\(error)"])
        }
    }

    private func check(_ capability: Capability, _ peer: TrustedDevice?) throws {
        try AccessPolicy.require(capability, peer: peer, localName: device.name)
    }

    private func admit(_ id: DeviceID) -> Bool {
        sessions.withLock { sessions in
            guard sessions[id, default: 0] < Self.maxSessionsPerDevice else { return false }
            sessions[id, default: 0] += 1
            return true
        }
    }

    private func release(_ id: DeviceID) {
        sessions.withLock { sessions in
            sessions[id, default: 1] -= 1
            if sessions[id] == 0 { sessions[id] = nil }
        }
    }

}

extension AccessPolicy {
    /// The policy's answer as a session's error: refused, with its reason.
    static func require(
        _ capability: Capability, peer: TrustedDevice?, target: TrustedDevice? = nil, localName: String
    ) throws {
        if case .refused(let reason) = decide(capability, peer: peer, target: target, localName: localName) {
            throw ProtocolError(.refused, reason)
        }
    }
}
