import ShareThreads
import FoundationEssentials
import Logging
import ShareProtocol
import ShareTLS
import ShareNet
import ShareTrust
import CoreTransferable
import UniformTypeIdentifiers
import ShareEngine

/// What an agent announces on the local network: who it is and where it listens. No secrets: anyone on the network
/// may hear it, and only a device already trusted is ever sent to.
package struct Announcement: Codable, Sendable, Equatable {
    package var magic = "share-discovery"
    package var version = Limits.protocolVersion
    package var id: String
    package var name: String
    package var port: Int
}

/// LAN discovery: announces this agent every `interval` seconds to a multicast group (and by broadcast, unless
/// confined to one interface), listens for the announcements of others, and keeps what it heard in
/// `STATE/discovered.json` (0600) for `share peers` and as a hint for reaching trusted devices.
///
/// A flood cannot cost much: at most `maxRemembered` devices are remembered (devices not trusted here at most
/// `maxStrangers`, and they are the first to go), an entry not heard for `expiry` seconds is forgotten, and the
/// file is written at most once per `writeInterval`. An announcement is a hint only: a send tries the address a
/// trusted device announced with the same pinned handshake as any other, and falls back to the last address that
/// worked.
package final class Discovery: AgentPart, Sendable {
    package static let defaultPort = LANDiscovery.defaultPort
    package static let group = LANDiscovery.group
    package static let maxRemembered = 1_024
    package static let maxStrangers = 256
    package static let writeInterval = 5.0
    static let log = Log.logger("share.discovery")

    package let file: URL
    private let announcement: [UInt8]
    private let ownID: String
    private let port: Int
    private let interval: Double
    /// Seconds after which a device not heard is forgotten.
    let expiry: Double
    private let fd: Int32
    private struct State {
        var peers: [String: DiscoveredPeer]
        var dirty = false
        var lastWrite = Date.distantPast
        var stopped = false
        var running = 0
    }
    private let state: Guarded<State>
    private let interface: String?
    private let trust: TrustCache
    /// Called with a trusted device's name and ID when it is heard again after a silence (or for the first time):
    /// the jobs waiting for it are tried at once.
    private let heardAgain: @Sendable (String, String) -> Void
    package let partName = "discovery"

    /// `interface`: announce and listen on that IPv4 interface only (127.0.0.1: this machine only); the socket is
    /// then bound to the group address, not to every address.
    package init(
        device: LocalDevice, listenPort: Int, port: Int = Discovery.defaultPort, interval: Double = 30,
        interface: String? = nil, trust: TrustCache,
        heardAgain: @escaping @Sendable (String, String) -> Void = { _, _ in }
    ) throws {
        self.interface = interface
        self.heardAgain = heardAgain
        self.trust = trust
        file = DiscoveredPeer.file(device.paths)
        ownID = device.id.description
        self.port = port
        self.interval = interval
        expiry = max(10 * interval, 300)
        announcement = Array(
            try JSONEncoder().encode(Announcement(id: device.id.description, name: device.name, port: listenPort)))
        do {
            fd = try Syscalls.discoverySocket(port: port, group: Self.group, interface: interface)
        } catch let error as Syscalls.SocketError {
            throw ShareFailure(
                .unavailable, "discovery: \(error.message); choose another --discovery-port or turn it off")
        }
        let now = Date()
        let peers = Dictionary(
            DiscoveredPeer.load(device.paths).filter { now.timeIntervalSince($0.lastSeen) < max(10 * interval, 300) }
                .prefix(Self.maxRemembered).map { ($0.id, $0) },
            uniquingKeysWith: { $1 })
        state = Guarded(State(peers: peers))
    }

    package func start() { start(failed: { _ in }) }

    /// `failed` hears once if the socket keeps failing for a minute (not a lost datagram: a socket that cannot be
    /// read at all), so the agent ends and is restarted rather than going on deaf.
    package func start(failed: @escaping @Sendable (Error) -> Void) {
        state.withLock { $0.running = 2 }
        Threads.start(name: "share-announce", stackSize: 8 << 20) { [self] in
            Syscalls.setThreadPriority(lowerBy: 0)
            defer { finished() }
            while true {
                Syscalls.sendDatagram(fd, announcement, host: Self.group, port: port)
                if interface == nil {
                    Syscalls.sendDatagram(fd, announcement, host: "255.255.255.255", port: port)
                }
                if state.wait(seconds: interval, until: { $0.stopped }) { return }
                flush(force: false)
            }
        }
        Threads.start(name: "share-discovery", stackSize: 8 << 20) { [self] in
            Syscalls.setThreadPriority(lowerBy: 0)
            defer { finished() }
            var failingSince: Date?
            while !state.withLock({ $0.stopped }) {
                // What was heard is written within `writeInterval` whether announcements keep coming or not.
                do {
                    if let (bytes, from) = try Syscalls.receiveDatagram(fd, timeout: 0.5) { heard(bytes, from: from) }
                    failingSince = nil
                } catch {
                    let since = failingSince ?? Date()
                    failingSince = since
                    if Date().timeIntervalSince(since) > 60 {
                        failed(error)
                        break
                    }
                    state.wait(seconds: 0.5) { $0.stopped }
                }
                flush(force: false)
            }
            flush(force: true)
        }
    }

    private func finished() {
        state.withLock { $0.running -= 1 }
    }

    /// Stops both threads and closes the socket.
    package func stop() {
        state.withLock { $0.stopped = true }
        state.wait { $0.running == 0 }
        Syscalls.close(fd)
    }

    /// Devices remembered now (for tests and `share status`).
    var remembered: Int { state.withLock { $0.peers.count } }

    private func heard(_ bytes: [UInt8], from host: String) {
        guard let message = try? JSONDecoder().decode(Announcement.self, from: Data(bytes)),
            message.magic == "share-discovery", message.id != ownID, let id = try? DeviceID(parsing: message.id),
            (1...65535).contains(message.port), !message.name.isEmpty, message.name.utf8.count <= Limits.maxDeviceName,
            !message.name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else { return }
        let trustedIDs = Set(trust.store.devices.map(\.id.description))
        let trusted = trustedIDs.contains(id.description)
        let now = Date()
        let peer = DiscoveredPeer(
            id: id.description, name: message.name, address: PeerAddress(host: host, port: message.port),
            lastSeen: now, version: message.version)
        let again = state.withLock { state -> Bool in
            let known = state.peers[peer.id]
            return known.map { now.timeIntervalSince($0.lastSeen) > 2 * interval } ?? true
        }
        if trusted, again { heardAgain(trust.store.device(id)?.name ?? peer.name, peer.id) }
        state.withLock { state in
            let known = state.peers[peer.id]
            if known == nil { makeRoom(&state, now: now, trusted: trustedIDs) }
            guard known != nil || state.peers.count < Self.maxRemembered else { return }
            if !trusted, known == nil,
                state.peers.keys.filter({ !trustedIDs.contains($0) }).count >= Self.maxStrangers
            {
                return
            }
            state.peers[peer.id] = peer
            // A change of address or name is written soon; a device only heard again is written at the next flush.
            if known.map({ $0.address != peer.address || $0.name != peer.name }) ?? true { state.dirty = true }
            if let known, now.timeIntervalSince(known.lastSeen) > interval { state.dirty = true }
        }
    }

    /// Forgets expired entries, then, when full, the strangers heard longest ago (never a trusted device for a
    /// stranger). Called with the state locked.
    private func makeRoom(_ state: inout State, now: Date, trusted: Set<String>) {
        let before = state.peers.count
        state.peers = state.peers.filter { now.timeIntervalSince($0.value.lastSeen) < expiry }
        if state.peers.count >= Self.maxRemembered {
            let strangers = state.peers.values.filter { !trusted.contains($0.id) }.sorted { $0.lastSeen < $1.lastSeen }
            for stranger in strangers.prefix(state.peers.count - Self.maxRemembered + 1) {
                state.peers[stranger.id] = nil
            }
        }
        if state.peers.count != before { state.dirty = true }
    }

    /// Writes the file when something changed, at most once per `writeInterval` unless forced.
    private func flush(force: Bool) {
        let due = state.withLock { state -> [DiscoveredPeer]? in
            guard state.dirty, force || Date().timeIntervalSince(state.lastWrite) >= Self.writeInterval else {
                return nil
            }
            let now = Date()
            state.peers = state.peers.filter { now.timeIntervalSince($0.value.lastSeen) < expiry }
            state.dirty = false
            state.lastWrite = now
            return Array(state.peers.values)
        }
        guard let snapshot = due else { return }
        do {
            try AtomicFile.write(try JSONEncoder.iso8601.encode(snapshot), to: file, mode: 0o600, durable: false)
        } catch {
            Self.log.warning("cannot record what discovery heard", metadata: ["error": "\(error)"])
        }
    }
}
