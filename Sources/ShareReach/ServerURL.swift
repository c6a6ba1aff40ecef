import FoundationEssentials
import ShareText
import ShareTrust
import ShareTLS

/// A server beyond the LAN, pinned by its device ID: a Global Discovery v3 server (`https://HOST:PORT/PATH?id=ID`,
/// Syncthing's `stdiscosrv`) or a Relay Protocol v1 relay (`relay://HOST:PORT/?id=ID`, Syncthing's `strelaysrv`).
/// The `id` is required: the server's certificate must have that digest, so nothing is trusted on first use. Other
/// query parameters (a relay's own URI lists `pingInterval`, `networkTimeout` …) are kept in `text` and ignored.
public struct ServerURL: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable { case discovery, relay }

    public let kind: Kind
    public let host: String
    public let port: Int
    /// The request path of a discovery server (`/v2/` when the URL gives none).
    public let path: String
    /// The server's device ID: the SHA-256 of the certificate it must present.
    public let id: DeviceID
    /// The URL as written.
    public let text: String

    /// `HOST:PORT`, with an IPv6 host in brackets.
    public var address: PeerAddress { PeerAddress(host: host, port: port) }

    public var description: String { text }

    /// The URL as it is announced and stored: scheme, address, path and the pinned ID, nothing else.
    public var canonical: String {
        switch kind {
        case .discovery: return "https://\(address)\(path)?id=\(id)"
        case .relay: return "relay://\(address)/?id=\(id)"
        }
    }

    /// Parses a server URL; the error says what is wrong with it in one sentence.
    public init(parsing text: String) throws(ShareFailure) {
        let trimmed = text.trimmedSpaces
        let kind: Kind
        let rest: Substring
        if trimmed.lowercased().hasPrefix("https://") {
            kind = .discovery
            rest = trimmed.dropFirst("https://".count)
        } else if trimmed.lowercased().hasPrefix("relay://") {
            kind = .relay
            rest = trimmed.dropFirst("relay://".count)
        } else {
            throw ShareFailure(
                .usage,
                "'\(text)' is not a server URL: a discovery server is https://HOST:PORT/?id=ID, a relay relay://HOST:PORT/?id=ID"
            )
        }
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        let afterAuthority = rest[authorityEnd...]
        let pathEnd = afterAuthority.firstIndex(of: "?") ?? afterAuthority.endIndex
        let path = String(afterAuthority[..<pathEnd])
        let query = afterAuthority[pathEnd...].dropFirst()
        let defaultPort = kind == .discovery ? 443 : 22067
        let address: PeerAddress
        if let parsed = PeerAddress(parsing: String(authority)) {
            address = parsed
        } else if !authority.isEmpty, !authority.includes(":"), authority.allSatisfy({ !$0.isWhitespace }) {
            address = PeerAddress(host: String(authority), port: defaultPort)
        } else if authority.hasPrefix("["), authority.hasSuffix("]") {
            address = PeerAddress(host: String(authority.dropFirst().dropLast()), port: defaultPort)
        } else {
            throw ShareFailure(.usage, "'\(text)' does not name a server as HOST:PORT")
        }
        var idText: String?
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.first == "id", parts.count == 2 { idText = String(parts[1]) }
        }
        guard let idText else {
            throw ShareFailure(
                .usage,
                "'\(text)' has no ?id=: give the server's device ID (\(kind == .discovery ? "stdiscosrv" : "strelaysrv") prints it when it starts), so its certificate is checked"
            )
        }
        do {
            id = try DeviceID(parsing: idText.percentDecoded ?? idText)
        } catch {
            throw ShareFailure(.usage, "'\(text)': the id is not a device ID (\(error))")
        }
        self.kind = kind
        host = address.host
        port = address.port
        self.path = kind == .discovery ? (path.isEmpty || path == "/" ? "/v2/" : path) : "/"
        self.text = trimmed
    }

    public static func == (lhs: ServerURL, rhs: ServerURL) -> Bool { lhs.canonical == rhs.canonical }
    public func hash(into hasher: inout Hasher) { hasher.combine(canonical) }
}
