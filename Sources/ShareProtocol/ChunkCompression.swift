/// A chunk codec, as the transport provides it (zstd through libzstd): the protocol decides when to use it.
public protocol ChunkCodec: AnyObject {
    /// The compressed form of `bytes` at `level`, or nil when it does not shrink by at least `minSaving` (0–1).
    func compress(_ bytes: UnsafeRawBufferPointer, level: Int32, minSaving: Double) -> [UInt8]?
    /// Decompresses `compressed` into `output`, which must come out exactly `expected` bytes long.
    func decompress(_ compressed: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer, expected: Int)
        throws
}

/// Decides, chunk by chunk, whether compressing is worth it: a 64 KiB sample of every 16th chunk is compressed
/// (cheap), and only while samples shrink by at least a fifth are whole chunks compressed; a chunk that does not
/// shrink by 5 % goes as it is. Random or already-compressed content (video, archives) thus costs well under 1 %
/// extra CPU, and text, logs and source trees travel smaller.
public final class AdaptiveCompressor {
    public let codec: ChunkCodec
    public let level: Int32
    private var count = 0
    private var worthIt = false
    public static let sampleSize = 64 << 10

    public init(codec: ChunkCodec, level: Int32 = 1) {
        self.codec = codec
        self.level = level
    }

    /// The chunk's compressed form when it pays, else nil (send it as it is).
    public func compress(_ bytes: UnsafeRawBufferPointer) -> [UInt8]? {
        defer { count += 1 }
        guard bytes.count >= 4096 else { return nil }
        if count % 16 == 0 {
            let sample = UnsafeRawBufferPointer(rebasing: bytes[0..<min(bytes.count, Self.sampleSize)])
            worthIt = codec.compress(sample, level: level, minSaving: 0.2) != nil
        }
        guard worthIt else { return nil }
        let packed = codec.compress(bytes, level: level, minSaving: 0.05)
        if packed == nil { worthIt = false }
        return packed
    }
}
