import ShareHTTP
import FoundationEssentials
import ShareText
import Glibc
import ShareTrust
import ShareTLS
import ShareNet

/// A Global Discovery v3 client (Syncthing's protocol, served by `stdiscosrv`): announces this device's addresses
/// with an HTTPS POST authenticated by its certificate, and looks trusted devices up by ID with a GET. Blocking.
public struct DiscoveryClient: Sendable {
    public let identity: TLSIdentity
    public var timeout: Double

    public init(identity: TLSIdentity, timeout: Double = 10) {
        self.identity = identity
        self.timeout = timeout
    }

    /// What an announcement brought.
    public struct Announced: Sendable {
        /// When to announce again: the server's `Reannounce-After`, else 30 minutes.
        public var reannounceAfter: Double
    }

    /// Announces `addresses` (`tcp://:PORT` means "the address this announcement comes from") to `server`.
    public func announce(_ addresses: [String], to server: ServerURL) throws(ShareFailure) -> Announced {
        let body = (try? JSONText.bytes(["addresses": addresses])) ?? Array("{}".utf8)
        let response = try exchange(server, method: "POST", path: server.path, body: Array(body))
        switch response.status {
        case 200, 204:
            let after = response.headers["reannounce-after"].flatMap(Double.init) ?? 1800
            return Announced(reannounceAfter: min(max(after, 10), 24 * 3600))
        case 403:
            throw ShareFailure(
                .refused, "discovery server \(server.address) did not take this device's certificate (403)")
        case 429:
            let after = response.headers["retry-after"].flatMap(Double.init) ?? 60
            throw ShareFailure(
                .unavailable, "discovery server \(server.address) asks to wait \(Int(after)) s before announcing again")
        default:
            throw ShareFailure(
                .refused,
                "discovery server \(server.address) refused the announcement (\(response.status) \(Self.text(response)))"
            )
        }
    }

    /// The addresses `id` last announced at `server`; empty when the server does not know it.
    public func lookup(_ id: DeviceID, at server: ServerURL) throws(ShareFailure) -> [String] {
        let query = server.path + "?device=" + id.description
        let response = try exchange(server, method: "GET", path: query, body: nil)
        switch response.status {
        case 200:
            guard let object = JSONText.object(response.body) else {
                throw ShareFailure(
                    .protocolError, "discovery server \(server.address) answered the lookup with something not JSON")
            }
            let addresses = (object["addresses"] as? [Any] ?? []).compactMap { $0 as? String }
            // At most 32 addresses of at most 256 bytes: what a device announces, with room.
            return Array(addresses.filter { $0.utf8.count <= 256 }.prefix(32))
        case 404:
            return []
        default:
            throw ShareFailure(
                .unavailable,
                "discovery server \(server.address) could not look \(id.short)… up (\(response.status) \(Self.text(response)))"
            )
        }
    }

    private func exchange(_ server: ServerURL, method: String, path: String, body: [UInt8]?) throws(ShareFailure)
        -> HTTPResponse
    {
        let connection = try ServerConnection(to: server, identity: identity, timeout: timeout)
        defer { connection.close() }
        do {
            try connection.write(
                HTTPResponse.request(method: method, path: path, host: server.address.description, body: body))
            var received: [UInt8] = []
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                let chunk = try connection.read(upTo: 16 << 10)
                if let response = try HTTPResponse.parse(received + chunk, complete: chunk.isEmpty) { return response }
                received += chunk
            }
            throw ShareFailure(
                .unavailable, "discovery server \(server.address) did not answer within \(Int(timeout)) s")
        } catch let error as ShareFailure {
            throw error
        } catch {
            throw ShareFailure(.unavailable, "discovery server \(server.address): \(error)")
        }
    }

    private static func text(_ response: HTTPResponse) -> String {
        String(decoding: response.body.prefix(120), as: UTF8.self).trimmed
    }
}

/// Lookups this device made, with their age (`STATE/lookups.json`, 0600), shared by the agent and the command line:
/// a device found a moment ago is not looked up again for every send.
public enum LookupCache {
    /// How long a found address list is used before it is looked up again.
    public static let freshFor: Double = 300

    public struct Entry: Codable, Sendable {
        public var addresses: [String]
        public var fetched: Date
    }

    static func file(_ paths: DevicePaths) -> URL { paths.state.appendingPathComponent("lookups.json") }

    public static func load(_ paths: DevicePaths) -> [String: Entry] {
        guard let data = PosixFiles.read(file(paths).path),
            let map = try? JSONDecoder.iso8601.decode([String: Entry].self, from: data)
        else { return [:] }
        return map
    }

    /// The cached addresses of `id` while fresh.
    public static func fresh(_ id: DeviceID, paths: DevicePaths, now: Date = Date()) -> Entry? {
        guard let entry = load(paths)[id.description], now.timeIntervalSince(entry.fetched) < freshFor else {
            return nil
        }
        return entry
    }

    public static func record(_ id: DeviceID, _ addresses: [String], paths: DevicePaths) {
        var map = load(paths).filter { Date().timeIntervalSince($0.value.fetched) < 24 * 3600 }
        map[id.description] = Entry(addresses: addresses, fetched: Date())
        guard let data = try? JSONEncoder.iso8601.encode(map) else { return }
        try? DevicePaths.ensurePrivateDirectory(paths.state)
        try? AtomicFile.write(data, to: file(paths), mode: 0o600, durable: false)
    }
}
