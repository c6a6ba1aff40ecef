/// A pairing side's commitment: SHA-256 over a fresh nonce, the side's own certificate and its role.
public struct PairCommit: Sendable, Codable, Equatable {
    public var commitment: String
    public init(commitment: String) { self.commitment = commitment }
}

/// A pairing side's nonce, revealed once the other side's commitment has arrived.
public struct PairReveal: Sendable, Codable, Equatable {
    public var nonce: String
    public init(nonce: String) { self.nonce = nonce }
}

/// Numeric comparison with commitments, as Bluetooth Secure Connections and ZRTP do it, for one side of one pairing
/// session (pure: no I/O). Each side commits to a fresh 256-bit nonce before it sees the other's, and reveals it only
/// after the other's commitment has arrived; each checks the other's reveal against its commitment. The code both
/// users compare is derived from both certificates, both nonces and the TLS exporter of this very connection.
///
/// A man in the middle runs one session with each side. In each, he must commit before the honest side reveals, so
/// the honest nonce is unknown to him when his own is fixed: whatever he computes, each side's code is uniform to
/// him, and the two codes match with probability 10^-digits per attempt (see docs/SECURITY.md).
public struct PairingMachine: Sendable {
    public enum Role: String, Sendable { case initiator, responder }

    public let role: Role
    private let ownCertificate: [UInt8]
    private let peerCertificate: [UInt8]
    private let nonce: [UInt8]
    private let exporter: [UInt8]
    private let digits: Int
    private var peerCommitment: [UInt8]?
    private var revealed = false
    public private(set) var code: String?

    static let commitLabel = Array("share-pair-commit-v2".utf8)
    static let codeLabel = Array("share-pair-code-v2".utf8)

    /// `nonce`: 32 fresh random bytes; `exporter`: the TLS exporter of the session; `digits`: of the code (8).
    public init(
        role: Role, ownCertificate: [UInt8], peerCertificate: [UInt8], nonce: [UInt8], exporter: [UInt8],
        digits: Int = 8
    ) {
        precondition(nonce.count == 32 && (1...18).contains(digits))
        self.role = role
        self.ownCertificate = ownCertificate
        self.peerCertificate = peerCertificate
        self.nonce = nonce
        self.exporter = exporter
        self.digits = digits
    }

    /// The commitment to send first.
    public func commitment(using hasher: ChunkHasher) -> PairCommit {
        PairCommit(commitment: Hex.string(Self.commit(role: role, certificate: ownCertificate, nonce: nonce, hasher)))
    }

    static func commit(role: Role, certificate: [UInt8], nonce: [UInt8], _ hasher: ChunkHasher) -> [UInt8] {
        let input = commitLabel + Array(role.rawValue.utf8) + [0] + certificate + nonce
        return hasher.digest(input)
    }

    /// The other side's commitment arrived: this side may now reveal its nonce.
    public mutating func received(_ commit: PairCommit) throws(ProtocolError) -> PairReveal {
        guard peerCommitment == nil else { throw ProtocolError(.badMessage, "the other device committed twice") }
        guard let bytes = Hex.bytes(commit.commitment), bytes.count == 32 else {
            throw ProtocolError(.badMessage, "the other device's commitment is not a SHA-256 digest")
        }
        peerCommitment = bytes
        revealed = true
        return PairReveal(nonce: Hex.string(nonce))
    }

    /// The other side's nonce arrived: it must follow its commitment and match it. Returns the code to compare.
    public mutating func received(_ reveal: PairReveal, using hasher: ChunkHasher) throws(ProtocolError) -> String {
        guard let peerCommitment, revealed else {
            throw ProtocolError(.badMessage, "the other device revealed its nonce before committing to it")
        }
        guard code == nil else { throw ProtocolError(.badMessage, "the other device revealed twice") }
        guard let peerNonce = Hex.bytes(reveal.nonce), peerNonce.count == 32 else {
            throw ProtocolError(.badMessage, "the other device's nonce is not 32 bytes")
        }
        let peerRole: Role = role == .initiator ? .responder : .initiator
        guard Self.commit(role: peerRole, certificate: peerCertificate, nonce: peerNonce, hasher) == peerCommitment
        else {
            throw ProtocolError(
                .badMessage, "the other device's nonce does not match its commitment: the pairing was tampered with")
        }
        let (first, second) = role == .initiator ? (nonce, peerNonce) : (peerNonce, nonce)
        let (firstCert, secondCert) =
            role == .initiator ? (ownCertificate, peerCertificate) : (peerCertificate, ownCertificate)
        let made = Self.code(
            initiatorCertificate: firstCert, responderCertificate: secondCert, initiatorNonce: first,
            responderNonce: second, exporter: exporter, digits: digits, hasher)
        code = made
        return made
    }

    /// The code: SHA-256 over both certificates, both nonces (initiator's first) and the exporter, its first eight
    /// bytes as a number modulo 10^digits, shown in groups of four.
    public static func code(
        initiatorCertificate: [UInt8], responderCertificate: [UInt8], initiatorNonce: [UInt8], responderNonce: [UInt8],
        exporter: [UInt8], digits: Int, _ hasher: ChunkHasher
    ) -> String {
        var input = codeLabel
        for part in [initiatorCertificate, responderCertificate, initiatorNonce, responderNonce, exporter] {
            let n = UInt32(part.count)
            input += [UInt8(n >> 24), UInt8((n >> 16) & 0xFF), UInt8((n >> 8) & 0xFF), UInt8(n & 0xFF)] + part
        }
        let digest = hasher.digest(input)
        var modulus: UInt64 = 1
        for _ in 0..<digits { modulus *= 10 }
        let value = digest.prefix(8).reduce(UInt64(0)) { ($0 << 8) | UInt64($1) } % modulus
        var text = String(value)
        while text.count < digits { text = "0" + text }
        guard digits > 4 else { return text }
        return String(text.prefix(digits - 4)) + " " + String(text.suffix(4))
    }
}
