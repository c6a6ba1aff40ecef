import ShareProtocol
import ShareNet
import FoundationEssentials
import ShareText
import Glibc
import ShareTLS

/// What an HTTP connection is carried on: TLS (LocalSend) or a plain loopback socket (the local web page).
public protocol HTTPTransport: AnyObject {
    /// Up to `buffer.count` bytes; 0 at the end of the stream.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int
    /// All of `raw`.
    func write(_ raw: UnsafeRawBufferPointer) throws
}

extension TLSConnection: HTTPTransport {}

/// A plain TCP socket, for HTTP on loopback only. The socket is the caller's to close.
public final class PlainSocket: HTTPTransport {
    public let fd: Int32
    public init(fd: Int32) { self.fd = fd }

    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return 0 }
        while true {
            let n = Glibc.read(fd, base, buffer.count)
            if n >= 0 { return n }
            if errno == EINTR { continue }
            throw Syscalls.failure("read", errno)
        }
    }

    public func write(_ raw: UnsafeRawBufferPointer) throws { try Syscalls.writeAll(fd, raw) }
}

/// An HTTP status to answer with, and why (for the log).
public struct HTTPFailure: Error, Sendable, CustomStringConvertible {
    public let status: Int
    public let message: String
    public init(_ status: Int, _ message: String) {
        self.status = status
        self.message = message
    }
    public var description: String { "HTTP \(status): \(message)" }
}

/// The head of an HTTP/1.1 request or response.
public struct HTTPHead: Sendable {
    /// `GET`, `POST`… (a request), or empty (a response).
    public var method = ""
    /// The path without its query (a request).
    public var path = ""
    /// The query's parameters, percent-decoded (a request).
    public var query: [String: String] = [:]
    /// The status (a response).
    public var status = 0
    /// Header names in lower case.
    public var headers: [String: String] = [:]

    /// Whether the body comes in chunks (`Transfer-Encoding: chunked`) rather than counted by Content-Length.
    public func isChunked() throws(HTTPFailure) -> Bool {
        guard let encoding = headers["transfer-encoding"]?.lowercased(), encoding != "identity" else { return false }
        // Anything but plain chunking (gzip, two codings) is not spoken here; a length beside it would let two
        // readers of the same bytes disagree on where the body ends.
        guard encoding == "chunked" else { throw HTTPFailure(501, "a body in \(encoding) encoding") }
        guard headers["content-length"] == nil else {
            throw HTTPFailure(400, "both Transfer-Encoding and Content-Length")
        }
        return true
    }

    /// The body's length: 0 without Content-Length. A chunked body is refused (411) here; routes that take one read
    /// it through `HTTPConnection.body(of:)`.
    public func contentLength() throws(HTTPFailure) -> UInt64 {
        if try isChunked() { throw HTTPFailure(411, "a body without Content-Length") }
        guard let text = headers["content-length"] else { return 0 }
        guard let length = UInt64(text.trimmedSpaces) else {
            throw HTTPFailure(400, "a bad Content-Length")
        }
        return length
    }

    static func parse(_ bytes: [UInt8], request: Bool) throws(HTTPFailure) -> HTTPHead {
        // Header bytes outside ASCII are read as Latin-1, as HTTP/1.1 allows.
        let text = String(bytes.map { Character(Unicode.Scalar($0)) })
        var lines = text.components(separatedBy: "\r\n")
        guard !lines.isEmpty else { throw HTTPFailure(400, "an empty request") }
        let first = lines.removeFirst().split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        var head = HTTPHead()
        if request {
            guard first.count == 3, first[2].hasPrefix("HTTP/1."), !first[0].isEmpty else {
                throw HTTPFailure(400, "a malformed request line")
            }
            head.method = String(first[0])
            let target = first[1]
            let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
            head.path = String(parts[0])
            if parts.count == 2 {
                for pair in parts[1].split(separator: "&") {
                    let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                    let key = String(kv[0]).percentDecoded ?? String(kv[0])
                    let value = kv.count == 2 ? (String(kv[1]).percentDecoded ?? String(kv[1])) : ""
                    if head.query[key] == nil { head.query[key] = value }
                }
            }
        } else {
            guard first.count >= 2, first[0].hasPrefix("HTTP/1."), let status = Int(first[1]) else {
                throw HTTPFailure(502, "a malformed status line")
            }
            head.status = status
        }
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { throw HTTPFailure(400, "a malformed header line") }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmedSpaces
            if let earlier = head.headers[name] {
                // Two different lengths are a smuggling attempt, not a message.
                guard name != "content-length" || earlier == value else {
                    throw HTTPFailure(400, "two Content-Length headers")
                }
                head.headers[name] = earlier + ", " + value
            } else {
                head.headers[name] = value
            }
        }
        return head
    }
}

/// HTTP/1.1 over one connection (TLS, or a plain loopback socket): heads read with a size limit, bodies read as
/// counted bytes.
public final class HTTPConnection: @unchecked Sendable {  // confined to the thread that drives it
    public let transport: any HTTPTransport
    private let secure: TLSConnection?
    private let socket: Int32
    private var buffer: [UInt8]
    private var start = 0
    private var end = 0

    /// Seconds a whole request head may take once its first byte came (a head trickled a few bytes at a time was
    /// never cut by the per-read idle timeout); `SHARE_TEST_HTTP_HEAD_SECONDS` shortens it for tests.
    public static let defaultHeadSeconds: Double =
        ProcessInfo.processInfo.environment["SHARE_TEST_HTTP_HEAD_SECONDS"].flatMap(Double.init) ?? 10
    /// This connection's head deadline (its server's limit).
    public var headSeconds: Double = HTTPConnection.defaultHeadSeconds
    /// Seconds a connection may wait between reads (the servers' idle timeout), restored after a head.
    public var idleSeconds: Double = 30

    public init(_ tls: TLSConnection, bufferSize: Int = 256 << 10) {
        transport = tls
        secure = tls
        socket = tls.fileDescriptor
        buffer = [UInt8](repeating: 0, count: bufferSize)
    }

    public init(plain socket: PlainSocket, bufferSize: Int = 64 << 10) {
        transport = socket
        secure = nil
        self.socket = socket.fd
        buffer = [UInt8](repeating: 0, count: bufferSize)
    }

    /// The TLS connection under a connection made with one.
    public var tls: TLSConnection {
        guard let secure else { preconditionFailure("a plain HTTP connection has no TLS") }
        return secure
    }

    /// Whether bytes already read wait in the buffer.
    public var hasBufferedBytes: Bool { start < end }

    /// Reads more into the buffer; false at the end of the stream.
    private func fill() throws -> Bool {
        if start == end {
            start = 0
            end = 0
        } else if end == buffer.count {
            buffer.replaceSubrange(0..<(end - start), with: buffer[start..<end])
            end -= start
            start = 0
        }
        let n = try buffer.withUnsafeMutableBytes {
            try transport.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[end...]))
        }
        end += n
        return n > 0
    }

    /// The next head, or nil when the stream ends cleanly before one starts. A head over `limit` bytes is a 431; one
    /// not whole within `headSeconds` of its first byte, a 408 (each read waits only what is left of that time).
    public func readHead(request: Bool, limit: Int = 16 << 10) throws -> HTTPHead? {
        // Bytes after `start` already searched: `fill` may move the buffered bytes, never drop them.
        var searched = 0
        var deadline: ContinuousClock.Instant? = start < end ? .now + .seconds(headSeconds) : nil
        defer { if deadline != nil { Syscalls.setTimeouts(socket, seconds: idleSeconds) } }
        while true {
            var index = start + max(0, searched - 3)
            while index + 3 < end {
                if buffer[index] == 13, buffer[index + 1] == 10, buffer[index + 2] == 13, buffer[index + 3] == 10 {
                    let bytes = Array(buffer[start..<index])
                    start = index + 4
                    return try HTTPHead.parse(bytes, request: request)
                }
                index += 1
            }
            searched = end - start
            if end - start > limit { throw HTTPFailure(431, "a head over \(limit) bytes") }
            let hadBytes = end > start
            if let deadline {
                let left = deadline - .now
                guard left > .zero else { throw HTTPFailure(408, "the request head took over \(headSeconds) s") }
                Syscalls.setTimeouts(socket, seconds: max(0.001, left.seconds))
            }
            let filled: Bool
            do {
                filled = try fill()
            } catch let error as Syscalls.SocketError where deadline != nil && error.isTimeout {
                throw HTTPFailure(408, "the request head took over \(headSeconds) s")
            } catch let error as TLSError where deadline != nil && error.kind == .timeout {
                throw HTTPFailure(408, "the request head took over \(headSeconds) s")
            }
            guard filled else {
                if hadBytes { throw HTTPFailure(400, "the stream ended inside a head") }
                return nil
            }
            if deadline == nil { deadline = .now + .seconds(headSeconds) }
        }
    }

    /// A line ending in CRLF (without it), at most `limit` bytes: a chunked body's size lines and trailers.
    func readLine(limit: Int) throws -> [UInt8] {
        var searched = 0
        while true {
            var index = start + max(0, searched - 1)
            while index + 1 < end {
                if buffer[index] == 13, buffer[index + 1] == 10 {
                    let line = Array(buffer[start..<index])
                    start = index + 2
                    return line
                }
                index += 1
            }
            searched = end - start
            if end - start > limit { throw HTTPFailure(400, "a chunk line over \(limit) bytes") }
            guard try fill() else { throw HTTPFailure(400, "the stream ended inside a chunked body") }
        }
    }

    /// Up to `into.count` bytes of a body (buffered bytes first); 0 at the end of the stream.
    public func read(into target: UnsafeMutableRawBufferPointer) throws -> Int {
        if start < end {
            let n = min(target.count, end - start)
            buffer.withUnsafeBytes { target.baseAddress!.copyMemory(from: $0.baseAddress! + start, byteCount: n) }
            start += n
            return n
        }
        return try transport.read(into: target)
    }

    /// A whole body of `length` bytes, refused (413) over `limit`.
    public func readBody(length: UInt64, limit: Int) throws -> [UInt8] {
        guard length <= UInt64(limit) else { throw HTTPFailure(413, "a body of \(length) bytes, over \(limit)") }
        var body = [UInt8](repeating: 0, count: Int(length))
        var filled = 0
        while filled < body.count {
            let n = try body.withUnsafeMutableBytes {
                try read(into: UnsafeMutableRawBufferPointer(rebasing: $0[filled...]))
            }
            guard n > 0 else { throw HTTPFailure(400, "the stream ended inside a body") }
            filled += n
        }
        return body
    }

    /// Reads and drops `length` bytes (a body not wanted, so the connection can carry the next request).
    public func discard(_ length: UInt64) throws {
        var left = length
        var scratch = [UInt8](repeating: 0, count: 64 << 10)
        while left > 0 {
            let n = try scratch.withUnsafeMutableBytes {
                try read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<Int(min(UInt64($0.count), left))]))
            }
            guard n > 0 else { return }
            left -= UInt64(n)
        }
    }

    /// Writes a request head (`Host`, `Content-Length` and the given headers).
    public func writeRequest(
        _ method: String, _ target: String, host: String, headers: [(String, String)], length: UInt64
    )
        throws
    {
        var text = "\(method) \(target) HTTP/1.1\r\nHost: \(host)\r\nContent-Length: \(length)\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        try write(Array(text.utf8))
    }

    /// Writes a whole response.
    public func writeResponse(_ status: Int, json: [UInt8]? = nil, close: Bool = false) throws {
        var text = "HTTP/1.1 \(status) \(Self.reason(status))\r\nContent-Length: \(json?.count ?? 0)\r\n"
        if json != nil { text += "Content-Type: application/json\r\n" }
        if close { text += "Connection: close\r\n" }
        text += "\r\n"
        try write(Array(text.utf8) + (json ?? []))
    }

    /// Writes a response's head: the status, `Content-Length` when the length is known, the given headers.
    public func writeHead(_ status: Int, headers: [(String, String)], length: UInt64?, close: Bool = false) throws {
        var text = "HTTP/1.1 \(status) \(Self.reason(status))\r\n"
        if let length { text += "Content-Length: \(length)\r\n" }
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if close { text += "Connection: close\r\n" }
        try write(Array((text + "\r\n").utf8))
    }

    /// Writes a whole response with the given headers (Content-Length is added).
    public func writeResponse(_ status: Int, headers: [(String, String)], body: [UInt8], close: Bool = false) throws {
        try writeHead(status, headers: headers, length: UInt64(body.count), close: close)
        try write(body)
    }

    public func write(_ bytes: UnsafeRawBufferPointer) throws { try transport.write(bytes) }

    public func write(_ bytes: [UInt8]) throws { try bytes.withUnsafeBytes { try transport.write($0) } }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 204: return "No Content"
        case 303: return "See Other"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 409: return "Conflict"
        case 411: return "Length Required"
        case 413: return "Content Too Large"
        case 422: return "Unprocessable Content"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 503: return "Service Unavailable"
        case 507: return "Insufficient Storage"
        default: return "Status"
        }
    }
}
