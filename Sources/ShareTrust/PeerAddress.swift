/// `HOST:PORT`, with IPv6 literals in brackets (`[::1]:5000`).
public struct PeerAddress: Hashable, Sendable, Codable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT`; nil when it is not one (so a device name can be tried instead).
    public init?(parsing text: String) {
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let host = String(text[text.index(after: text.startIndex)..<close])
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":"), let port = Int(rest.dropFirst()), (1...65535).contains(port), !host.isEmpty
            else { return nil }
            self.init(host: host, port: port)
            return
        }
        guard let colon = text.lastIndex(of: ":") else { return nil }
        let host = String(text[..<colon])
        guard !host.isEmpty, !host.contains(":" as Character), let port = Int(text[text.index(after: colon)...]),
            (1...65535).contains(port)
        else { return nil }
        self.init(host: host, port: port)
    }

    public var description: String { host.contains(":" as Character) ? "[\(host)]:\(port)" : "\(host):\(port)" }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let parsed = PeerAddress(parsing: text) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "'\(text)' is not HOST:PORT"))
        }
        self = parsed
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
