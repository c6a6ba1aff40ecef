import Foundation
import Testing

@testable import ShareArchive

@Suite struct ZstdCodecTests {
    func text(_ count: Int) -> [UInt8] {
        Array(
            String(repeating: "the quick brown fox jumps over the lazy dog 0123456789\n", count: count / 55 + 1).utf8
                .prefix(count))
    }

    @Test func compressibleChunksRoundTrip() throws {
        let input = text(1 << 20)
        let packed = try #require(input.withUnsafeBytes { ZstdCodec.compress($0) })
        #expect(packed.count < input.count / 10)
        var output = [UInt8](repeating: 0, count: input.count + 1)
        try packed.withUnsafeBytes { source in
            try output.withUnsafeMutableBytes { try ZstdCodec.decompress(source, into: $0, expected: input.count) }
        }
        #expect(Array(output[0..<input.count]) == input)
    }

    @Test func randomBytesAreNotWorthCompressing() {
        let input = (0..<(256 << 10)).map { _ in UInt8.random(in: 0...255) }
        #expect(input.withUnsafeBytes { ZstdCodec.compress($0) } == nil)
    }

    /// A large input is judged by samples of it first: random bytes are not tried whole; an input that is random in
    /// part and text in part is compressed (its samples find the text), and decodes to itself.
    @Test func aLargeInputIsJudgedBySamplesBeforeItIsCompressed() throws {
        var generator = SystemRandomNumberGenerator()
        let random = (0..<(1 << 20)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        #expect(random.withUnsafeBytes { ZstdCodec.compress($0, level: 3, worthIt: 0.1) } == nil)
        let mixed = Array(random.prefix(1 << 19)) + text(1 << 19)
        let packed = try #require(mixed.withUnsafeBytes { ZstdCodec.compress($0, level: 3, worthIt: 0.1) })
        #expect(packed.count < mixed.count * 3 / 4)
        var output = [UInt8](repeating: 0, count: mixed.count)
        try packed.withUnsafeBytes { source in
            try output.withUnsafeMutableBytes { try ZstdCodec.decompress(source, into: $0, expected: mixed.count) }
        }
        #expect(output == mixed)
        // Just under the sampled size: tried whole, as before.
        let short = text(ZstdCodec.sampledFrom - 1)
        #expect(short.withUnsafeBytes { ZstdCodec.compress($0) } != nil)
    }

    @Test func wrongLengthsAndGarbageAreRejected() throws {
        let input = text(100_000)
        let packed = try #require(input.withUnsafeBytes { ZstdCodec.compress($0) })
        var output = [UInt8](repeating: 0, count: 200_000)
        for expected in [99_999, 100_001, 50] {
            #expect(throws: ArchiveError.self) {
                try packed.withUnsafeBytes { source in
                    try output.withUnsafeMutableBytes { try ZstdCodec.decompress(source, into: $0, expected: expected) }
                }
            }
        }
        // A damaged frame either fails or decodes to other bytes (which the chunk's SHA-256 then rejects).
        var damaged = packed
        damaged[damaged.count / 2] ^= 0xFF
        let decoded: [UInt8]? = try? damaged.withUnsafeBytes { source in
            try output.withUnsafeMutableBytes { try ZstdCodec.decompress(source, into: $0, expected: 100_000) }
            return Array(output[0..<100_000])
        }
        #expect(decoded != input)
        for bytes in [Array("not zstd at all".utf8), []] {
            #expect(throws: ArchiveError.self) {
                try bytes.withUnsafeBytes { source in
                    try output.withUnsafeMutableBytes { try ZstdCodec.decompress(source, into: $0, expected: 100_000) }
                }
            }
        }
    }
}
