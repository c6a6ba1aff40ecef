import FoundationEssentials
import ShareEngine
import ShareNet
import ShareDisk
import ShareLocalSend
import ShareTLS
import ShareTrust
import ShareProtocol
import CoreTransferable
import UniformTypeIdentifiers

/// The agent's LocalSend settings (`share agent --localsend`, or `"localsend": {…}` in agent.json).
package struct LocalSendSettings: Sendable, Codable, Equatable {
    /// The HTTPS port this device's LocalSend server listens on (agent.json's `localsend.port`, else LocalSend's):
    /// what its info object says in every message, as LocalSend's protocol asks.
    package static func configuredPort(_ paths: DevicePaths) -> Int {
        guard let localsend = AgentConfigObject.read(paths)?["localsend"] as? [String: Any],
            let port = localsend["port"] as? Int, (1...65535).contains(port)
        else { return LocalSend.defaultPort }
        return port
    }

    /// The HTTPS port LocalSend devices reach (LocalSend's own: 53317).
    package var port: Int?
    /// The address to listen on (default: the agent's).
    package var listen: String?
    /// The UDP port of LocalSend's multicast discovery (53317); 0 turns multicast off.
    package var multicastPort: Int?
    /// The IPv4 address whose interface multicast uses (default: all).
    package var interface: String?
    /// LocalSend devices to register with by address (`HOST:PORT`), for networks without multicast.
    package var peers: [String]?
    /// The PIN a LocalSend device must give to send here.
    package var pin: String?
    /// Seconds an upload waits for this device's user to accept it before the sender is told no.
    package var answerTimeout: Double?

    package init() {}

    /// `HOST:PORT` (IPv6 in brackets) as an address, or nil.
    package static func address(_ text: String) -> LocalSendAddress? {
        guard let address = PeerAddress(parsing: text) else { return nil }
        return LocalSendAddress(host: address.host, port: address.port, fingerprint: nil)
    }
}

/// This device's LocalSend certificate: an ECDSA P-256 key (what every LocalSend app speaks) made once and kept in
/// `STATE/localsend/identity.pem` (0600), so its fingerprint, which LocalSend devices remember, stays the same.
package enum LocalSendIdentity {
    package static func load(_ paths: DevicePaths) throws -> TLSIdentity {
        let folder = paths.state.appendingPathComponent("localsend", isDirectory: true)
        try DevicePaths.ensurePrivateDirectory(folder)
        let directory = try Directory.open(folder.path)
        if let bytes = try directory.readFile("identity.pem", limit: 64 << 10) {
            let text = String(decoding: bytes, as: UTF8.self)
            do {
                return try TLSIdentity(key: PrivateKey(pem: text), certificate: Certificate(pem: text))
            } catch {
                throw ShareFailure(
                    .configuration,
                    "\(folder.path)/identity.pem is damaged (\(error)); remove it to make a new LocalSend identity (LocalSend devices will see a new fingerprint)"
                )
            }
        }
        let key = try PrivateKey.generateP256()
        let certificate = try Certificate.selfSigned(key: key, commonName: "LocalSend User")
        let identity = try TLSIdentity(key: key, certificate: certificate)
        try directory.writeAtomically(
            "identity.pem", Array((try key.pemRepresentation() + certificate.pemRepresentation()).utf8), mode: 0o600)
        return identity
    }

    /// The fingerprint LocalSend devices know this one by.
    package static func fingerprint(_ identity: TLSIdentity) throws -> String {
        LocalSend.fingerprint(ofCertificateDER: try identity.certificate.derBytes())
    }
}

/// LocalSend devices this one trusts, by their certificate's fingerprint (`CONFIG/localsend-trust.json`, 0600),
/// kept apart from share's own trust store: a LocalSend device is never a share device, whatever its key.
package struct LocalSendTrust: Codable, Sendable {
    package struct Device: Codable, Sendable, Equatable {
        package var fingerprint: String
        package var name: String
        /// Whether its uploads wait for an answer (default: they do).
        package var ask: Bool?
        package var added: Date
        package var asks: Bool { ask ?? true }

        package init(fingerprint: String, name: String, ask: Bool?, added: Date) {
            self.fingerprint = fingerprint.uppercased()
            self.name = name
            self.ask = ask
            self.added = added
        }
    }

    package var version = 1
    package var devices: [Device] = []

    package static func file(_ paths: DevicePaths) -> URL {
        paths.config.appendingPathComponent("localsend-trust.json")
    }

    package static func load(_ paths: DevicePaths) -> LocalSendTrust {
        LockedJSONFile.read(file(paths), or: LocalSendTrust())
    }

    package func device(_ fingerprint: String) -> Device? {
        devices.first { $0.fingerprint == fingerprint.uppercased() }
    }

    @discardableResult
    package static func update<T>(_ paths: DevicePaths, _ change: (inout LocalSendTrust) throws -> T) throws -> T {
        try LockedJSONFile.update(file(paths), empty: LocalSendTrust()) { trust, _ in try change(&trust) }
    }
}

/// The LocalSend devices an agent has seen (`STATE/localsend/peers.json`), for `share peers` and `share send --to`.
package struct LocalSendSeen: Codable, Sendable, Equatable {
    package var alias: String
    package var fingerprint: String
    package var host: String
    package var port: Int
    package var deviceModel: String?
    package var deviceType: String?
    package var lastSeen: Date

    package var address: LocalSendAddress { LocalSendAddress(host: host, port: port, fingerprint: fingerprint) }

    package static func file(_ paths: DevicePaths) -> URL {
        paths.state.appendingPathComponent("localsend/peers.json")
    }

    package static func load(_ paths: DevicePaths) -> [LocalSendSeen] {
        guard let data = PosixFiles.read(file(paths).path),
            let seen = try? JSONDecoder.iso8601.decode([LocalSendSeen].self, from: data)
        else { return [] }
        return seen
    }

    package static func save(_ peers: [LocalSendPeer], paths: DevicePaths) {
        let list = peers.filter(\.proved).map {
            LocalSendSeen(
                alias: $0.info.alias, fingerprint: $0.info.fingerprint.uppercased(), host: $0.host,
                port: $0.info.port ?? LocalSend.defaultPort, deviceModel: $0.info.deviceModel,
                deviceType: $0.info.deviceType, lastSeen: $0.lastSeen)
        }
        guard let data = try? JSONEncoder.iso8601.encode(list) else { return }
        try? AtomicFile.write(data, to: file(paths), mode: 0o600, durable: false)
    }

    /// The device `reference` names: its alias (any case, if only one has it) or the start of its fingerprint.
    package static func find(_ reference: String, in seen: [LocalSendSeen]) -> LocalSendSeen? {
        if let exact = seen.first(where: { $0.alias == reference }) { return exact }
        let byAlias = seen.filter { $0.alias.lowercased() == reference.lowercased() }
        if byAlias.count == 1 { return byAlias[0] }
        guard reference.count >= 8 else { return nil }
        let byPrint = seen.filter { $0.fingerprint.hasPrefix(reference.uppercased()) }
        return byPrint.count == 1 ? byPrint[0] : nil
    }
}
