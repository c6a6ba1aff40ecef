/// magic-wormhole's key schedule: every key is HKDF-SHA-256 of the SPAKE2 key with a purpose string, and every
/// message in the mailbox is a secret box (XSalsa20-Poly1305) under a key for the sending side and the phase.
public enum WormholeKeys {
    /// `derive_key(key, purpose, count)` of the reference implementation.
    public static func derive(_ key: [UInt8], purpose: [UInt8], count: Int = 32) -> [UInt8] {
        HKDF.sha256(secret: key, info: purpose, count: count)
    }

    /// The key of the message `side` sends in `phase` ("version", "0", "1", …).
    public static func phase(_ key: [UInt8], side: String, phase: String) -> [UInt8] {
        derive(
            key,
            purpose: Array("wormhole:phase:".utf8) + Sodium.sha256(Array(side.utf8)) + Sodium.sha256(Array(phase.utf8)))
    }

    /// A random nonce, then the box.
    public static func encrypt(_ plaintext: [UInt8], key: [UInt8]) -> [UInt8] {
        Sodium.seal(plaintext, key: key, nonce: Sodium.randomBytes(Sodium.nonceBytes))
    }

    public static func decrypt(_ sealed: [UInt8], key: [UInt8]) throws(WormholeError) -> [UInt8] {
        guard let plaintext = Sodium.open(sealed, key: key) else {
            throw WormholeError(
                .wrongCode, "a message from the other side did not decrypt: the codes typed on the two sides differ")
        }
        return plaintext
    }
}
