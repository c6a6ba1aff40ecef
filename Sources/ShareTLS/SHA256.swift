internal import CShareOpenSSL
import FoundationEssentials

/// A streaming SHA-256 (OpenSSL's EVP, which uses the CPU's SHA extensions). One owner of one `EVP_MD_CTX`.
public final class SHA256Hasher {
    private let context: OpaquePointer

    public init() {
        guard let context = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new failed: out of memory") }
        self.context = context
        reset()
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Starts a new digest.
    public func reset() {
        // Initialising SHA-256 on a fresh context cannot fail short of memory exhaustion.
        precondition(EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1, "EVP_DigestInit_ex(sha256) failed")
    }

    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        precondition(EVP_DigestUpdate(context, base, bytes.count) == 1, "EVP_DigestUpdate failed")
    }

    public func update(_ bytes: some ContiguousBytes) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The digest of everything since the last reset; the hasher is reset afterwards.
    public func finalize() -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        precondition(EVP_DigestFinal_ex(context, &digest, &length) == 1 && length == 32, "EVP_DigestFinal_ex failed")
        reset()
        return digest
    }

    /// The SHA-256 of `bytes`.
    public static func hash(_ bytes: some ContiguousBytes) -> [UInt8] {
        let hasher = SHA256Hasher()
        hasher.update(bytes)
        return hasher.finalize()
    }
}

extension Array where Element == UInt8 {
    /// Lower-case hexadecimal.
    public var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether `hex` is these bytes in lower-case hexadecimal (`hexString == hex`, without making the string).
    public func isHex(_ hex: String) -> Bool {
        let digits = Array("0123456789abcdef".utf8)
        var utf8 = hex.utf8.makeIterator()
        for byte in self {
            guard utf8.next() == digits[Int(byte >> 4)], utf8.next() == digits[Int(byte & 15)] else { return false }
        }
        return utf8.next() == nil
    }
}

/// Cryptographically strong random bytes, from OpenSSL's generator.
public enum SecureRandom {
    public static func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        // RAND_bytes fails only when the generator cannot be seeded, which a running system always can.
        precondition(RAND_bytes(&out, Int32(count)) == 1, "RAND_bytes failed")
        return out
    }
}

/// SHA-1, for protocols that still name it where no secret depends on it (the WebSocket handshake's accept value).
public enum SHA1 {
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 20)
        var length: UInt32 = 0
        precondition(
            EVP_Digest(bytes, bytes.count, &digest, &length, EVP_sha1(), nil) == 1 && length == 20, "SHA-1 failed")
        return digest
    }
}
