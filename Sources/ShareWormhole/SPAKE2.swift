/// Symmetric SPAKE2 on the Ed25519 group, computed exactly as python-spake2 (0.8, the `wormhole` command's) does,
/// so a share end and any magic-wormhole client derive the same key from the same code. Each side sends
/// `"S" ‖ (x·B + pw·S)`; the key is `SHA-256(SHA-256(pw) ‖ SHA-256(id) ‖ the two messages in byte order ‖
/// K)` with `K = x·(Y − pw·S)`. A man in the middle learns nothing from a run and gets one guess of the password per
/// run: a wrong guess only shows as messages that do not decrypt.
public struct SPAKE2Symmetric: Sendable {
    /// python-spake2's `arbitrary_element(b"symmetric")` (a point of unknown discrete logarithm).
    static let blinding: [UInt8] = Hex.bytes("6f00dae87c1be1a73b5922ef431cd8f57879569c222d22b1cd71e8546ab8e6f1")
    static let side = UInt8(ascii: "S")

    private let password: [UInt8]
    private let identity: [UInt8]
    private let secret: [UInt8]
    private let blindedPassword: [UInt8]
    /// Our element (without the side byte).
    private let element: [UInt8]

    /// The message to send: the side byte and our element.
    public var message: [UInt8] { [Self.side] + element }

    /// `identity` is the application's id (magic-wormhole's appid). `entropy` (64 bytes, read as a big-endian number
    /// mod L, as python-spake2 does) is for test vectors only; by default the scalar is random.
    public init(password: [UInt8], identity: [UInt8], entropy: [UInt8]? = nil) {
        precondition(Sodium.ready, "libsodium did not initialize")
        self.password = password
        self.identity = identity
        let oversized = entropy ?? Sodium.randomBytes(64)
        precondition(oversized.count == 64)
        secret = Sodium.reduce(littleEndian: oversized.reversed())
        let scalar = Self.passwordScalar(password)
        // pw·S and x·B are never the identity: S has prime order and pw, x are reduced mod L; a zero scalar (one
        // chance in 2^252) is the only way, and then the product is the identity point, encoded as itself.
        blindedPassword = Sodium.multiply(scalar, Self.blinding) ?? Self.identityPoint
        let xB = Sodium.multiplyBase(secret) ?? Self.identityPoint
        element = Sodium.add(xB, blindedPassword)!
    }

    /// The shared key from the other side's message.
    public func finish(_ inbound: [UInt8]) throws(WormholeError) -> [UInt8] {
        guard inbound.count == 1 + Sodium.pointBytes else {
            throw WormholeError(.badPAKE, "the other side's key exchange message has \(inbound.count) bytes, not 33")
        }
        guard inbound[0] == Self.side else {
            throw WormholeError(.badPAKE, "the other side's key exchange message is not a symmetric one")
        }
        let theirs = Array(inbound[1...])
        guard Sodium.isValidPoint(theirs) else {
            throw WormholeError(.badPAKE, "the other side's key exchange message is not a point of the group")
        }
        guard theirs != element else {
            throw WormholeError(.badPAKE, "the other side sent our own key exchange message back")
        }
        guard let unblinded = Sodium.subtract(theirs, blindedPassword),
            let shared = Sodium.multiply(secret, unblinded)
        else {
            throw WormholeError(.badPAKE, "the other side's key exchange message leads to a degenerate key")
        }
        let (first, second) = theirs.lexicographicallyPrecedes(element) ? (theirs, element) : (element, theirs)
        return Sodium.sha256(
            Sodium.sha256(password) + Sodium.sha256(identity) + first + second + shared)
    }

    /// python-spake2's `password_to_scalar`: HKDF-SHA-256 (empty salt, info "SPAKE2 pw") to 48 bytes, read as a
    /// big-endian number, mod L.
    static func passwordScalar(_ password: [UInt8]) -> [UInt8] {
        let oversized = HKDF.sha256(secret: password, info: Array("SPAKE2 pw".utf8), count: 48)
        return Sodium.reduce(littleEndian: oversized.reversed())
    }

    static let identityPoint: [UInt8] = [1] + [UInt8](repeating: 0, count: 31)
}

/// HKDF with SHA-256 (RFC 5869); an empty or absent salt is HashLen zero bytes.
public enum HKDF {
    public static func sha256(secret: [UInt8], salt: [UInt8] = [], info: [UInt8], count: Int) -> [UInt8] {
        precondition(count <= 255 * 32)
        let key = Sodium.hmacSHA256(key: salt.isEmpty ? [UInt8](repeating: 0, count: 32) : salt, secret)
        var output: [UInt8] = []
        var block: [UInt8] = []
        var counter: UInt8 = 1
        while output.count < count {
            block = Sodium.hmacSHA256(key: key, block + info + [counter])
            output += block
            counter &+= 1
        }
        return Array(output.prefix(count))
    }
}

enum Hex {
    static func bytes(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var high: UInt8?
        for c in text.utf8 {
            let v: UInt8 =
                switch c {
                case 0x30...0x39: c - 0x30
                case 0x61...0x66: c - 0x61 + 10
                default: preconditionFailure("not hex")
                }
            if let h = high {
                bytes.append(h << 4 | v)
                high = nil
            } else {
                high = v
            }
        }
        return bytes
    }

    static func string(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
