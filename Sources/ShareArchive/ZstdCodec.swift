import CShareZstd
import FoundationEssentials

/// zstd for single chunks in transit, through libzstd: one frame per chunk, compressed in one call with the chunk's
/// size known, so the window and match tables fit the chunk whatever the level (a harder level costs time, not
/// memory), and every chunk stays independently verifiable (a resumed transfer never needs an earlier chunk to decode
/// a later one). Frames written by earlier versions (through libarchive's zstd filter) decode the same.
///
/// A context is reused from call to call; it is used by one thread at a time.
public final class ZstdCodec {
    private let compression: OpaquePointer?
    private let decompression: OpaquePointer?

    public init() {
        compression = ZSTD_createCCtx()
        decompression = ZSTD_createDCtx()
    }

    deinit {
        ZSTD_freeCCtx(compression)
        ZSTD_freeDCtx(decompression)
    }

    /// Compresses `bytes` at `level`; nil when the result would not be at least `worthIt` smaller (as a fraction of
    /// the input), so incompressible chunks go as they are. An input of `sampledFrom` bytes or more is first judged
    /// by samples of it (four spread over it): when they do not save half of `worthIt`, the whole is not tried (media
    /// and random bytes cost a look, not a compression).
    public func compress(_ bytes: UnsafeRawBufferPointer, level: Int = 1, worthIt: Double = 0.05) -> [UInt8]? {
        guard let compression, let source = bytes.baseAddress, !bytes.isEmpty else { return nil }
        if bytes.count >= Self.sampledFrom, !samplesCompress(bytes, level: level, worthIt: worthIt / 2) { return nil }
        let limit = Int(Double(bytes.count) * (1 - worthIt))
        let bound = ZSTD_compressBound(bytes.count)
        var kept = false
        let output = [UInt8](unsafeUninitializedCapacity: bound) { buffer, count in
            let used = ZSTD_compressCCtx(compression, buffer.baseAddress, bound, source, bytes.count, Int32(level))
            kept = ZSTD_isError(used) == 0 && used > 0 && used <= limit
            count = kept ? used : 0
        }
        return kept ? output : nil
    }

    /// Inputs at least this long are judged by samples before they are compressed whole.
    public static let sampledFrom = 64 << 10
    private static let sampleBytes = 4 << 10

    /// Whether four samples of `bytes` (at its start, its end and between) compress by `worthIt` or more together.
    private func samplesCompress(_ bytes: UnsafeRawBufferPointer, level: Int, worthIt: Double) -> Bool {
        let part = Self.sampleBytes
        let samples = [UInt8](unsafeUninitializedCapacity: 4 * part) { buffer, count in
            let into = UnsafeMutableRawBufferPointer(buffer)
            for n in 0..<4 {
                let start = (bytes.count - part) * n / 3
                UnsafeMutableRawBufferPointer(rebasing: into[(n * part)..<((n + 1) * part)])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[start..<(start + part)]))
            }
            count = 4 * part
        }
        let bound = ZSTD_compressBound(samples.count)
        let output = UnsafeMutableRawBufferPointer.allocate(byteCount: bound, alignment: 1)
        defer { output.deallocate() }
        let used = samples.withUnsafeBytes { sample in
            ZSTD_compressCCtx(compression, output.baseAddress, bound, sample.baseAddress, sample.count, Int32(level))
        }
        return ZSTD_isError(used) == 0 && Double(used) <= Double(samples.count) * (1 - worthIt)
    }

    /// Decompresses one chunk into `output`, which must end up holding exactly `expected` bytes; anything else
    /// (a bad frame, more or fewer bytes) is an error.
    public func decompress(_ bytes: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer, expected: Int)
        throws
    {
        guard let decompression else { throw ArchiveError(.io, "zstd could not allocate a decoder") }
        guard let source = bytes.baseAddress, !bytes.isEmpty else {
            throw ArchiveError(.corrupt, "a compressed chunk is empty")
        }
        guard expected <= output.count else {
            throw ArchiveError(.corrupt, "a compressed chunk is longer than this receiver decodes")
        }
        // One byte of room past the expected end, to notice a frame that decodes to more.
        let room = min(output.count, expected + 1)
        let produced = ZSTD_decompressDCtx(decompression, output.baseAddress, room, source, bytes.count)
        if ZSTD_isError(produced) != 0 {
            let reason = String(cString: ZSTD_getErrorName(produced))
            throw ArchiveError(.corrupt, "a compressed chunk is not a whole zstd frame (\(reason))")
        }
        guard produced == expected else {
            throw ArchiveError(.corrupt, "a compressed chunk decodes to \(produced) bytes, not \(expected)")
        }
    }

    /// One call with a context of its own.
    public static func compress(_ bytes: UnsafeRawBufferPointer, level: Int = 1, worthIt: Double = 0.05) -> [UInt8]? {
        ZstdCodec().compress(bytes, level: level, worthIt: worthIt)
    }

    /// One call with a context of its own.
    public static func decompress(
        _ bytes: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer, expected: Int
    ) throws {
        try ZstdCodec().decompress(bytes, into: output, expected: expected)
    }
}
