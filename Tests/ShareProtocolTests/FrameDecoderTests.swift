import Foundation
import Testing

@testable import ShareProtocol

/// The decoder tested four ways (one byte at a time, all at once, one frame per read, truncated and oversized input),
/// plus random bytes.
@Suite struct FrameDecoderTests {
    let frames: [Frame] = [
        MessageCoding.frame(.hello, Hello(name: "desk", role: .agent)),
        Frame(type: .chunk, payload: (0..<5000).map { UInt8($0 & 0xFF) }),
        Frame(type: .bye, payload: []),
        MessageCoding.frame(.ping, Ping(nonce: 42)),
    ]

    var stream: [UInt8] { frames.flatMap { $0.encoded() } }

    @Test func oneByteAtATime() throws {
        var decoder = FrameDecoder()
        var out: [Frame] = []
        for byte in stream {
            decoder.append([byte])
            while let frame = try decoder.next() { out.append(frame) }
        }
        #expect(out == frames)
        #expect(decoder.bufferedCount == 0)
    }

    @Test func allAtOnce() throws {
        var decoder = FrameDecoder()
        decoder.append(stream)
        var out: [Frame] = []
        while let frame = try decoder.next() { out.append(frame) }
        #expect(out == frames)
    }

    @Test func oneFramePerRead() throws {
        var decoder = FrameDecoder()
        for frame in frames {
            decoder.append(frame.encoded())
            #expect(try decoder.next() == frame)
            #expect(try decoder.next() == nil)
        }
    }

    @Test func truncatedInputWaitsForMore() throws {
        var decoder = FrameDecoder()
        let bytes = frames[1].encoded()
        decoder.append(bytes.dropLast())
        #expect(try decoder.next() == nil)
        #expect(decoder.bufferedCount == bytes.count - 1)
    }

    @Test func lengthsPastEveryLimitAreRefusedBeforeBuffering() {
        for type in FrameType.allCases {
            let length = UInt32(type.maxPayload + 1)
            var decoder = FrameDecoder()
            decoder.append([
                type.rawValue, UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF),
                UInt8(length & 0xFF),
            ])
            #expect(throws: ProtocolError.self) { _ = try decoder.next() }
        }
        var huge = FrameDecoder()
        huge.append([FrameType.hello.rawValue, 0xFF, 0xFF, 0xFF, 0xFF])
        let error = try? #require(throws: ProtocolError.self) { _ = try huge.next() }
        #expect(error?.code == .frameTooLarge)
    }

    @Test func unknownTypesAreRefused() {
        var decoder = FrameDecoder()
        decoder.append([0xEE, 0, 0, 0, 0])
        let error = try? #require(throws: ProtocolError.self) { _ = try decoder.next() }
        #expect(error?.code == .badFrame)
    }

    @Test func randomBytesEndInAnErrorOrWaitNeverACrash() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            var decoder = FrameDecoder()
            let count = Int.random(in: 0..<64, using: &generator)
            decoder.append((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
            do {
                while try decoder.next() != nil {}
            } catch {
                #expect(!error.message.isEmpty)
            }
            #expect(decoder.bufferedCount <= 64)
        }
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
        let error = try? #require(throws: ProtocolError.self) { try newer.validate() }
        #expect(error?.code == .version)
        #expect(error?.message.contains("protocol \(Limits.protocolVersion + 1)") == true)
        var older = newer
        older.version = 0
        #expect(throws: ProtocolError.self) { try older.validate() }
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
