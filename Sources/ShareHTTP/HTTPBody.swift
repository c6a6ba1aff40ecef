import ShareProtocol
import ShareNet
/// A request's body as it arrives: counted by Content-Length, or in chunks (`Transfer-Encoding: chunked`, as some
/// LocalSend apps upload), decoded here with every size line, chunk and trailer bounded, so the caller sees only the
/// bytes and their end.
public final class HTTPBody {
    private let connection: HTTPConnection
    private let chunked: Bool
    /// Bytes left: of the body (counted), or of the current chunk (chunked).
    private var left: UInt64
    private var finished: Bool
    /// Bytes read so far.
    public private(set) var count: UInt64 = 0

    /// The length announced by Content-Length; nil for a chunked body, whose length is known at its end.
    public let declaredLength: UInt64?

    /// Once a body has taken `rateGraceSeconds`, it must have come at `minimumRate` bytes a second on average: a body
    /// dripped a byte at a time held a server thread for as long as its sender liked.
    public static let minimumRate: Double = 1024
    public static var rateGraceSeconds: Double { HTTPConnection.defaultHeadSeconds }
    private let started = ContinuousClock.now

    /// Size lines and trailer lines at most this long; at most this many trailer lines.
    static let lineLimit = 4 << 10
    static let maxTrailers = 32

    init(_ connection: HTTPConnection, head: HTTPHead) throws(HTTPFailure) {
        self.connection = connection
        chunked = try head.isChunked()
        declaredLength = chunked ? nil : try head.contentLength()
        left = declaredLength ?? 0
        finished = !chunked && left == 0
    }

    /// Up to `target.count` bytes of the body; 0 once it has all been read.
    public func read(into target: UnsafeMutableRawBufferPointer) throws -> Int {
        if finished || target.count == 0 { return 0 }
        if chunked && left == 0 {
            try nextChunk()
            if finished { return 0 }
        }
        let want = Int(min(UInt64(target.count), left))
        let n = try connection.read(into: UnsafeMutableRawBufferPointer(rebasing: target[0..<want]))
        guard n > 0 else { throw HTTPFailure(400, "the stream ended inside a body") }
        left -= UInt64(n)
        count += UInt64(n)
        let seconds = (ContinuousClock.now - started).seconds
        if seconds > Self.rateGraceSeconds, Double(count) / seconds < Self.minimumRate {
            throw HTTPFailure(408, "the body came slower than \(Int(Self.minimumRate)) bytes a second")
        }
        if left == 0 {
            if chunked {
                guard try connection.readLine(limit: 2).isEmpty else {
                    throw HTTPFailure(400, "a chunk not followed by CRLF")
                }
            } else {
                finished = true
            }
        }
        return n
    }

    /// The whole body, refused (413) past `limit` bytes as soon as it passes them.
    public func readAll(limit: Int) throws -> [UInt8] {
        if let declaredLength, declaredLength > UInt64(limit) {
            throw HTTPFailure(413, "a body of \(declaredLength) bytes, over \(limit)")
        }
        var body: [UInt8] = []
        var scratch = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let n = try scratch.withUnsafeMutableBytes { try read(into: $0) }
            if n == 0 { return body }
            guard body.count + n <= limit else { throw HTTPFailure(413, "a body over \(limit) bytes") }
            body += scratch[0..<n]
        }
    }

    /// Reads and drops the rest of the body, at most `limit` bytes (more: the connection is not worth keeping).
    public func discard(limit: UInt64 = 64 << 20) throws {
        var scratch = [UInt8](repeating: 0, count: 64 << 10)
        let start = count
        while try scratch.withUnsafeMutableBytes({ try read(into: $0) }) > 0 {
            guard count - start <= limit else { throw HTTPFailure(413, "a body over \(limit) bytes") }
        }
    }

    /// Reads the next chunk's size line; the last chunk (size 0) is followed by trailers and an empty line.
    private func nextChunk() throws {
        let line = try connection.readLine(limit: Self.lineLimit)
        // The size, in hex, maybe followed by extensions (";name=value"), which mean nothing here.
        let digits = line.prefix { $0 != UInt8(ascii: ";") }.filter { $0 != UInt8(ascii: " ") && $0 != 9 }
        guard !digits.isEmpty, digits.count <= 16, let size = UInt64(String(decoding: digits, as: UTF8.self), radix: 16)
        else { throw HTTPFailure(400, "a bad chunk size") }
        if size > 0 {
            left = size
            return
        }
        for _ in 0...Self.maxTrailers {
            if try connection.readLine(limit: Self.lineLimit).isEmpty {
                finished = true
                return
            }
        }
        throw HTTPFailure(400, "more than \(Self.maxTrailers) trailer lines")
    }
}

extension HTTPConnection {
    /// The body of the request or response whose head is `head`.
    public func body(of head: HTTPHead) throws(HTTPFailure) -> HTTPBody { try HTTPBody(self, head: head) }
}
