import Foundation
import ShareProtocol
import ShareTLS

/// Frames over one TLS connection: buffered reads, whole-frame writes, typed messages. Confined to one thread.
public final class FramedConnection: @unchecked Sendable {  // driven by one thread at a time
    public let tls: TLSConnection
    private var decoder = FrameDecoder()
    private var readBuffer: [UInt8]
    /// Where the peer connected from or to.
    public let remoteAddress: String

    public init(tls: TLSConnection, remoteAddress: String, readBufferSize: Int = 256 << 10) {
        self.tls = tls
        self.remoteAddress = remoteAddress
        self.readBuffer = [UInt8](repeating: 0, count: readBufferSize)
    }

    /// Receive/send timeout for the underlying socket (0 = none).
    public func setTimeout(_ seconds: Double) { Syscalls.setTimeouts(tls.fileDescriptor, seconds: seconds) }

    public func send(_ frame: Frame) throws {
        try tls.write(frame.encoded())
    }

    public func send(_ type: FrameType, _ message: some Encodable) throws {
        try send(MessageCoding.frame(type, message))
    }

    /// The next frame. A clean close before a complete frame is a `connectionLost` error.
    public func receive() throws -> Frame {
        while true {
            if let frame = try decoder.next() { return frame }
            let count = try tls.read(into: &readBuffer, count: readBuffer.count)
            if count == 0 {
                throw TLSError(.connectionLost, "the peer closed the connection")
            }
            decoder.append(readBuffer[0..<count])
        }
    }

    /// The next frame, which must be `type`; an `Error` frame from the peer is thrown as its `ProtocolError`.
    public func receive<T: Decodable>(_ type: FrameType, as: T.Type) throws -> T {
        let frame = try receive()
        if frame.type == .error { throw MessageCoding.peerError(from: frame) }
        guard frame.type == type else {
            throw ProtocolError(.badMessage, "expected \(type), the peer sent \(frame.type)")
        }
        return try MessageCoding.decode(T.self, from: frame)
    }

    /// Reports `error` to the peer (best effort) and closes politely.
    public func fail(with error: ProtocolError) {
        try? send(.error, error)
        tls.shutdown()
    }

    public func close() { tls.shutdown() }
}
