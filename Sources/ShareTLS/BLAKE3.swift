internal import CShareBlake3
import FoundationEssentials

/// A streaming BLAKE3 with 32-byte output (the reference C implementation, which picks SSE4.1, AVX2 or AVX-512 at
/// run time). One owner.
public final class BLAKE3Hasher {
    private var state = blake3_hasher()

    public init() { blake3_hasher_init(&state) }

    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        blake3_hasher_update(&state, base, bytes.count)
    }

    /// The digest of everything since the last reset; the hasher is reset afterwards.
    public func finalize() -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        digest.withUnsafeMutableBytes {
            blake3_hasher_finalize(&state, $0.baseAddress!.assumingMemoryBound(to: UInt8.self), 32)
        }
        blake3_hasher_reset(&state)
        return digest
    }

    /// The BLAKE3 of `bytes`.
    public static func hash(_ bytes: some ContiguousBytes) -> [UInt8] {
        let hasher = BLAKE3Hasher()
        bytes.withUnsafeBytes { hasher.update($0) }
        return hasher.finalize()
    }
}
