import Foundation
import Testing

@testable import ShareProtocol

/// Frame headers and control messages. Whole streams (one byte at a time, all at once, truncated) are tested on the
/// real read path, `FramedConnection` over TLS, in ShareKitTests.
@Suite struct FrameHeaderTests {
    @Test func encodedFramesParseBack() throws {
        for frame in [MessageCoding.frame(.hello, Hello(name: "desk", role: .agent)), Frame(type: .bye, payload: [])] {
            let bytes = frame.encoded()
            let (type, length) = try Frame.parseHeader(bytes[0..<5])
            #expect(type == frame.type && length == frame.payload.count)
            #expect(Array(bytes[5...]) == frame.payload)
        }
    }

    @Test func lengthsPastEveryLimitAreRefused() {
        for type in FrameType.allCases {
            let length = UInt32(type.maxPayload + 1)
            let header: [UInt8] = [
                type.rawValue, UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF),
                UInt8(length & 0xFF),
            ]
            let error = try? #require(throws: ProtocolError.self) { _ = try Frame.parseHeader(header[...]) }
            #expect(error?.code == .frameTooLarge)
        }
    }

    /// A frame of files built whole (its header filled in as it goes) arrives as the same files, whether it crossed
    /// as it is (random bytes, read straight into its own buffer: larger than the read buffer) or compressed, and the
    /// frames around it arrive intact.
    @Test func aFrameBuiltWholeArrivesAsItsFiles() throws {
        var generator = SystemRandomNumberGenerator()
        let random = FolderFiles(
            files: (0..<40).map { n in
                FolderFiles.File(
                    ref: "r\(n)", bytes: (0..<(20 << 10)).map { _ in UInt8.random(in: 0...255, using: &generator) })
            })
        let text = FolderFiles(
            files: (0..<40).map {
                FolderFiles.File(ref: "t\($0)", bytes: Array(String(repeating: "line \($0)\n", count: 2000).utf8))
            })
        let (a, b) = MemoryStream.pair()
        let sending = FrameChannel(stream: a)
        let receiving = FrameChannel(stream: b)
        let codec = TestZstd()
        var first = random.built(codec: codec)
        #expect(first[Limits.frameHeaderSize] == 0)  // random bytes cross as they are
        var second = text.built(codec: codec)
        #expect(second[Limits.frameHeaderSize] == 1)  // text is compressed
        try sending.send(.folderFiles, built: &first)
        try sending.send(.bye, Bye())
        try sending.send(.folderFiles, built: &second)
        let got = try receiving.receive()
        #expect(got.type == .folderFiles && got.payload.count > 64 << 10)
        #expect(try FolderFiles.decode(got.payload, codec: codec) == random)
        #expect(try receiving.receive().type == .bye)
        #expect(try FolderFiles.decode(receiving.receive().payload, codec: codec) == text)
        #expect(sending.bytesOut == receiving.bytesIn)
        var tooLarge = [UInt8](repeating: 0, count: Limits.frameHeaderSize + FrameType.bye.maxPayload + 1)
        #expect(throws: ProtocolError.self) { try sending.send(.bye, built: &tooLarge) }
    }

    @Test func unknownTypesAreRefused() {
        let error = try? #require(throws: ProtocolError.self) { _ = try Frame.parseHeader([0xEE, 0, 0, 0, 0][...]) }
        #expect(error?.code == .badFrame)
    }

    @Test func randomHeadersEndInAnErrorOrABoundedLength() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5000 {
            let header = (0..<5).map { _ in UInt8.random(in: 0...255, using: &generator) }
            do {
                let (type, length) = try Frame.parseHeader(header[...])
                #expect(length <= type.maxPayload)
            } catch {
                #expect(!error.message.isEmpty)
            }
        }
    }

    @Test func oversizedOutgoingFramesAreDetected() {
        #expect(!Frame(type: .hello, payload: [UInt8](repeating: 0, count: Limits.maxControlPayload + 1)).isWithinLimit)
        #expect(Frame(type: .offer, payload: [UInt8](repeating: 0, count: Limits.maxControlPayload + 1)).isWithinLimit)
    }

    @Test func controlMessagesThatDoNotDecodeAreBadMessages() {
        let frame = Frame(type: .hello, payload: Array("{\"magic\": 1}".utf8))
        let error = try? #require(throws: ProtocolError.self) { _ = try MessageCoding.decode(Hello.self, from: frame) }
        #expect(error?.code == .badMessage)
    }
}

@Suite struct HelloTests {
    @Test func versionMismatchIsAClearVersionError() {
        var newer = Hello(name: "a", role: .cli)
        newer.version = Limits.protocolVersion + 1
        newer.minVersion = Limits.protocolVersion + 1
        let error = try? #require(throws: ProtocolError.self) { try newer.validate() }
        #expect(error?.code == .version)
        #expect(error?.message.contains("protocol \(Limits.protocolVersion + 1)") == true)
        #expect(error?.message.contains("update share on this device") == true)
        // Version 1 (pairing without commitments) is not spoken any more; it has no minVersion.
        var old = Hello(name: "a", role: .pair)
        old.version = 1
        old.minVersion = nil
        let oldError = try? #require(throws: ProtocolError.self) { try old.validate() }
        #expect(oldError?.code == .version)
        #expect(
            oldError?.message
                == "the peer speaks share protocol 1, this device speaks \(Limits.oldestProtocolVersion)–\(Limits.protocolVersion); update share on the other device"
        )
    }

    /// A newer peer that still speaks our version is accepted, and the session speaks ours.
    @Test func overlappingRangesAgreeOnTheNewerCommonVersion() throws {
        var newer = Hello(name: "a", role: .cli)
        newer.version = Limits.protocolVersion + 3
        newer.minVersion = Limits.oldestProtocolVersion
        try newer.validate()
        #expect(newer.agreedVersion == Limits.protocolVersion)
        let decoded = try MessageCoding.decode(
            Hello.self, from: MessageCoding.frame(.hello, Hello(name: "b", role: .cli)))
        #expect(decoded.minVersion == Limits.oldestProtocolVersion && decoded.version == Limits.protocolVersion)
    }

    /// BLAKE3 only when both hellos list it: an older peer's hello (no `digests`) keeps the session on SHA-256, and
    /// an unknown digest name is ignored.
    @Test func theChunkDigestIsBLAKE3OnlyWhenBothEndsListIt() throws {
        let ours = Hello(name: "a", role: .cli)
        #expect(ours.digests == ["blake3"])
        let json = String(decoding: MessageCoding.frame(.hello, ours).payload, as: UTF8.self)
        var older = try JSONSerialization.jsonObject(with: Data(json.utf8)) as! [String: Any]
        older.removeValue(forKey: "digests")
        let olderHello = try JSONDecoder().decode(Hello.self, from: JSONSerialization.data(withJSONObject: older))
        #expect(olderHello.digests == nil)
        #expect(DigestAlgorithm.agreed(ours.digests, ours.digests) == .blake3)
        #expect(DigestAlgorithm.agreed(ours.digests, olderHello.digests) == .sha256)
        #expect(DigestAlgorithm.agreed(olderHello.digests, ours.digests) == .sha256)
        #expect(DigestAlgorithm.agreed(ours.digests, ["k12", "md5"]) == .sha256)
        var long = ours
        long.digests = Array(repeating: "x", count: 17)
        #expect(throws: ProtocolError.self) { try long.validate() }
    }

    @Test func wrongMagicIsNotShare() {
        var hello = Hello(name: "a", role: .cli)
        hello.magic = "http"
        let error = try? #require(throws: ProtocolError.self) { try hello.validate() }
        #expect(error?.code == .notShare)
    }

    @Test func namesAreBounded() {
        #expect(throws: ProtocolError.self) { try Hello(name: "", role: .cli).validate() }
        #expect(throws: ProtocolError.self) {
            try Hello(name: String(repeating: "x", count: 200), role: .cli).validate()
        }
        #expect(throws: ProtocolError.self) { try Hello(name: "a\u{7}b", role: .cli).validate() }
        #expect(throws: ProtocolError.self) { try Hello(name: "a", role: .cli, listenPort: 70000).validate() }
        #expect(throws: Never.self) { try Hello(name: "laptop", role: .agent, listenPort: 5000).validate() }
    }
}
