internal import CShareOpenSSL
import FoundationEssentials
import Glibc

/// One TLS connection over a connected socket; one owner of one `SSL`. Blocking I/O: use it from one dedicated
/// thread (never from Swift's cooperative pool). Timeouts come from the socket's receive/send timeouts.
public final class TLSConnection: @unchecked Sendable {  // confined to the thread that drives it
    /// Per-connection facts recorded by the verify callback.
    final class State: @unchecked Sendable {  // written only during the handshake, on the connection's thread
        var peerID: DeviceID?
        var peerCertificateDER: [UInt8]?
        var refusedPeer = false
    }

    private let ssl: OpaquePointer
    private let state = State()
    public let context: TLSContext
    public let fileDescriptor: Int32
    private var isShutDown = false

    /// Takes ownership of `fileDescriptor`: it is closed when the connection is.
    public init(context: TLSContext, fileDescriptor: Int32) throws {
        guard let ssl = SSL_new(context.pointer) else {
            Glibc.close(fileDescriptor)
            throw TLSError.drain("SSL_new")
        }
        self.ssl = ssl
        self.context = context
        self.fileDescriptor = fileDescriptor
        guard cshare_SSL_set_app_data(ssl, Unmanaged.passUnretained(state).toOpaque()) == 1,
            SSL_set_fd(ssl, fileDescriptor) == 1
        else { throw TLSError.drain("SSL_set_fd") }
    }

    deinit {
        SSL_free(ssl)
        Glibc.close(fileDescriptor)
    }

    /// The verified peer's device ID (after the handshake, or after a refusal, the ID that was refused).
    public var peerID: DeviceID? { state.peerID }
    /// The peer's certificate in DER, once seen.
    public var peerCertificateDER: [UInt8]? { state.peerCertificateDER }

    /// `length` bytes the two ends of this very connection derive alike (RFC 8446's exporter): binds a value to
    /// the connection, so it cannot be replayed on another.
    public func exportKeyingMaterial(label: String, length: Int) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: length)
        let labelBytes = Array(label.utf8)
        let ok = labelBytes.withUnsafeBufferPointer { labelPointer in
            labelPointer.withMemoryRebound(to: CChar.self) {
                SSL_export_keying_material(ssl, &out, length, $0.baseAddress, labelBytes.count, nil, 0, 0)
            }
        }
        guard ok == 1 else { throw TLSError.drain("SSL_export_keying_material") }
        return out
    }

    /// The peer's certificate, once seen.
    public var peerCertificate: Certificate? {
        state.peerCertificateDER.flatMap { try? Certificate(der: $0) }
    }

    /// The negotiated protocol, e.g. `TLSv1.3`.
    public var protocolVersion: String { String(cString: SSL_get_version(ssl)) }
    /// The application protocol the server chose (ALPN), if any.
    public var selectedProtocol: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// The negotiated cipher suite.
    public var cipher: String {
        guard let cipher = SSL_get_current_cipher(ssl) else { return "none" }
        return String(cString: SSL_CIPHER_get_name(cipher))
    }

    /// Runs the handshake for the context's role.
    public func handshake() throws {
        ERR_clear_error()
        let result = context.role == .server ? SSL_accept(ssl) : SSL_connect(ssl)
        if result == 1 { return }
        throw classify(result, during: "handshake")
    }

    /// Reads up to `count` bytes into `buffer` at `offset`. Returns 0 at a clean end of stream (close_notify).
    public func read(into buffer: inout [UInt8], offset: Int = 0, count: Int) throws -> Int {
        precondition(offset >= 0 && count > 0 && offset + count <= buffer.count)
        ERR_clear_error()
        let result = buffer.withUnsafeMutableBytes { raw in
            SSL_read(ssl, raw.baseAddress! + offset, Int32(clamping: count))
        }
        if result > 0 { return Int(result) }
        let error = SSL_get_error(ssl, result)
        if error == SSL_ERROR_ZERO_RETURN { return 0 }
        throw classify(result, during: "read")
    }

    /// Reads up to `buffer.count` bytes. Returns 0 at a clean end of stream (close_notify).
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return 0 }
        ERR_clear_error()
        let result = SSL_read(ssl, base, Int32(clamping: buffer.count))
        if result > 0 { return Int(result) }
        let error = SSL_get_error(ssl, result)
        if error == SSL_ERROR_ZERO_RETURN { return 0 }
        throw classify(result, during: "read")
    }

    /// Writes all of `bytes`.
    public func write(_ bytes: some ContiguousBytes) throws {
        try bytes.withUnsafeBytes { raw in try write(raw) }
    }

    /// Writes all of `raw`.
    public func write(_ raw: UnsafeRawBufferPointer) throws {
        guard let base = raw.baseAddress else { return }
        var done = 0
        while done < raw.count {
            ERR_clear_error()
            let result = SSL_write(ssl, base + done, Int32(clamping: raw.count - done))
            if result > 0 {
                done += Int(result)
                continue
            }
            throw classify(result, during: "write")
        }
    }

    /// Whether OpenSSL holds bytes not handed out yet: decrypted, or (with read-ahead) whole records already taken
    /// from the socket. Either way the socket alone would not say so.
    public var hasBufferedData: Bool { SSL_has_pending(ssl) == 1 }

    /// Sends close_notify (once) and stops; the socket is closed when the connection is released.
    public func shutdown() {
        guard !isShutDown else { return }
        isShutDown = true
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    /// Turns a failed SSL call into a TLSError that says what happened.
    private func classify(_ result: Int32, during what: String) -> TLSError {
        let sslError = SSL_get_error(ssl, result)
        let savedErrno = errno
        let (queue, reasons) = TLSError.drainQueueWithReasons()
        let joined = queue.joined(separator: "; ")
        if state.refusedPeer, let id = state.peerID {
            return TLSError(.peerNotTrusted, "device \(id) is not trusted; to trust it run: share trust add \(id)")
        }
        // By reason code, not by message: a process that skipped loading OpenSSL's message tables (the watch) is
        // classified the same way.
        let refusals: Set<Int32> = [
            SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN, SSL_R_SSLV3_ALERT_BAD_CERTIFICATE,
            SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED, SSL_R_TLSV1_ALERT_UNKNOWN_CA,
            SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED, SSL_R_TLSV1_ALERT_ACCESS_DENIED,
        ]
        if !refusals.isDisjoint(with: reasons) {
            return TLSError(.rejectedByPeer, "the peer refused this device's certificate (\(joined))")
        }
        if reasons.contains(SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) {
            return TLSError(.handshake, "the peer presented no certificate; every share device must have one")
        }
        switch sslError {
        case SSL_ERROR_SYSCALL where savedErrno == EAGAIN || savedErrno == EWOULDBLOCK:
            return TLSError(.timeout, "timed out during \(what)")
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return TLSError(.timeout, "timed out during \(what)")
        case SSL_ERROR_SYSCALL:
            return TLSError(.connectionLost, "\(what) failed: \(Self.plainReason(errno: savedErrno))")
        case SSL_ERROR_ZERO_RETURN:
            return TLSError(.connectionLost, "the other device closed the connection during \(what)")
        case _ where reasons.contains(SSL_R_UNEXPECTED_EOF_WHILE_READING):
            // OpenSSL's "unexpected eof while reading": the TCP connection ended without TLS's close alert.
            let kind: TLSError.Kind = what == "handshake" ? .handshake : .connectionLost
            return TLSError(kind, "\(what) failed: the other device closed the connection")
        default:
            let kind: TLSError.Kind = what == "handshake" ? .handshake : .connectionLost
            return TLSError(kind, "\(what) failed: \(joined.isEmpty ? "TLS error \(sslError)" : joined)")
        }
    }

    /// A socket error as a person would say it.
    static func plainReason(errno code: Int32) -> String {
        switch code {
        case 0, EPIPE: return "the other device closed the connection"
        case ECONNRESET: return "the other device dropped the connection"
        case ETIMEDOUT: return "the network stopped answering"
        case EHOSTUNREACH, ENETUNREACH: return "the network cannot reach the other device"
        case ENETDOWN: return "this device's network is down"
        default: return String(cString: strerror(code))
        }
    }
}
