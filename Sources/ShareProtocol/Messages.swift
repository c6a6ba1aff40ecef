import CoreTransferable
import FoundationEssentials

/// The role a device plays in a session.
public enum PeerRole: String, Sendable, Codable, Equatable {
    case agent, cli, watch, pair
}

/// The first message each way: who we are, what we speak, what we accept.
public struct Hello: Sendable, Codable, Equatable {
    public static let expectedMagic = "share"

    public var magic: String
    /// The newest protocol version the device speaks.
    public var version: Int
    /// The oldest it still speaks (absent: only `version`).
    public var minVersion: Int?
    public var name: String
    public var role: PeerRole
    /// What this device accepts when it receives (absent when it only sends).
    public var accept: AcceptList?
    /// Where this device's agent listens, when it has one (learned by peers during pairing).
    public var listenPort: Int?
    /// Chunk encodings this device decodes besides plain bytes (`zstd`); absent means none.
    public var compression: [String]?
    /// Set by a sender whose items are for another device that the receiving agent forwards them to (a watch
    /// attached to it, or, from a watch, one of the owner's devices): that device's name. (Called `relayTo` by
    /// earlier versions, which is still read.)
    public var forwardTo: String?
    /// Chunk digests this device computes besides SHA-256 (`blake3`); absent means none. Two ends that both list
    /// BLAKE3 use it (`DigestAlgorithm.agreed`).
    public var digests: [String]?
    /// What else this device speaks (`delta-2`: delta transfer); absent means nothing
    /// more.
    public var features: [String]?

    public init(
        name: String, role: PeerRole, accept: AcceptList? = nil, listenPort: Int? = nil, compression: [String]? = nil,
        forwardTo: String? = nil, digests: [String]? = DigestAlgorithm.offered, features: [String]? = nil
    ) {
        self.magic = Self.expectedMagic
        self.version = Limits.protocolVersion
        self.minVersion = Limits.oldestProtocolVersion
        self.name = name
        self.role = role
        self.accept = accept
        self.listenPort = listenPort
        self.compression = compression
        self.forwardTo = forwardTo
        self.digests = digests
        self.features = features
    }

    /// Whether the peer said it speaks delta transfer.
    public var speaksDelta: Bool { features?.contains(Delta.feature) == true }
    /// Whether this device reads pulls in their binary form (`FolderPull.frame(_:binary:)`).
    public var readsBinaryPulls: Bool { features?.contains(FolderPull.binaryFeature) == true }

    private enum CodingKeys: String, CodingKey {
        case magic, version, minVersion, name, role, accept, listenPort, compression, forwardTo, relayTo, digests
        case features
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        magic = try container.decode(String.self, forKey: .magic)
        version = try container.decode(Int.self, forKey: .version)
        minVersion = try container.decodeIfPresent(Int.self, forKey: .minVersion)
        name = try container.decode(String.self, forKey: .name)
        role = try container.decode(PeerRole.self, forKey: .role)
        accept = try container.decodeIfPresent(AcceptList.self, forKey: .accept)
        listenPort = try container.decodeIfPresent(Int.self, forKey: .listenPort)
        compression = try container.decodeIfPresent([String].self, forKey: .compression)
        forwardTo =
            try container.decodeIfPresent(String.self, forKey: .forwardTo)
            ?? container.decodeIfPresent(String.self, forKey: .relayTo)
        digests = try container.decodeIfPresent([String].self, forKey: .digests)
        features = try container.decodeIfPresent([String].self, forKey: .features)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(magic, forKey: .magic)
        try container.encode(version, forKey: .version)
        try container.encodeIfPresent(minVersion, forKey: .minVersion)
        try container.encode(name, forKey: .name)
        try container.encode(role, forKey: .role)
        try container.encodeIfPresent(accept, forKey: .accept)
        try container.encodeIfPresent(listenPort, forKey: .listenPort)
        try container.encodeIfPresent(compression, forKey: .compression)
        try container.encodeIfPresent(forwardTo, forKey: .forwardTo)
        try container.encodeIfPresent(digests, forKey: .digests)
        try container.encodeIfPresent(features, forKey: .features)
    }

    /// The version both ends speak: the newer of the two that both support.
    public var agreedVersion: Int { min(version, Limits.protocolVersion) }

    /// Checks a peer's hello: magic, version, field limits.
    public func validate() throws(ProtocolError) {
        guard magic == Self.expectedMagic else { throw ProtocolError(.notShare, "the peer is not a share device") }
        let oldest = min(minVersion ?? version, version)
        guard oldest <= Limits.protocolVersion, version >= Limits.oldestProtocolVersion else {
            let peerRange = oldest == version ? "\(version)" : "\(oldest)–\(version)"
            let ourRange =
                Limits.oldestProtocolVersion == Limits.protocolVersion
                ? "\(Limits.protocolVersion)" : "\(Limits.oldestProtocolVersion)–\(Limits.protocolVersion)"
            let newer = oldest > Limits.protocolVersion
            throw ProtocolError(
                .version,
                "the peer speaks share protocol \(peerRange), this device speaks \(ourRange); "
                    + "update share on \(newer ? "this" : "the other") device")
        }
        guard !name.isEmpty, name.utf8.count <= Limits.maxDeviceName,
            !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else { throw ProtocolError(.badMessage, "the peer's device name is empty, too long or has control characters") }
        if let accept {
            guard accept.entries.count <= Limits.maxAcceptEntries, accept.declarations.count <= Limits.maxDeclarations
            else { throw ProtocolError(.badMessage, "the peer's accept list is too long") }
        }
        if let listenPort, !(1...65535).contains(listenPort) {
            throw ProtocolError(.badMessage, "the peer's listen port \(listenPort) is out of range")
        }
        if let forwardTo,
            forwardTo.isEmpty || forwardTo.utf8.count > Limits.maxDeviceName
                || forwardTo.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        {
            throw ProtocolError(
                .badMessage, "the device to forward to is named with an empty, too long or control name")
        }
        if let compression, compression.count > 16 || compression.contains(where: { $0.utf8.count > 32 }) {
            throw ProtocolError(.badMessage, "the peer's compression list is too long")
        }
        if let digests, digests.count > 16 || digests.contains(where: { $0.utf8.count > 32 }) {
            throw ProtocolError(.badMessage, "the peer's digest list is too long")
        }
        if let features, features.count > 32 || features.contains(where: { $0.utf8.count > 32 }) {
            throw ProtocolError(.badMessage, "the peer's feature list is too long")
        }
    }
}

/// A round-trip probe.
public struct Ping: Sendable, Codable, Equatable {
    public var nonce: UInt64
    public init(nonce: UInt64) { self.nonce = nonce }
}

/// One side's answer to a pairing request.
public struct PairDecision: Sendable, Codable, Equatable {
    public var accept: Bool
    public init(accept: Bool) { self.accept = accept }
}

/// A polite end of session.
public struct Bye: Sendable, Codable, Equatable {
    public init() {}
}

/// JSON encoding of control messages; decoding checks the frame type first.
public enum MessageCoding {
    public static func frame(_ type: FrameType, _ message: some Encodable) -> Frame {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Encoding our own value types cannot fail.
        let data = try! encoder.encode(message)
        return Frame(type: type, payload: Array(data))
    }

    public static func decode<T: Decodable>(_ type: T.Type, from frame: Frame) throws(ProtocolError) -> T {
        do {
            return try JSONDecoder().decode(T.self, from: Data(frame.payload))
        } catch {
            throw ProtocolError(.badMessage, "the peer sent a \(frame.type) message that does not decode")
        }
    }

    /// The error a peer reported in an `Error` frame.
    public static func peerError(from frame: Frame) -> ProtocolError {
        (try? decode(ProtocolError.self, from: frame))
            ?? ProtocolError(.badMessage, "the peer reported an error that does not decode")
    }
}

/// A request for the peer agent's clipboard item.
public struct ClipboardRequest: Sendable, Codable, Equatable {
    /// Only describe the item (when it was copied, its types and sizes); produce nothing.
    public var peek: Bool

    public init(peek: Bool = false) {
        self.peek = peek
    }
}

/// What a peer has on its clipboard: when it was copied and what it can become. No bytes.
public struct ClipboardInfo: Sendable, Codable, Equatable {
    public var copied: Double?
    public var expires: Double?
    public var labels: [String]
    public var types: [[String]]

    public init(copied: Double?, expires: Double?, labels: [String], types: [[String]]) {
        self.copied = copied
        self.expires = expires
        self.labels = labels
        self.types = types
    }
}
