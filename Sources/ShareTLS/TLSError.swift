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
    static func drainQueue() -> [String] { drainQueueWithReasons().lines }

    /// Empties OpenSSL's thread-local error queue, returning readable lines and each error's reason code.
    static func drainQueueWithReasons() -> (lines: [String], reasons: Set<Int32>) {
        var lines: [String] = []
        var reasons: Set<Int32> = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            reasons.insert(ERR_GET_REASON(code))
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            lines.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            if lines.count > 16 { break }
        }
        return (lines, reasons)
    }
}

/// Process-wide OpenSSL set-up.
public enum TLSLibrary {
    /// Initializes OpenSSL without reading the system's `openssl.cnf` and without loading its error-message tables.
    /// A process short of memory (the watch) calls this first, before anything else touches OpenSSL: it saves about
    /// 1 MiB of resident memory. Our contexts set every protocol and cipher choice themselves, so the configuration
    /// file changes nothing for them; errors read `lib(20)::reason(1046)` instead of their words, and are classified
    /// by reason code all the same.
    public static func initializeLean() {
        _ = OPENSSL_init_ssl(
            UInt64(
                OPENSSL_INIT_NO_LOAD_CONFIG | OPENSSL_INIT_NO_LOAD_SSL_STRINGS | OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS),
            nil)
    }
}

extension TLSLibrary {
    /// Frees what OpenSSL keeps for the calling thread (its random generators, its error queue). A thread that ran
    /// TLS calls this as its last step, before it tells anyone it is done: OpenSSL would otherwise free them only in
    /// the thread's exit handlers, which can still be running when the process exits.
    public static func threadFinished() {
        OPENSSL_thread_stop()
    }
}
