import Foundation
import Testing

@testable import ShareProtocol

/// The compressor chooses by what the link takes and what each level does to this content.
@Suite struct CompressionTests {
    /// Log-like text: compresses well, at every level.
    static let text: [UInt8] = {
        var lines = ""
        var state: UInt64 = 42
        while lines.utf8.count < 1 << 20 {
            state = state &* 6_364_136_223_846_793_005 &+ 1
            lines +=
                "2026-11-24T07:\(state % 60):\(state % 59) info share.agent: received peer=laptop-\(state % 17) bytes=\(state % 100_000)\n"
        }
        return Array(lines.utf8.prefix(1 << 20))
    }()

    /// Prose-like text from a vocabulary of 3,000 made-up words: harder levels find more to save in it.
    static let prose: [UInt8] = {
        var state: UInt64 = 7
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 33
        }
        let letters = Array("etaoinshrdlucmfwypvbgkjqxz")
        let words = (0..<3000).map { _ in String((0..<(2 + Int(next() % 9))).map { _ in letters[Int(next() % 26)] }) }
        var text = ""
        while text.utf8.count < 64 << 10 {
            // Common words far more often than rare ones.
            let rank = Int(next() % 3000)
            text += words[rank * rank / 3000] + (next() % 12 == 0 ? ".\n" : " ")
        }
        return Array(text.utf8.prefix(64 << 10))
    }()

    func meter(bytesPerSecond rate: Double) -> LinkMeter {
        let meter = LinkMeter()
        for _ in 0..<8 { meter.record(bytes: 1 << 20, seconds: Double(1 << 20) / rate) }
        return meter
    }

    /// Runs `chunks` chunks through a compressor; returns it.
    func run(_ compressor: AdaptiveCompressor, _ bytes: [UInt8], chunks: Int = 96) -> AdaptiveCompressor {
        for _ in 0..<chunks { _ = bytes.withUnsafeBytes { compressor.compress($0) } }
        return compressor
    }

    @Test func aFastLinkGetsTheBytesAsTheyAre() {
        let compressor = run(AdaptiveCompressor(codec: TestZstd(), meter: meter(bytesPerSecond: 50e9)), Self.text)
        #expect(compressor.level == nil)
        #expect(compressor.ratio > 0.99)
    }

    @Test func aSlowLinkGetsTextCompressedHarderThanTheFastestLevel() {
        // Chunks of 64 KiB: every level gets measured in a few hundred of them.
        let compressor = run(
            AdaptiveCompressor(codec: TestZstd(), meter: meter(bytesPerSecond: 2e6)), Self.prose, chunks: 400)
        #expect((compressor.level ?? 0) > 1, "level \(String(describing: compressor.level)): \(compressor.measured)")
        #expect(compressor.ratio < 0.6, "ratio \(compressor.ratio)")
    }

    @Test func randomBytesAreNeverCompressed() {
        let random = randomBytes(1 << 20)
        let compressor = run(AdaptiveCompressor(codec: TestZstd(), meter: meter(bytesPerSecond: 2e6)), random)
        #expect(compressor.level == nil)
        #expect(compressor.ratio > 0.99)
    }

    @Test func withoutAMeasuredLinkTextIsCompressedLightly() {
        let compressor = run(AdaptiveCompressor(codec: TestZstd()), Self.text, chunks: 4)
        #expect(compressor.level == 1)
        #expect(compressor.ratio < 0.5)
    }
}
