import ShareNet
import FoundationEssentials

/// The little HTTP/1.1 a Global Discovery client needs: one request per connection (`Connection: close`), and a
/// response read with limits (headers at most 16 KiB, body at most `maxBody`), by `Content-Length`, chunked, or to
/// the end of the stream. Pure: bytes in, a response out.
public struct HTTPResponse: Sendable, Equatable {
    public var status: Int
    /// Header names in lower case.
    public var headers: [String: String]
    public var body: [UInt8]

    public static let maxHeader = 16 << 10
    public static let maxBody = 256 << 10

    /// A request's bytes.
    public static func request(
        method: String, path: String, host: String, body: [UInt8]? = nil, contentType: String = "application/json"
    ) -> [UInt8] {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host)\r\nUser-Agent: share\r\nAccept: application/json\r\n"
        head += "Connection: close\r\n"
        if let body { head += "Content-Type: \(contentType)\r\nContent-Length: \(body.count)\r\n" }
        head += "\r\n"
        return Array(head.utf8) + (body ?? [])
    }

    /// Parses a whole response, `complete` saying whether the stream has ended (a body without a length runs to the
    /// end). Nil while more bytes are needed.
    public static func parse(_ bytes: [UInt8], complete: Bool) throws(HTTPError) -> HTTPResponse? {
        guard let headerEnd = find([13, 10, 13, 10], in: bytes) else {
            if bytes.count > maxHeader { throw HTTPError("the server's headers are over \(maxHeader) bytes") }
            if complete { throw HTTPError("the server closed the connection before its headers ended") }
            return nil
        }
        let lines = String(decoding: bytes[0..<headerEnd], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ", maxSplits: 2)
        guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/1."), let status = Int(statusParts[1]),
            (100...599).contains(status)
        else { throw HTTPError("not an HTTP response: \(lines[0].prefix(80))") }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingSpaces
        }
        let rest = Array(bytes[(headerEnd + 4)...])
        if let lengthText = headers["content-length"] {
            guard let length = Int(lengthText), length >= 0 else { throw HTTPError("a bad Content-Length") }
            guard length <= maxBody else { throw HTTPError("a body of \(length) bytes, over \(maxBody)") }
            if rest.count < length {
                if complete { throw HTTPError("the server closed the connection in the middle of its answer") }
                return nil
            }
            return HTTPResponse(status: status, headers: headers, body: Array(rest[0..<length]))
        }
        if headers["transfer-encoding"]?.lowercased().includes("chunked") == true {
            guard let body = try dechunk(rest) else {
                if complete { throw HTTPError("the server closed the connection in the middle of its answer") }
                return nil
            }
            return HTTPResponse(status: status, headers: headers, body: body)
        }
        if status == 204 || status == 304 || status < 200 {
            return HTTPResponse(status: status, headers: headers, body: [])
        }
        guard rest.count <= maxBody else { throw HTTPError("a body over \(maxBody) bytes") }
        return complete ? HTTPResponse(status: status, headers: headers, body: rest) : nil
    }

    /// A chunked body, or nil while incomplete.
    static func dechunk(_ bytes: [UInt8]) throws(HTTPError) -> [UInt8]? {
        var body: [UInt8] = []
        var offset = 0
        while true {
            guard let lineEnd = find([13, 10], in: bytes, from: offset) else { return nil }
            let sizeText = String(decoding: bytes[offset..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingSpaces, radix: 16), size >= 0 else {
                throw HTTPError("a bad chunk size")
            }
            offset = lineEnd + 2
            if size == 0 { return body }
            guard body.count + size <= maxBody else { throw HTTPError("a body over \(maxBody) bytes") }
            guard offset + size + 2 <= bytes.count else { return nil }
            body += bytes[offset..<(offset + size)]
            offset += size + 2
        }
    }

    static func find(_ needle: [UInt8], in bytes: [UInt8], from start: Int = 0) -> Int? {
        guard bytes.count >= needle.count else { return nil }
        var index = start
        while index + needle.count <= bytes.count {
            if bytes[index] == needle[0], Array(bytes[index..<(index + needle.count)]) == needle { return index }
            index += 1
        }
        return nil
    }
}

/// A server's answer that is not the HTTP this client reads.
public struct HTTPError: Error, Sendable, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension StringProtocol {
    var trimmingSpaces: String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
