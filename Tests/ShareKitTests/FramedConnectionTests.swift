import Foundation
import Glibc
import ShareKit
import ShareProtocol
import ShareTLS
import Testing
import ShareNet
import ShareTrust
import ShareReach
import ShareEngine
import ShareAgent

/// The frame channel as the wire uses it, tested four ways over a real TLS pair: one byte per TLS record, everything at
/// once, one frame per write, and truncated or oversized input.
@Suite struct FramedConnectionTests {
    let frames: [Frame] = [
        MessageCoding.frame(.hello, Hello(name: "desk", role: .agent)),
        Frame(
            type: .chunk,
            payload: ChunkHeader(index: 3, digest: [UInt8](repeating: 7, count: 32)).encoded()
                + (0..<5000).map { UInt8($0 & 0xFF) }),
        Frame(type: .bye, payload: []),
        MessageCoding.frame(.ping, Ping(nonce: 42)),
    ]

    /// A connected TLS pair; `writer` runs on its own thread and its end is shut down afterwards.
    func withPair(
        _ writer: @escaping @Sendable (TLSConnection) throws -> Void,
        _ reader: (PeerConnection) throws -> Void
    ) throws {
        var fds: [Int32] = [0, 0]
        precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        Syscalls.setTimeouts(fds[0], seconds: 10)
        Syscalls.setTimeouts(fds[1], seconds: 10)
        let a = try TLSIdentity.generate(commonName: "a")
        let b = try TLSIdentity.generate(commonName: "b")
        let server = try TLSConnection(
            context: try TLSContext(identity: a, role: .server) { _ in true }, fileDescriptor: fds[0])
        let client = try TLSConnection(
            context: try TLSContext(identity: b, role: .client) { _ in true }, fileDescriptor: fds[1])
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            do {
                try client.handshake()
                try writer(client)
            } catch {}
            client.shutdown()
            done.signal()
        }
        thread.start()
        try server.handshake()
        try reader(PeerConnection(tls: server, remoteAddress: "pair"))
        _ = done.wait(timeout: .now() + 10)
    }

    func readAll(_ connection: PeerConnection, count: Int) throws -> [Frame] {
        try (0..<count).map { _ in try connection.receive() }
    }

    @Test func oneByteAtATime() throws {
        let bytes = frames.flatMap { $0.encoded() }
        try withPair({ tls in for byte in bytes { try tls.write([byte]) } }) { connection in
            let received = try readAll(connection, count: frames.count)
            #expect(received == frames)
        }
    }

    @Test func allAtOnce() throws {
        let bytes = frames.flatMap { $0.encoded() }
        try withPair({ tls in try tls.write(bytes) }) { connection in
            let received = try readAll(connection, count: frames.count)
            #expect(received == frames)
        }
    }

    @Test func oneFramePerWrite() throws {
        let frames = self.frames
        try withPair({ tls in for frame in frames { try tls.write(frame.encoded()) } }) { connection in
            for frame in frames {
                let received = try connection.receive()
                #expect(received == frame)
            }
        }
    }

    @Test func binaryFramesLandInTheChunkBuffer() throws {
        let frame = frames[1]
        try withPair({ tls in try tls.write(frame.encoded()) }) { connection in
            var chunk: [UInt8] = []
            guard case .binary(let type, let header, let length) = try connection.channel.receive(chunk: &chunk) else {
                Issue.record("expected a binary frame")
                return
            }
            #expect(type == .chunk && header.index == 3 && length == 5000)
            #expect(Array(chunk[0..<length]) == Array(frame.payload[ChunkHeader.size...]))
        }
    }

    @Test func truncatedInputIsAConnectionLossNotAHang() throws {
        let bytes = Array(frames[1].encoded().dropLast(10))
        try withPair({ tls in try tls.write(bytes) }) { connection in
            #expect(throws: StreamEnded.self) { _ = try connection.receive() }
        }
    }

    @Test func oversizedLengthsAreRefusedBeforeAllocating() throws {
        try withPair({ tls in try tls.write([FrameType.hello.rawValue, 0x7F, 0xFF, 0xFF, 0xFF]) }) { connection in
            let error = try #require(throws: ProtocolError.self) { _ = try connection.receive() }
            #expect(error.code == .frameTooLarge)
        }
    }

    @Test func randomBytesEndInAClearError() throws {
        for _ in 0..<20 {
            let bytes = (0..<Int.random(in: 1..<200)).map { _ in UInt8.random(in: 0...255) }
            try withPair({ tls in try tls.write(bytes) }) { connection in
                do {
                    while true { _ = try connection.receive() }
                } catch let error as ProtocolError {
                    #expect(!error.message.isEmpty)
                } catch is StreamEnded {
                }
            }
        }
    }
}
