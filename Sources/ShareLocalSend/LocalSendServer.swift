import ShareHTTP
import FoundationEssentials
import Glibc
import Logging
import ShareTrust
import ShareTLS
import ShareNet

/// Who sent a request: its address, and the fingerprint of the certificate it showed (nil: none, as LocalSend
/// clients before 2.2 do). Only that fingerprint proves anything; the one in a JSON body is a claim.
public struct LocalSendCaller: Sendable {
    public var host: String
    public var certificateFingerprint: String?
}

/// Answers one request. Returns whether the connection may carry another (false: close it).
public typealias LocalSendRoute = @Sendable (HTTPHead, HTTPConnection, LocalSendCaller) throws -> Bool

/// LocalSend's HTTPS server: accepts on one port, a thread per connection, TLS with this device's LocalSend
/// certificate (a client certificate asked for, not required). Connections are counted per address and in all
/// (beyond either the new one is closed at once), every read has the idle timeout, and a handshake that does not
/// finish in `handshakeTimeout` is cut: slow clients hold at most their own share.
public final class LocalSendServer: Sendable {
    static let log = Log.logger("share.localsend")
    public struct Limits: Sendable {
        public var connections = 96
        public var perAddress = 12
        public var idleTimeout = 30.0
        public var handshakeTimeout = 10.0
        /// Seconds a request head may take once its first byte came.
        public var headTimeout = HTTPConnection.defaultHeadSeconds
        public init() {}
    }

    public let port: Int
    private let acceptor: Acceptor
    private let context: TLSContext
    private let limits: Limits
    private let route: LocalSendRoute

    public convenience init(
        identity: TLSIdentity, host: String, port: Int, limits: Limits = Limits(), route: @escaping LocalSendRoute
    ) throws {
        try self.init(identity: identity, host: host, port: port, limits: limits, accept: nil, route: route)
    }

    /// `accept`: how tests make accepting fail.
    package init(
        identity: TLSIdentity, host: String, port: Int, limits: Limits = Limits(), accept: AcceptOverride?,
        route: @escaping LocalSendRoute
    ) throws {
        acceptor = try Acceptor(
            host: host, port: port, name: "localsend",
            limits: AcceptorLimits(
                total: limits.connections, perAddress: limits.perAddress, whenFull: .evictFromBusiest, key: .address),
            override: accept)
        self.port = acceptor.port
        context = try TLSContext(
            identity: identity, role: .server, verifier: { _ in true }, peerCertificate: .optional, minimumTLS12: true)
        self.limits = limits
        self.route = route
    }

    /// Starts accepting; `failed` hears once if accepting stops for another reason than `stop`.
    public func start(failed: @escaping @Sendable (Error) -> Void = { _ in }) {
        acceptor.start(
            handler: { [self] connection in
                // The TLS connection made of the socket closes it.
                serve(connection.fd, host: Syscalls.host(of: connection.peer)) { acceptor.markActive(connection) }
            }, failed: failed)
    }

    /// `active`: called once a whole request has come (the connection is then cut after idle ones when the server
    /// is full).
    private func serve(_ client: Int32, host: String, active: () -> Void) {
        Syscalls.setTimeouts(client, seconds: limits.handshakeTimeout)
        guard let tls = try? TLSConnection(context: context, fileDescriptor: client) else { return }
        do {
            try tls.handshake()
        } catch {
            Self.log.debug("a LocalSend handshake failed", metadata: ["from": "\(host)", "error": "\(error)"])
            return
        }
        Syscalls.setTimeouts(client, seconds: limits.idleTimeout)
        let caller = LocalSendCaller(
            host: host, certificateFingerprint: tls.peerCertificateDER.map(LocalSend.fingerprint(ofCertificateDER:)))
        let http = HTTPConnection(tls)
        http.idleSeconds = limits.idleTimeout
        http.headSeconds = limits.headTimeout
        defer { tls.shutdown() }
        while true {
            do {
                guard let head = try http.readHead(request: true) else { return }
                active()
                guard try route(head, http, caller) else { return }
            } catch let failure as HTTPFailure {
                Self.log.info(
                    "refused a LocalSend request", metadata: ["from": "\(host)", "reason": "\(failure.message)"])
                try? http.writeResponse(failure.status, close: true)
                // A refused body may still be on its way: read it off (a second and 4 MiB at most, however slowly
                // it comes) before closing, so that the close does not reset the connection under the answer.
                Syscalls.drain(client, limit: 4 << 20, seconds: 1)
                return
            } catch {
                Self.log.debug("a LocalSend connection ended", metadata: ["from": "\(host)", "error": "\(error)"])
                return
            }
        }
    }

    /// Connections open now.
    public var openConnections: Int { acceptor.countedConnections }

    /// Stops accepting and ends open connections (their reads fail at once); waits for their threads.
    public func stop() { acceptor.stop(grace: 10) }
}
