import Synchronization
import FoundationEssentials
import ShareThreads

/// A chunk codec, as the transport provides it (zstd through libzstd): the protocol decides when to use it.
public protocol ChunkCodec: AnyObject {
    /// The compressed form of `bytes` at `level`, or nil when it does not shrink by at least `minSaving` (0–1).
    func compress(_ bytes: UnsafeRawBufferPointer, level: Int32, minSaving: Double) -> [UInt8]?
    /// Decompresses `compressed` into `output`, which must come out exactly `expected` bytes long.
    func decompress(_ compressed: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer, expected: Int)
        throws
}

/// How fast the link takes bytes: wire bytes divided by the time the sending thread spent writing them, over the
/// last second or so of writing. While the link is the bottleneck, writes block and this is the link's rate; when
/// something before it is slower (compression), writes return at once and the rate reads high, which makes the
/// compressor back off — the two settle where the send is fastest.
public final class LinkMeter: Sendable {
    private struct Window {
        var writes: [(bytes: Int, seconds: Double)] = []
        var bytes = 0
        var seconds = 0.0
    }
    private let window = Mutex(Window())

    public init() {}

    /// `bytes` went out in `seconds` of writing.
    public func record(bytes count: Int, seconds elapsed: Double) {
        window.withLock { window in
            window.writes.append((count, elapsed))
            window.bytes += count
            window.seconds += elapsed
            // About a second of writing, and at least 4 MiB, is enough to tell.
            while window.writes.count > 1, window.seconds - window.writes[0].seconds > 1,
                window.bytes - window.writes[0].bytes > 4 << 20
            {
                window.bytes -= window.writes[0].bytes
                window.seconds -= window.writes[0].seconds
                window.writes.removeFirst()
            }
        }
    }

    /// Bytes per second, once 1 MiB has been measured.
    public var rate: Double? {
        window.withLock { $0.bytes >= 1 << 20 && $0.seconds > 0 ? Double($0.bytes) / $0.seconds : nil }
    }
}

/// Decides, chunk by chunk, whether and how hard to compress: compression pays when it can produce bytes faster than
/// the link takes them, and the level to use is the one that gets the most data across per second given how fast the
/// link is (`LinkMeter`) and how fast and how well each level compresses this content (measured on 64 KiB samples of
/// every 16th chunk, the other levels measured in turn on every third sample). On loopback and fast wired links with content that
/// does not shrink much, nothing is compressed; on a slow WAN, text is compressed hard. Random or already-compressed
/// content (video, archives) costs well under 1 % extra CPU: its samples never shrink. `ratio` says what it achieved.
public final class AdaptiveCompressor {
    public let codec: ChunkCodec
    private let meter: LinkMeter?
    /// The levels it chooses among (zstd): from fast to thorough.
    public static let levels: [Int32] = [1, 3, 6, 9, 13, 17]
    public static let sampleSize = 64 << 10
    /// Per level: bytes per second it compresses, and the size it leaves (0–1), as averaged over the samples.
    private var speed: [Int32: Double] = [:]
    private var shrink: [Int32: Double] = [:]
    /// The level in use; nil: not compressing.
    public private(set) var level: Int32?
    private var count = 0
    private var samples = 0
    /// Bytes given and bytes produced (compressed or not), for `ratio`.
    private var input: UInt64 = 0
    private var output: UInt64 = 0

    /// `meter`: the link's rate; without one, level 1 is used whenever the content shrinks by a fifth.
    public init(codec: ChunkCodec, meter: LinkMeter? = nil) {
        self.codec = codec
        self.meter = meter
    }

    /// What the chunks became on the wire, as a fraction of their size (1: nothing saved).
    public var ratio: Double { input == 0 ? 1 : Double(output) / Double(input) }

    /// The chunk's compressed form when it pays, else nil (send it as it is).
    public func compress(_ bytes: UnsafeRawBufferPointer) -> [UInt8]? {
        defer { count += 1 }
        input += UInt64(bytes.count)
        guard bytes.count >= 4096 else {
            output += UInt64(bytes.count)
            return nil
        }
        if count % 16 == 0 { sample(bytes) }
        guard let level, let packed = codec.compress(bytes, level: level, minSaving: 0.05) else {
            output += UInt64(bytes.count)
            return nil
        }
        output += UInt64(packed.count)
        return packed
    }

    /// Measures a level on a sample of the chunk and chooses the level for the chunks that follow.
    private func sample(_ bytes: UnsafeRawBufferPointer) {
        samples += 1
        let sample = UnsafeRawBufferPointer(rebasing: bytes[0..<min(bytes.count, Self.sampleSize)])
        var probe = level ?? Self.levels[0]
        // Every third sample measures another level, in turn, so the choice follows the content and the link.
        if samples % 3 == 0 {
            probe = Self.levels[(samples / 3) % Self.levels.count]
        }
        let start = ContinuousClock.now
        let packed = codec.compress(sample, level: probe, minSaving: 0)
        let elapsed = max((ContinuousClock.now - start).seconds, 1e-6)
        let measuredShrink = packed.map { Double($0.count) / Double(sample.count) } ?? 1
        let measuredSpeed = Double(sample.count) / elapsed
        speed[probe] = speed[probe].map { $0 * 0.7 + measuredSpeed * 0.3 } ?? measuredSpeed
        shrink[probe] = shrink[probe].map { $0 * 0.7 + measuredShrink * 0.3 } ?? measuredShrink
        level = choose()
    }

    /// What was measured of each level: (level, bytes per second, size left).
    var measured: [(Int32, Double, Double)] {
        Self.levels.compactMap { level in speed[level].map { (level, $0, shrink[level] ?? 1) } }
    }

    /// The level that moves the most data per second, or nil when sending as it is moves more.
    private func choose() -> Int32? {
        guard let link = meter?.rate else {
            // Nothing measured of the link yet: compress lightly when it shrinks by a fifth.
            return (shrink[1] ?? 1) < 0.8 ? 1 : nil
        }
        var best: (level: Int32?, rate: Double) = (nil, link)
        for level in Self.levels {
            guard let speed = speed[level], let shrink = shrink[level], shrink < 0.95 else { continue }
            // Compression runs beside the sending: the slower of the two sets the pace, in original bytes.
            let rate = min(speed, link / shrink)
            if rate > best.rate * 1.02 { best = (level, rate) }
        }
        return best.level
    }
}

extension Duration {
    /// The duration in seconds.
    public var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
