/// Syncthing's Relay Protocol v1 messages (docs/PROTOCOL.md, "Relays"): a 12-byte header (magic `0x9E79BC40`,
/// type, length, all big endian) and an XDR body. Pure encoding and decoding; every length a relay sends is checked
/// against `maxBody` before anything is kept.
public enum RelayMessage: Sendable, Equatable {
    case ping
    case pong
    /// Permanent mode: stay reachable through this relay.
    case joinRelayRequest
    /// Session mode: the first and only message, naming the session.
    case joinSessionRequest(key: [UInt8])
    /// The relay's answer: 0 success, 1 not found, 2 already connected, others errors.
    case response(code: Int32, message: String)
    /// Temporary mode: ask the relay for a session with this device.
    case connectRequest(id: [UInt8])
    /// A session is ready: who is on the other side, the key to join with, where to join, and which end of TLS
    /// this side takes.
    case sessionInvitation(SessionInvitation)

    public static let magic: UInt32 = 0x9E79_BC40
    public static let headerSize = 12
    /// Largest body accepted from a relay: an invitation is 3 opaques of at most 32 bytes plus 8.
    public static let maxBody = 1024

    public var type: Int32 {
        switch self {
        case .ping: return 0
        case .pong: return 1
        case .joinRelayRequest: return 2
        case .joinSessionRequest: return 3
        case .response: return 4
        case .connectRequest: return 5
        case .sessionInvitation: return 6
        }
    }

    /// The message on the wire: header and body.
    public func encoded() -> [UInt8] {
        var body = XDRWriter()
        switch self {
        case .ping, .pong, .joinRelayRequest:
            break
        case .joinSessionRequest(let key):
            body.opaque(key)
        case .response(let code, let message):
            body.int(code)
            body.opaque(Array(message.utf8))
        case .connectRequest(let id):
            body.opaque(id)
        case .sessionInvitation(let invitation):
            body.opaque(invitation.from)
            body.opaque(invitation.key)
            body.opaque(invitation.address)
            body.uint(UInt32(invitation.port))
            body.uint(invitation.serverSocket ? 1 : 0)
        }
        var header = XDRWriter()
        header.uint(Self.magic)
        header.int(type)
        header.uint(UInt32(body.bytes.count))
        return header.bytes + body.bytes
    }

    /// Reads a header: the message type and body length, or why the bytes are not a relay message.
    public static func parseHeader(_ bytes: [UInt8]) throws(RelayProtocolError) -> (type: Int32, length: Int) {
        guard bytes.count == headerSize else { throw RelayProtocolError("a short header") }
        var reader = XDRReader(bytes)
        let magic = try reader.uint()
        guard magic == Self.magic else { throw RelayProtocolError("not a relay (bad magic)") }
        let type = Int32(bitPattern: try reader.uint())
        let length = Int(try reader.uint())
        guard length <= maxBody else { throw RelayProtocolError("a message of \(length) bytes, over \(maxBody)") }
        return (type, length)
    }

    /// Decodes a body of `type`.
    public static func decode(type: Int32, body: [UInt8]) throws(RelayProtocolError) -> RelayMessage {
        var reader = XDRReader(body)
        let message: RelayMessage
        switch type {
        case 0: message = .ping
        case 1: message = .pong
        case 2: message = .joinRelayRequest
        case 3: message = .joinSessionRequest(key: try reader.opaque(max: 32))
        case 4:
            let code = Int32(bitPattern: try reader.uint())
            let text = try reader.opaque(max: 256)
            message = .response(code: code, message: String(decoding: text, as: UTF8.self))
        case 5: message = .connectRequest(id: try reader.opaque(max: 32))
        case 6:
            let from = try reader.opaque(max: 32)
            let key = try reader.opaque(max: 32)
            let address = try reader.opaque(max: 32)
            let port = try reader.uint()
            let server = try reader.uint()
            guard port <= 65535 else { throw RelayProtocolError("an invitation to port \(port)") }
            message = .sessionInvitation(
                SessionInvitation(from: from, key: key, address: address, port: Int(port), serverSocket: server != 0))
        default:
            throw RelayProtocolError("an unknown message type \(type)")
        }
        return message
    }
}

/// A relay's invitation to a session.
public struct SessionInvitation: Sendable, Equatable {
    /// The device ID (32 bytes) on the other side, as the relay derived it from that device's certificate.
    public var from: [UInt8]
    public var key: [UInt8]
    /// Raw IP address bytes (4 or 16); empty or unspecified means the relay's own address.
    public var address: [UInt8]
    public var port: Int
    /// Whether this side is the TLS server inside the session.
    public var serverSocket: Bool

    public init(from: [UInt8], key: [UInt8], address: [UInt8], port: Int, serverSocket: Bool) {
        self.from = from
        self.key = key
        self.address = address
        self.port = port
        self.serverSocket = serverSocket
    }

    /// The address to join at as text, or nil when the relay's own address is meant.
    public var host: String? {
        let bytes =
            address.count == 16 && address[0..<12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]
            ? Array(address[12...]) : address
        if bytes.isEmpty || bytes.allSatisfy({ $0 == 0 }) { return nil }
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        guard bytes.count == 16 else { return nil }
        var groups: [String] = []
        for index in stride(from: 0, to: 16, by: 2) {
            groups.append(String(UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1]), radix: 16))
        }
        return groups.joined(separator: ":")
    }
}

/// A relay said something that is not Relay Protocol v1.
public struct RelayProtocolError: Error, Sendable, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// XDR as the relay protocol uses it: big-endian 32-bit integers, opaques with a length and padding to 4 bytes.
struct XDRWriter {
    var bytes: [UInt8] = []

    mutating func uint(_ value: UInt32) {
        bytes += [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }

    mutating func int(_ value: Int32) { uint(UInt32(bitPattern: value)) }

    mutating func opaque(_ data: [UInt8]) {
        uint(UInt32(data.count))
        bytes += data
        bytes += [UInt8](repeating: 0, count: (4 - data.count % 4) % 4)
    }
}

struct XDRReader {
    let bytes: [UInt8]
    var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func uint() throws(RelayProtocolError) -> UInt32 {
        guard offset + 4 <= bytes.count else { throw RelayProtocolError("a message cut short") }
        defer { offset += 4 }
        return UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8
            | UInt32(bytes[offset + 3])
    }

    mutating func opaque(max: Int) throws(RelayProtocolError) -> [UInt8] {
        let length = Int(try uint())
        guard length <= max else { throw RelayProtocolError("a field of \(length) bytes, over \(max)") }
        let padded = length + (4 - length % 4) % 4
        guard offset + padded <= bytes.count else { throw RelayProtocolError("a message cut short") }
        defer { offset += padded }
        return Array(bytes[offset..<(offset + length)])
    }
}
