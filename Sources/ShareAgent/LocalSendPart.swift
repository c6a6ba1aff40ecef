import ShareHTTP
import ShareThreads
import Synchronization
import FoundationEssentials
import ShareLocalSendRoute
import Logging
import ShareLocalSend
import ShareTLS
import ShareNet
import ShareTrust
import ShareProtocol
import CoreTransferable
import UniformTypeIdentifiers
import ShareEngine

/// The agent's LocalSend part: the HTTPS server LocalSend devices upload to (`LocalSendInbox`), LocalSend's
/// discovery (multicast, and registration with addresses given by hand), and the list of devices seen, kept in
/// `STATE/localsend/peers.json` for `share peers` and `share send --to`.
package final class LocalSendPart: AgentPart, Sendable {
    static let log = Log.logger("share.localsend")
    package let partName = "LocalSend"
    package let server: LocalSendServer
    package let inbox: LocalSendInbox
    let discovery: LocalSendDiscovery
    package let peers: LocalSendPeers
    package let fingerprint: String
    let paths: DevicePaths
    /// Whether the part is stopping (the saver thread waits on it).
    private let stopping = Guarded(false)

    /// Called with the names of devices seen again (proved), so that jobs queued for them are tried now.
    let seenAgain: @Sendable (Set<String>) -> Void

    package init(
        device: LocalDevice, host: String, inbox agentInbox: AgentInbox, settings: LocalSendSettings,
        seenAgain: @escaping @Sendable (Set<String>) -> Void = { _ in }
    ) throws {
        self.seenAgain = seenAgain
        let identity = try LocalSendIdentity.load(device.paths)
        fingerprint = try LocalSendIdentity.fingerprint(identity)
        paths = device.paths
        let peers = LocalSendPeers(ownFingerprint: fingerprint)
        self.peers = peers
        var addresses: [LocalSendAddress] = []
        for text in settings.peers ?? [] {
            guard let address = LocalSendSettings.address(text) else {
                throw ShareFailure(.configuration, "LocalSend peer '\(text)' is not HOST:PORT")
            }
            addresses.append(address)
        }
        let bind = settings.listen ?? host
        var started: LocalSendServer?
        let info0 = LocalSendInfo(
            alias: device.name, deviceModel: "share", deviceType: "desktop", fingerprint: fingerprint,
            port: settings.port ?? LocalSend.defaultPort)
        let inboxHolder = InboxHolder()
        do {
            started = try LocalSendServer(identity: identity, host: bind, port: settings.port ?? LocalSend.defaultPort)
            {
                head, http, caller in
                guard let inbox = inboxHolder.inbox else { throw HTTPFailure(503, "starting") }
                return try inbox.route(head, http, caller)
            }
        } catch let error as Syscalls.SocketError {
            throw ShareFailure(
                .unavailable,
                "LocalSend: \(error.message); choose another port with --localsend-port (LocalSend's is 53317)")
        }
        server = started!
        var info = info0
        info.port = server.port
        let own = info
        inbox = LocalSendInbox(device: device, inbox: agentInbox, settings: settings, info: own, peers: peers)
        inboxHolder.inbox = inbox
        let multicast = settings.multicastPort ?? LocalSend.defaultPort
        discovery = LocalSendDiscovery(
            info: { own }, peers: peers, client: try LocalSendClient(identity: identity),
            multicastPort: multicast == 0 ? nil : multicast, interface: settings.interface, addresses: addresses)
    }

    private final class InboxHolder: Sendable {
        private let held = Mutex<LocalSendInbox?>(nil)
        var inbox: LocalSendInbox? {
            get { held.withLock { $0 } }
            set { held.withLock { $0 = newValue } }
        }
    }

    package var port: Int { server.port }

    package func start(failed: @escaping @Sendable (Error) -> Void) throws {
        server.start(failed: failed)
        discovery.start()
        Threads.start(name: "share-localsend-peers", stackSize: 8 << 20) { [self] in
            // Writes the list of devices seen when it changes, at most once a second.
            var lastSaved: [LocalSendPeer] = []
            var seenAt: [String: Date] = [:]
            while !stopping.withLock({ $0 }) {
                let now = peers.all
                // On a change, and every 30 s for the times last seen.
                let stale = zip(now, lastSaved).contains { $0.lastSeen.timeIntervalSince($1.lastSeen) > 30 }
                if now.map(\.info) != lastSaved.map(\.info) || now.map(\.host) != lastSaved.map(\.host) || stale {
                    LocalSendSeen.save(now, paths: paths)
                    lastSaved = now
                }
                // A device proved again since the last look: its queued jobs go now.
                let again = now.filter { peer in
                    peer.proved && peer.lastSeen > (seenAt[peer.info.fingerprint] ?? .distantPast)
                }
                for peer in now { seenAt[peer.info.fingerprint] = peer.lastSeen }
                if !again.isEmpty { seenAgain(Set(again.map { $0.info.alias.lowercased() })) }
                stopping.wait(seconds: 1) { $0 }
            }
            LocalSendSeen.save(peers.all, paths: paths)
        }
        Self.log.info("LocalSend on", metadata: ["port": "\(server.port)", "fingerprint": "\(fingerprint)"])
    }

    package func stop() {
        stopping.withLock { $0 = true }
        discovery.stop()
        server.stop()
    }
}
