import Testing

@testable import ShareTLS

/// The chunk digests against published values: BLAKE3's from its reference vectors (input byte i is i mod 251), as
/// another implementation (the Rust crate) computes them; lengths that cross one chunk (1 KiB) and the SIMD paths
/// (1 MiB + 1, hashed whole and in uneven pieces).
@Suite struct DigestTests {
    static func pattern(_ count: Int) -> [UInt8] { (0..<count).map { UInt8($0 % 251) } }

    @Test func bytesAreTheirHexOnlyExactly() {
        let digest = BLAKE3Hasher.hash(Array("abc".utf8))
        #expect(digest.isHex(digest.hexString))
        #expect([UInt8]().isHex("") && ![UInt8]().isHex("0"))
        #expect([0x0f, 0xa0].isHex("0fa0"))
        #expect(![0x0f, 0xa0].isHex("0FA0"), "upper case is not what hexString writes")
        #expect(![0x0f, 0xa0].isHex("0fa"), "too short")
        #expect(![0x0f, 0xa0].isHex("0fa00"), "too long")
        #expect(![0x0f, 0xa0].isHex("0fa1"))
        #expect(![0x0f].isHex("0\u{e9}"), "not ASCII")
    }

    @Test func blake3MatchesItsReferenceVectors() {
        #expect(
            BLAKE3Hasher.hash([UInt8]()).hexString == "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
        )
        #expect(
            BLAKE3Hasher.hash(Array("abc".utf8)).hexString
                == "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85")
        #expect(
            BLAKE3Hasher.hash(Self.pattern(1024)).hexString
                == "42214739f095a406f3fc83deb889744ac00df831c10daa55189b5d121c855af7")
        #expect(
            BLAKE3Hasher.hash(Self.pattern(1025)).hexString
                == "d00278ae47eb27b34faecf67b4fe263f82d5412916c1ffd97c8cb7fb814b8444")
        let large = Self.pattern((1 << 20) + 1)
        #expect(
            BLAKE3Hasher.hash(large).hexString == "2f053cd7472cf0cd2f9adaf45c1180255b91b9a865404a63671a0ee5f792ed33")
        // Streamed in uneven pieces, and the hasher reused after `finalize`.
        let hasher = BLAKE3Hasher()
        _ = hasher.finalize()
        var offset = 0
        for piece in [1, 63, 64, 1000, 70_000, 1 << 19] where offset < large.count {
            let end = min(large.count, offset + piece)
            large[offset..<end].withUnsafeBytes { hasher.update($0) }
            offset = end
        }
        large[offset...].withUnsafeBytes { hasher.update($0) }
        #expect(hasher.finalize().hexString == "2f053cd7472cf0cd2f9adaf45c1180255b91b9a865404a63671a0ee5f792ed33")
    }

    @Test func sha256MatchesItsStandardVector() {
        #expect(
            SHA256Hasher.hash(Array("abc".utf8)).hexString
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }
}
