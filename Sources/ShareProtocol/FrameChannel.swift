import FoundationEssentials
import Synchronization

/// Frames over a byte stream, both ways: buffered reads, whole-frame writes, typed messages. The only place frames
/// are decoded. Confined to one thread at a time.
///
/// Binary frames (chunks) are read straight into the caller's buffer, so received bytes are copied once (by the
/// stream, decrypting) before they are hashed and written.
public final class FrameChannel {
    public let stream: ByteStream
    private var pending: [UInt8]
    private var start = 0
    private var end = 0
    /// Longest time one frame may take to arrive once it has begun: a peer trickling a byte at a time cannot hold a
    /// session open forever (each read alone would stay within the stream's timeout).
    public var frameDeadline: Duration = .seconds(120)
    private var frameStarted: ContinuousClock.Instant?
    /// Whether an `error` frame went either way: the session is over and its reason told, once.
    public private(set) var errorExchanged = false
    /// Bytes of frames read from and written to the stream so far (before the stream's own encryption).
    public private(set) var bytesIn: UInt64 = 0
    public private(set) var bytesOut: UInt64 = 0
    /// Why the session must end, when another thread said so (`stop`): the next frame read throws it.
    private let stopped = Mutex<ProtocolError?>(nil)

    public init(stream: ByteStream, readBufferSize: Int = 64 << 10) {
        self.stream = stream
        pending = [UInt8](repeating: 0, count: readBufferSize)
    }

    // MARK: Sending

    public func send(_ frame: Frame) throws {
        guard frame.isWithinLimit else {
            throw ProtocolError(
                .internalError,
                "a \(frame.type) message of \(frame.payload.count) bytes is over the protocol's limit of \(frame.type.maxPayload)"
            )
        }
        if frame.type == .error { errorExchanged = true }
        try frame.encoded().withUnsafeBytes {
            try stream.write($0)
            bytesOut += UInt64($0.count)
        }
    }

    /// Sends a frame built whole in `bytes`, whose first `Limits.frameHeaderSize` bytes are room for its header
    /// (filled in here): one write, no copy.
    public func send(_ type: FrameType, built bytes: inout [UInt8]) throws {
        let length = bytes.count - Limits.frameHeaderSize
        guard length >= 0, length <= type.maxPayload else {
            throw ProtocolError(
                .internalError,
                "a \(type) message of \(length) bytes is over the protocol's limit of \(type.maxPayload)")
        }
        bytes.replaceSubrange(0..<Limits.frameHeaderSize, with: Frame.header(type: type, length: length))
        try bytes.withUnsafeBytes {
            try stream.write($0)
            bytesOut += UInt64($0.count)
        }
    }

    public func send(_ type: FrameType, _ message: some Encodable) throws {
        try send(MessageCoding.frame(type, message))
    }

    /// Sends one binary frame: its header, then `data` as it is (no copy into a frame).
    public func sendBinary(_ type: FrameType, header: ChunkHeader, data: UnsafeRawBufferPointer) throws {
        var head = Frame.header(type: type, length: ChunkHeader.size + data.count)
        head += header.encoded()
        try head.withUnsafeBytes { try stream.write($0) }
        if data.count > 0 { try stream.write(data) }
        bytesOut += UInt64(head.count + data.count)
    }

    /// Ends the session from another thread at its next frame: reading it throws `error`, and the session's own
    /// thread can still tell the peer why (a read blocked meanwhile is not woken: see `PeerConnection.interrupt`).
    public func stop(_ error: ProtocolError) {
        stopped.withLock { $0 = $0 ?? error }
    }

    // MARK: Receiving

    /// What arrived: a control frame, or a binary frame whose data now fills `chunk[0..<length]`.
    public enum Incoming {
        case control(Frame)
        case binary(FrameType, ChunkHeader, length: Int)
    }

    /// The next frame. Binary frames are read into `chunk` (grown if needed, never beyond the frame limit).
    public func receive(chunk: inout [UInt8]) throws -> Incoming {
        try receive { length, read in
            if chunk.count < length { chunk = [UInt8](repeating: 0, count: length) }
            try chunk.withUnsafeMutableBytes { try read(UnsafeMutableRawBufferPointer(rebasing: $0[0..<length])) }
        }
    }

    /// The next frame. A binary frame's data is read into `buffer`, which must hold a chunk of the largest size
    /// (`Limits.maxChunkPayload`).
    public func receive(into buffer: UnsafeMutableRawBufferPointer) throws -> Incoming {
        try receive { length, read in
            guard length <= buffer.count else {
                throw ProtocolError(.frameTooLarge, "a chunk of \(length) bytes is larger than this receiver reads")
            }
            try read(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<length]))
        }
    }

    /// `place(length, read)` calls `read` with where a binary frame's `length` bytes of data go.
    private func receive(
        place: (Int, (UnsafeMutableRawBufferPointer) throws -> Void) throws -> Void
    ) throws -> Incoming {
        frameStarted = nil
        defer { frameStarted = nil }
        if let error = stopped.withLock({ $0 }) { throw error }
        try fill(Limits.frameHeaderSize)
        frameStarted = ContinuousClock.now
        let (type, length) = try Frame.parseHeader(pending[start..<(start + Limits.frameHeaderSize)])
        start += Limits.frameHeaderSize
        guard type.isBinary else {
            let payload: [UInt8]
            if length > pending.count {
                // A large message (a frame of files) is read straight into its own buffer, as chunks are.
                payload = try [UInt8](unsafeUninitializedCapacity: length) { buffer, count in
                    count = 0
                    try readBuffered(into: UnsafeMutableRawBufferPointer(buffer), length)
                    count = length
                }
            } else {
                var small = [UInt8]()
                small.reserveCapacity(length)
                try read(length) { small.append(contentsOf: $0) }
                payload = small
            }
            if type == .error { errorExchanged = true }
            return .control(Frame(type: type, payload: payload))
        }
        guard length >= ChunkHeader.size else {
            throw ProtocolError(.badMessage, "\(type) frame shorter than its header")
        }
        try fill(ChunkHeader.size)
        let header = try ChunkHeader.parse(pending[start..<(start + ChunkHeader.size)])
        start += ChunkHeader.size
        let dataLength = length - ChunkHeader.size
        try place(dataLength) { try readBuffered(into: $0, dataLength) }
        return .binary(type, header, length: dataLength)
    }

    /// Reads `count` bytes into `destination`: first what is already buffered, then straight from the stream.
    private func readBuffered(into destination: UnsafeMutableRawBufferPointer, _ count: Int) throws {
        let buffered = min(end - start, count)
        if buffered > 0 {
            pending.withUnsafeBytes { source in
                destination.baseAddress!.copyMemory(from: source.baseAddress! + start, byteCount: buffered)
            }
            start += buffered
        }
        var filled = buffered
        while filled < count {
            try checkDeadline()
            let n = try stream.read(into: UnsafeMutableRawBufferPointer(rebasing: destination[filled..<count]))
            if n == 0 { throw StreamEnded("the peer closed the connection in the middle of a message") }
            filled += n
            bytesIn += UInt64(n)
        }
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

    /// The next frame, which must be `type`; an `error` frame from the peer is thrown as its `ProtocolError`.
    public func receive<T: Decodable>(_ type: FrameType, as: T.Type) throws -> T {
        let frame = try receive()
        if frame.type == .error { throw MessageCoding.peerError(from: frame) }
        guard frame.type == type else {
            throw ProtocolError(.badMessage, "expected \(type), the peer sent \(frame.type)")
        }
        return try MessageCoding.decode(T.self, from: frame)
    }

    /// Whether the peer has sent something not read yet.
    public var hasIncomingData: Bool { start < end || stream.hasInput }

    /// After a failed write: the peer's `error` frame, if it sent one before closing (read within `timeout`).
    public func pendingPeerError(timeout: Double = 2) -> ProtocolError? {
        stream.setReadTimeout(timeout)
        for _ in 0..<64 {
            guard let frame = try? receive() else { return nil }
            if frame.type == .error { return MessageCoding.peerError(from: frame) }
        }
        return nil
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
            let n = try readPending(at: end)
            if n == 0 { throw StreamEnded("the peer closed the connection") }
            end += n
        }
    }

    private func readPending(at offset: Int) throws -> Int {
        let n = try pending.withUnsafeMutableBytes {
            try stream.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[offset...]))
        }
        bytesIn += UInt64(max(0, n))
        return n
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
                let n = try readPending(at: 0)
                if n == 0 { throw StreamEnded("the peer closed the connection") }
                end = n
            }
            let take = min(remaining, end - start)
            sink(pending[start..<(start + take)])
            start += take
            remaining -= take
        }
    }
}

/// The stream ended where a frame was expected: the peer closed the connection (or it dropped).
public struct StreamEnded: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
