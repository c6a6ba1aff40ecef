internal import CShareOpenSSL

/// An error from the TLS layer: what failed, with OpenSSL's error queue drained into the message.
public struct TLSError: Error, Sendable, CustomStringConvertible, Equatable {
    public enum Kind: String, Sendable, Equatable {
        /// An OpenSSL call failed (key generation, certificate, context set-up).
        case openssl
        /// The handshake failed for another reason than trust (protocol version, cipher, garbage).
        case handshake
        /// We refused the peer: its certificate is not in the trust store.
        case peerNotTrusted
        /// The peer refused us (TLS alert after our certificate was checked).
        case rejectedByPeer
        /// No progress within the allowed time.
        case timeout
        /// The connection was closed or reset in the middle of a record or handshake.
        case connectionLost
        /// Bad key or certificate data (PEM that does not parse, wrong key type).
        case badCredentials
    }

    public let kind: Kind
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }

    /// `what` failed; OpenSSL's queued errors (oldest first) are appended and the queue is emptied.
    static func drain(_ what: String) -> TLSError { drain(.openssl, what) }

    static func drain(_ kind: Kind, _ what: String) -> TLSError {
        let queued = drainQueue()
        return TLSError(kind, queued.isEmpty ? what : "\(what): \(queued.joined(separator: "; "))")
    }

    /// Empties OpenSSL's thread-local error queue, returning readable lines.
    static func drainQueue() -> [String] {
        var lines: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            lines.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            if lines.count > 16 { break }
        }
        return lines
    }
}
