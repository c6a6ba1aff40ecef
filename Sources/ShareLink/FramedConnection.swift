import Foundation
import ShareProtocol
import ShareTLS

/// Frames over one TLS connection: buffered reads, whole-frame writes, typed messages. Confined to one thread.
///
/// Binary frames (file chunks) are read straight into the caller's chunk buffer, so received file bytes are copied
/// once (decryption) before they are hashed and written.
public final class FramedConnection: @unchecked Sendable {  // driven by one thread at a time
    public let tls: TLSConnection
    /// Where the peer connected from or to.
    public let remoteAddress: String
    private var pending: [UInt8]
    private var start = 0
    private var end = 0
    /// Longest time one frame may take to arrive once it has begun: a peer trickling a byte at a time cannot hold a
    /// session open forever (each read alone would stay within the idle timeout).
    public var frameDeadline: Duration = .seconds(120)
    private var frameStarted: ContinuousClock.Instant?

    public init(tls: TLSConnection, remoteAddress: String, readBufferSize: Int = 64 << 10) {
        self.tls = tls
        self.remoteAddress = remoteAddress
        pending = [UInt8](repeating: 0, count: readBufferSize)
    }

    /// Receive/send timeout for the underlying socket (0 = none).
    public func setTimeout(_ seconds: Double) { Syscalls.setTimeouts(tls.fileDescriptor, seconds: seconds) }

    public func send(_ frame: Frame) throws {
        guard frame.isWithinLimit else {
            throw ProtocolError(
                .internalError,
                "a \(frame.type) message of \(frame.payload.count) bytes is over the protocol's limit of \(frame.type.maxPayload)"
            )
        }
        try tls.write(frame.encoded())
    }

    public func send(_ type: FrameType, _ message: some Encodable) throws {
        try send(MessageCoding.frame(type, message))
    }

    /// What arrived: a control frame, or a binary frame whose data now fills `chunk[0..<length]`.
    public enum Incoming {
        case control(Frame)
        case binary(FrameType, ChunkHeader, length: Int)
    }

    /// The next frame. Binary frames are read into `chunk` (grown if needed, never beyond the frame limit).
    public func receive(chunk: inout [UInt8]) throws -> Incoming {
        frameStarted = nil
        defer { frameStarted = nil }
        try fill(Limits.frameHeaderSize)
        frameStarted = ContinuousClock.now
        let (type, length) = try Frame.parseHeader(pending[start..<(start + Limits.frameHeaderSize)])
        start += Limits.frameHeaderSize
        guard type.isBinary else {
            var payload = [UInt8]()
            payload.reserveCapacity(length)
            try read(length) { payload.append(contentsOf: $0) }
            return .control(Frame(type: type, payload: payload))
        }
        guard length >= ChunkHeader.size else {
            throw ProtocolError(.badMessage, "\(type) frame shorter than its header")
        }
        try fill(ChunkHeader.size)
        let header = try ChunkHeader.parse(pending[start..<(start + ChunkHeader.size)])
        start += ChunkHeader.size
        let dataLength = length - ChunkHeader.size
        if chunk.count < dataLength { chunk = [UInt8](repeating: 0, count: dataLength) }
        // First what is already buffered, then straight from TLS into the chunk buffer.
        let buffered = min(end - start, dataLength)
        if buffered > 0 {
            chunk.replaceSubrange(0..<buffered, with: pending[start..<(start + buffered)])
            start += buffered
        }
        var filled = buffered
        while filled < dataLength {
            try checkDeadline()
            let n = try tls.read(into: &chunk, offset: filled, count: dataLength - filled)
            if n == 0 { throw TLSError(.connectionLost, "the peer closed the connection in the middle of a chunk") }
            filled += n
        }
        return .binary(type, header, length: dataLength)
    }

    /// The next frame as a whole (binary data copied into the frame); for callers that expect control messages.
    public func receive() throws -> Frame {
        var chunk: [UInt8] = []
        switch try receive(chunk: &chunk) {
        case .control(let frame):
            return frame
        case .binary(let type, let header, let length):
            return Frame(type: type, payload: header.encoded() + chunk[0..<length])
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

    /// Ensures `count` bytes are buffered (count ≤ buffer size).
    private func fill(_ count: Int) throws {
        if end - start >= count { return }
        if start > 0 {
            pending.replaceSubrange(0..<(end - start), with: pending[start..<end])
            end -= start
            start = 0
        }
        while end < count {
            try checkDeadline()
            let n = try tls.read(into: &pending, offset: end, count: pending.count - end)
            if n == 0 { throw TLSError(.connectionLost, "the peer closed the connection") }
            end += n
        }
    }

    private func checkDeadline() throws {
        if let frameStarted, ContinuousClock.now - frameStarted > frameDeadline {
            throw ProtocolError(.timeout, "the peer took longer than \(frameDeadline) to send one message")
        }
    }

    /// Consumes `count` bytes, handing them to `sink` piece by piece.
    private func read(_ count: Int, _ sink: (ArraySlice<UInt8>) -> Void) throws {
        var remaining = count
        while remaining > 0 {
            if start == end {
                try checkDeadline()
                start = 0
                end = 0
                let n = try tls.read(into: &pending, offset: 0, count: pending.count)
                if n == 0 { throw TLSError(.connectionLost, "the peer closed the connection") }
                end = n
            }
            let take = min(remaining, end - start)
            sink(pending[start..<(start + take)])
            start += take
            remaining -= take
        }
    }

    /// Whether the peer has sent something not read yet (checked between chunks while streaming).
    public var hasIncomingData: Bool {
        start < end || tls.hasBufferedData || Syscalls.isReadable(tls.fileDescriptor)
    }

    /// After a failed write: the peer's `Error` frame, if it sent one before closing (read within `timeout`).
    public func pendingPeerError(timeout: Double = 2) -> ProtocolError? {
        setTimeout(timeout)
        for _ in 0..<64 {
            guard let frame = try? receive() else { return nil }
            if frame.type == .error { return MessageCoding.peerError(from: frame) }
        }
        return nil
    }

    /// Reports `error` to the peer (best effort) and closes politely, reading and discarding what the peer still
    /// sends for a moment so that the error arrives instead of being destroyed by a TCP reset.
    public func fail(with error: ProtocolError) {
        try? send(.error, error)
        tls.shutdown()
        Syscalls.lingeringDrain(tls.fileDescriptor, maxBytes: 64 << 20, timeout: 2)
    }

    public func close() { tls.shutdown() }
}
