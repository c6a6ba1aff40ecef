import ShareHTTP
import FoundationEssentials
import ShareTrust
import ShareTLS
import ShareNet

/// What went wrong talking to a LocalSend device, in one sentence.
public struct LocalSendError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable { case unreachable, pinRequired, declined, busy, refused, wrongDevice, failed }
    public let kind: Kind
    public let message: String
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }
    public var description: String { message }
}

/// One LocalSend device's address, and the fingerprint its certificate must have when one is known.
public struct LocalSendAddress: Sendable, Equatable {
    public var host: String
    public var port: Int
    public var fingerprint: String?
    public init(host: String, port: Int, fingerprint: String?) {
        self.host = host
        self.port = port
        self.fingerprint = fingerprint
    }
    var hostHeader: String { host.includes(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// HTTPS requests to LocalSend devices, one connection each, with this device's LocalSend certificate (mutual TLS,
/// as LocalSend 2.2 does) and the peer's certificate pinned to its fingerprint when one is known: a mismatch ends
/// the connection before a byte of the request is sent. Plain HTTP is never spoken.
public final class LocalSendClient: Sendable {
    let context: TLSContext

    public init(identity: TLSIdentity) throws {
        // A device that answers before it has read the whole body (a refusal) closes the connection under a write:
        // that is an answer to read, not a signal that ends the process.
        Syscalls.ignoreSIGPIPE()
        context = try TLSContext(identity: identity, role: .client, verifier: { _ in true }, minimumTLS12: true)
    }

    /// A connection to `address`, its certificate checked; returns the peer's fingerprint with it.
    public func connect(_ address: LocalSendAddress, timeout: Double) throws -> (HTTPConnection, String) {
        let fd: Int32
        do {
            fd = try Syscalls.connect(host: address.host, port: address.port, timeout: min(timeout, 10))
        } catch let error as Syscalls.SocketError {
            throw LocalSendError(.unreachable, "cannot reach \(address.hostHeader): \(error.message)")
        }
        Syscalls.setTimeouts(fd, seconds: timeout)
        let tls = try TLSConnection(context: context, fileDescriptor: fd)
        do {
            try tls.handshake()
        } catch {
            throw LocalSendError(
                .unreachable,
                "no TLS with \(address.hostHeader) (it may speak LocalSend without encryption, which share does not): \(error)"
            )
        }
        guard let der = tls.peerCertificateDER else {
            throw LocalSendError(.wrongDevice, "\(address.hostHeader) showed no certificate")
        }
        let fingerprint = LocalSend.fingerprint(ofCertificateDER: der)
        if let expected = address.fingerprint, expected.uppercased() != fingerprint {
            tls.shutdown()
            throw LocalSendError(
                .wrongDevice,
                "\(address.hostHeader) is not the device seen before (its certificate's fingerprint changed); nothing was sent"
            )
        }
        return (HTTPConnection(tls, bufferSize: 64 << 10), fingerprint)
    }

    /// POSTs `json` to `path`; returns the status, the body (at most 1 MiB) and the peer's fingerprint.
    public func post(_ address: LocalSendAddress, _ target: String, json: [UInt8], timeout: Double = 10) throws -> (
        status: Int, body: [UInt8], fingerprint: String
    ) {
        let (http, fingerprint) = try connect(address, timeout: timeout)
        defer { http.tls.shutdown() }
        try http.writeRequest(
            "POST", target, host: address.hostHeader,
            headers: [("Content-Type", "application/json"), ("Connection", "close")], length: UInt64(json.count))
        try http.tls.write(json)
        let (status, body) = try Self.response(http)
        return (status, body, fingerprint)
    }

    /// POSTs a body of `length` bytes that `write` streams; returns the status.
    public func upload(
        _ address: LocalSendAddress, _ target: String, length: UInt64, timeout: Double = 60,
        write: (HTTPConnection) throws -> Void
    ) throws -> Int {
        let (http, _) = try connect(address, timeout: timeout)
        defer { http.tls.shutdown() }
        try http.writeRequest(
            "POST", target, host: address.hostHeader,
            headers: [("Content-Type", "application/octet-stream"), ("Connection", "close")], length: length)
        try write(http)
        return try Self.response(http).0
    }

    static func response(_ http: HTTPConnection) throws -> (Int, [UInt8]) {
        guard let head = try http.readHead(request: false) else {
            throw LocalSendError(.failed, "the device closed the connection without answering")
        }
        let body = try http.readBody(length: try head.contentLength(), limit: 1 << 20)
        return (head.status, body)
    }
}
