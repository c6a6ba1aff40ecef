import FoundationEssentials
import Glibc

/// A reliable, ordered byte stream: what the protocol runs over (a TLS connection, a relay's pipe, an in-memory pair
/// in tests). The protocol declares it and never opens one itself.
public protocol ByteStream: AnyObject {
    /// Reads at least one byte into `buffer`, blocking until one arrives; 0 at the end of the stream.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int
    /// Writes all of `bytes`.
    func write(_ bytes: UnsafeRawBufferPointer) throws
    /// Whether a read would return at once (bytes waiting, or the end of the stream).
    var hasInput: Bool { get }
    /// Seconds a read may block before it fails (0: no limit).
    func setReadTimeout(_ seconds: Double)
}

/// The digest of chunks and of whole items. SHA-256 is what every version computes; BLAKE3 is what two ends use when
/// both say in their hellos that they have it (`Hello.digests`), and an item resumed from a partial keeps the digest
/// its partial was recorded with (`Resume.digest`). Both are 32 bytes.
public enum DigestAlgorithm: String, Sendable, Codable, CaseIterable {
    case sha256, blake3

    /// The digests a hello lists besides SHA-256 (every build of this version has BLAKE3). The test knob
    /// SHARE_TEST_DIGESTS=sha256 lists none, as an earlier version's hello does (for upgrade tests).
    public static let offered: [String] = {
        if let knob = getenv("SHARE_TEST_DIGESTS") {
            return String(cString: knob).split(separator: ",").map(String.init).filter { $0 != "sha256" }
        }
        return [DigestAlgorithm.blake3.rawValue]
    }()

    /// What two ends that sent these hellos' `digests` use: BLAKE3 when both list it, else SHA-256.
    public static func agreed(_ ours: [String]?, _ theirs: [String]?) -> DigestAlgorithm {
        let both = Set(ours ?? []).intersection(theirs ?? [])
        return both.contains(DigestAlgorithm.blake3.rawValue) ? .blake3 : .sha256
    }
}

/// A chunk digest, as the transport provides it (the protocol has no cryptography of its own). One per thread.
public protocol ChunkHasher: AnyObject {
    /// Which digest this computes.
    var algorithm: DigestAlgorithm { get }
    /// The digest of `bytes`.
    func digest(_ bytes: UnsafeRawBufferPointer) -> [UInt8]
    /// A hasher of the same kind for another thread.
    func another() -> ChunkHasher
    /// A hasher of `algorithm`, for an item that uses another digest than the session's.
    func make(_ algorithm: DigestAlgorithm) -> ChunkHasher
}

extension ChunkHasher {
    public func digest(_ bytes: [UInt8]) -> [UInt8] { bytes.withUnsafeBytes { digest($0) } }
}

/// Hexadecimal text of bytes and back.
public enum Hex {
    public static func string(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of `text`, or nil when it is not an even number of hex digits.
    public static func bytes(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(chars.count / 2)
        var index = 0
        while index < chars.count {
            guard let high = value(chars[index]), let low = value(chars[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func value(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

/// The whole-item digest: the item's digest (SHA-256 or BLAKE3) over its concatenated per-chunk digests, in index
/// order (a one-level hash list). Both ends compute it from chunk digests only, so neither re-reads what an earlier session moved.
public struct ItemDigest: Sendable {
    public private(set) var chunks: [[UInt8]?]

    public init(chunks count: Int) {
        chunks = [[UInt8]?](repeating: nil, count: count)
    }

    public mutating func record(_ index: Int, _ digest: [UInt8]) {
        if index >= chunks.count { chunks += [[UInt8]?](repeating: nil, count: index + 1 - chunks.count) }
        chunks[index] = digest
    }

    /// Indices of chunks without a digest.
    public var missing: [Int] { chunks.indices.filter { chunks[$0] == nil } }

    /// The root, in hex; nil while a chunk is missing.
    public func root(using hasher: ChunkHasher) -> String? {
        var concatenated: [UInt8] = []
        concatenated.reserveCapacity(chunks.count * 32)
        for digest in chunks {
            guard let digest else { return nil }
            concatenated += digest
        }
        return Hex.string(hasher.digest(concatenated))
    }
}
