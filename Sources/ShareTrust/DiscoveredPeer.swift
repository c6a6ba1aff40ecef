import FoundationEssentials
import ShareTLS

/// A device heard on the local network.
public struct DiscoveredPeer: Codable, Sendable, Equatable {
    public var id: String
    public var name: String
    public var address: PeerAddress
    public var lastSeen: Date
    public var version: Int

    public init(id: String, name: String, address: PeerAddress, lastSeen: Date, version: Int) {
        self.id = id
        self.name = name
        self.address = address
        self.lastSeen = lastSeen
        self.version = version
    }
}

extension DiscoveredPeer {
    /// Where an agent keeps what it heard: `STATE/discovered.json`.
    public static func file(_ paths: DevicePaths) -> URL { paths.state.appendingPathComponent("discovered.json") }

    /// What this device's agent has heard, newest first.
    public static func load(_ paths: DevicePaths) -> [DiscoveredPeer] {
        guard let data = PosixFiles.read(file(paths).path),
            let peers = try? JSONDecoder.iso8601.decode([DiscoveredPeer].self, from: data)
        else { return [] }
        return peers.sorted { $0.lastSeen > $1.lastSeen }
    }
}

/// The last address each trusted device was reached at (`STATE/reached.json`, 0600): where a send falls back when
/// the address a device announced does not answer as that device.
public enum ReachedAddresses {
    static func file(_ paths: DevicePaths) -> URL { paths.state.appendingPathComponent("reached.json") }

    public static func load(_ paths: DevicePaths) -> [String: PeerAddress] {
        guard let data = PosixFiles.read(file(paths).path),
            let map = try? JSONDecoder().decode([String: PeerAddress].self, from: data)
        else { return [:] }
        // Keyed as this version prints IDs (earlier versions wrote other check characters).
        return Dictionary(
            map.map { ((try? DeviceID(parsing: $0.key))?.description ?? $0.key, $0.value) },
            uniquingKeysWith: { _, last in last })
    }

    /// Records that `id` answered at `address` (best effort: a lost record only costs a fallback).
    public static func record(_ id: DeviceID, _ address: PeerAddress, paths: DevicePaths) {
        var map = load(paths)
        guard map[id.description] != address else { return }
        map[id.description] = address
        if map.count > 1_024 { map = map.filter { $0.key == id.description } }
        guard let data = try? JSONEncoder().encode(map) else { return }
        try? DevicePaths.ensurePrivateDirectory(paths.state)
        try? AtomicFile.write(data, to: file(paths), mode: 0o600, durable: false)
    }
}
