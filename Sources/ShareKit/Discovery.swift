import Foundation
import ShareProtocol
import ShareTLS

/// What an agent announces on the local network: who it is and where it listens. No secrets: anyone on the network
/// may hear it, and only a device already trusted is ever sent to.
public struct Announcement: Codable, Sendable, Equatable {
    public var magic = "share-discovery"
    public var version = Limits.protocolVersion
    public var id: String
    public var name: String
    public var port: Int
}

/// LAN discovery: announces this agent every `interval` seconds to a multicast group and by broadcast, listens for
/// the announcements of others, and keeps what it heard in `STATE/discovered.json` (0600) for `share peers` and for
/// reaching trusted devices by name without a recorded address.
public final class Discovery: @unchecked Sendable {  // `peers` and `stopped` guarded by `lock`
    public static let defaultPort = 21_847
    public static let group = "239.255.77.77"

    public let file: URL
    private let announcement: [UInt8]
    private let ownID: String
    private let port: Int
    private let interval: Double
    private let fd: Int32
    private let lock = NSCondition()
    private var peers: [String: DiscoveredPeer]
    private var stopped = false
    private var running = 0

    private let interface: String?

    /// `interface`: announce and listen on that IPv4 interface only (127.0.0.1: this machine only).
    public init(
        device: LocalDevice, listenPort: Int, port: Int = Discovery.defaultPort, interval: Double = 30,
        interface: String? = nil
    ) throws {
        self.interface = interface
        file = Self.file(device.paths)
        ownID = device.id.description
        self.port = port
        self.interval = interval
        announcement = Array(
            try JSONEncoder().encode(Announcement(id: device.id.description, name: device.name, port: listenPort)))
        do {
            fd = try Syscalls.discoverySocket(port: port, group: Self.group, interface: interface)
        } catch let error as Syscalls.SocketError {
            throw ShareError(
                .unavailable, "discovery: \(error.message); choose another --discovery-port or turn it off")
        }
        peers = Dictionary(Self.load(device.paths).map { ($0.id, $0) }, uniquingKeysWith: { $1 })
    }

    public static func file(_ paths: DevicePaths) -> URL { paths.state.appendingPathComponent("discovered.json") }

    /// What this device has heard, newest first.
    public static func load(_ paths: DevicePaths) -> [DiscoveredPeer] {
        guard let data = FileManager.default.contents(atPath: file(paths).path),
            let peers = try? JSONDecoder.iso8601.decode([DiscoveredPeer].self, from: data)
        else { return [] }
        return peers.sorted { $0.lastSeen > $1.lastSeen }
    }

    public func start() {
        lock.withLock { running = 2 }
        let announcer = Thread { [self] in
            Syscalls.setThreadPriority(lowerBy: 0)
            defer { finished() }
            while true {
                Syscalls.sendDatagram(fd, announcement, host: Self.group, port: port)
                if interface == nil {
                    Syscalls.sendDatagram(fd, announcement, host: "255.255.255.255", port: port)
                }
                lock.lock()
                let deadline = Date().addingTimeInterval(interval)
                while !stopped && lock.wait(until: deadline) {}
                let stop = stopped
                lock.unlock()
                if stop { return }
            }
        }
        announcer.name = "share-announce"
        announcer.start()
        let listener = Thread { [self] in
            Syscalls.setThreadPriority(lowerBy: 0)
            defer { finished() }
            while !lock.withLock({ stopped }) {
                guard let (bytes, from) = Syscalls.receiveDatagram(fd, timeout: 0.5) else { continue }
                heard(bytes, from: from)
            }
        }
        listener.name = "share-discovery"
        listener.start()
    }

    private func finished() {
        lock.withLock {
            running -= 1
            lock.broadcast()
        }
    }

    /// Stops both threads and closes the socket.
    public func stop() {
        lock.lock()
        stopped = true
        lock.broadcast()
        while running > 0 { lock.wait() }
        lock.unlock()
        Syscalls.close(fd)
    }

    private func heard(_ bytes: [UInt8], from host: String) {
        guard let message = try? JSONDecoder().decode(Announcement.self, from: Data(bytes)),
            message.magic == "share-discovery", message.id != ownID, (try? DeviceID(parsing: message.id)) != nil,
            (1...65535).contains(message.port), !message.name.isEmpty, message.name.utf8.count <= Limits.maxDeviceName,
            !message.name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else { return }
        let peer = DiscoveredPeer(
            id: message.id, name: message.name, address: PeerAddress(host: host, port: message.port),
            lastSeen: Date(), version: message.version)
        lock.lock()
        let changed = peers[peer.id].map { $0.address != peer.address || $0.name != peer.name } ?? true
        let stale = peers[peer.id].map { peer.lastSeen.timeIntervalSince($0.lastSeen) > 5 } ?? true
        peers[peer.id] = peer
        let snapshot = Array(peers.values)
        lock.unlock()
        if changed || stale {
            try? AtomicFile.write(try JSONEncoder.iso8601.encode(snapshot), to: file, mode: 0o600, durable: false)
        }
    }
}
