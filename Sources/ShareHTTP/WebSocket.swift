import ShareNet
import FoundationEssentials
import ShareText
import ShareTLS

/// Why a WebSocket failed, in words that name the server by its role.
package struct WebSocketError: Error, Sendable, CustomStringConvertible {
    package let message: String
    init(_ message: String) { self.message = message }
    package var description: String { message }
}

/// A WebSocket client (RFC 6455) for a `ws://` URL, as magic-wormhole's mailbox server speaks it: text frames of
/// JSON, masked as a client must, pings answered, fragments joined. Blocking, one owner thread; every read is bounded
/// by the socket's timeout and every frame by `maxMessage`. Failures name the server by `role` ("mailbox server").
package final class WebSocket {
    private let fd: Int32
    private let role: String
    private var closed = false
    package static let maxMessage = 1 << 20

    /// Connects and performs the opening handshake; the server's accept value is checked.
    package init(url: String, role: String, timeout: Double = 30) throws(WebSocketError) {
        self.role = role
        guard let parsed = URL(string: url), parsed.scheme == "ws", let host = parsed.host else {
            throw WebSocketError("'\(url)' is not a ws:// URL (a \(role) is named ws://HOST:PORT/v1)")
        }
        let port = parsed.port ?? 80
        let path = parsed.path.isEmpty ? "/" : parsed.path
        do {
            fd = try Syscalls.connect(host: host, port: port, timeout: timeout)
        } catch {
            throw WebSocketError("cannot reach the \(role) \(host):\(port): \(error)")
        }
        Syscalls.setTimeouts(fd, seconds: timeout)
        let key = Data((0..<16).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        let request =
            "GET \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n\r\n"
        do {
            try Syscalls.writeAll(fd, Array(request.utf8))
            var lines: [String] = []
            while let line = try Syscalls.readLine(fd, limit: 8192) {
                let text = String(decoding: line, as: UTF8.self).trimmed
                if text.isEmpty { break }
                lines.append(text)
                if lines.count > 100 { break }
            }
            let expected = Data(SHA1.hash(Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8)))
                .base64EncodedString()
            guard let status = lines.first, status.split(separator: " ").dropFirst().first == "101",
                lines.contains(where: { $0.lowercased() == "sec-websocket-accept: \(expected.lowercased())" })
            else {
                throw WebSocketError("\(host):\(port) is not a \(role) (\(lines.first ?? "no answer"))")
            }
        } catch let error as WebSocketError {
            Syscalls.close(fd)
            throw error
        } catch {
            Syscalls.close(fd)
            throw WebSocketError("the \(role)'s handshake failed: \(error)")
        }
    }

    deinit { close() }

    /// How long the next reads may wait.
    package func setTimeout(_ seconds: Double) { Syscalls.setTimeouts(fd, seconds: max(0.05, seconds)) }

    package func send(_ text: String) throws(WebSocketError) {
        try sendFrame(opcode: 0x1, Array(text.utf8))
    }

    /// The next text message; nil once the server has closed the connection.
    package func receive() throws(WebSocketError) -> String? {
        var message: [UInt8] = []
        while true {
            let (fin, opcode, payload) = try readFrame()
            switch opcode {
            case 0x0, 0x1:
                message += payload
                guard message.count <= Self.maxMessage else {
                    throw WebSocketError("the \(role) sent a message over 1 MiB")
                }
                if fin { return String(decoding: message, as: UTF8.self) }
            case 0x8:
                try? sendFrame(opcode: 0x8, Array(payload.prefix(2)))
                return nil
            case 0x9:
                try sendFrame(opcode: 0xA, payload)
            case 0xA, 0x2:
                continue
            default:
                throw WebSocketError("the \(role) sent a WebSocket frame of unknown type \(opcode)")
            }
        }
    }

    package func close() {
        guard !closed else { return }
        closed = true
        try? sendFrame(opcode: 0x8, [0x03, 0xE8])
        Syscalls.close(fd)
    }

    private func sendFrame(opcode: UInt8, _ payload: [UInt8]) throws(WebSocketError) {
        var frame: [UInt8] = [0x80 | opcode]
        let mask = (0..<4).map { _ in UInt8.random(in: 0...255) }
        switch payload.count {
        case 0..<126: frame.append(0x80 | UInt8(payload.count))
        case 126..<65536: frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        default:
            frame.append(0x80 | 127)
            frame += (0..<8).reversed().map { UInt8((UInt64(payload.count) >> (UInt64($0) * 8)) & 0xFF) }
        }
        frame += mask
        frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        do {
            try Syscalls.writeAll(fd, frame)
        } catch {
            throw WebSocketError("the connection to the \(role) failed: \(error)")
        }
    }

    private func readFrame() throws(WebSocketError) -> (fin: Bool, opcode: UInt8, payload: [UInt8]) {
        do {
            let head = try Syscalls.readExactly(fd, 2)
            var length = UInt64(head[1] & 0x7F)
            if length == 126 {
                length = try Syscalls.readExactly(fd, 2).reduce(0) { $0 << 8 | UInt64($1) }
            } else if length == 127 {
                length = try Syscalls.readExactly(fd, 8).reduce(0) { $0 << 8 | UInt64($1) }
            }
            guard length <= UInt64(Self.maxMessage) else {
                throw WebSocketError("the \(role) sent a frame of \(length) bytes")
            }
            let mask = head[1] & 0x80 != 0 ? try Syscalls.readExactly(fd, 4) : nil
            var payload = length > 0 ? try Syscalls.readExactly(fd, Int(length)) : []
            if let mask { payload = payload.enumerated().map { $0.element ^ mask[$0.offset % 4] } }
            return (head[0] & 0x80 != 0, head[0] & 0x0F, payload)
        } catch let error as WebSocketError {
            throw error
        } catch {
            throw WebSocketError("the connection to the \(role) failed: \(error)")
        }
    }
}
