import FoundationEssentials
import ShareTrust
import ShareTLS

/// How each trusted device was last reached, and when (`STATE/routes.json`, 0600): what `share status` and `share
/// peers` show beside a device (`direct`, `via relay HOST`). Best effort: a lost record only loses that line.
public enum RouteBook {
    public struct Entry: Codable, Sendable {
        public var route: String
        public var address: String
        public var at: Date
    }

    static func file(_ paths: DevicePaths) -> URL { paths.state.appendingPathComponent("routes.json") }

    public static func load(_ paths: DevicePaths) -> [String: Entry] {
        guard let data = PosixFiles.read(file(paths).path),
            let map = try? JSONDecoder.iso8601.decode([String: Entry].self, from: data)
        else { return [:] }
        return map
    }

    public static func record(_ id: DeviceID, _ session: Session, paths: DevicePaths) {
        var map = load(paths)
        map[id.description] = Entry(
            route: session.route.description, address: session.connection.remoteAddress, at: Date())
        if map.count > 1_024 { map = map.filter { $0.key == id.description } }
        guard let data = try? JSONEncoder.iso8601.encode(map) else { return }
        try? DevicePaths.ensurePrivateDirectory(paths.state)
        try? AtomicFile.write(data, to: file(paths), mode: 0o600, durable: false)
    }
}
