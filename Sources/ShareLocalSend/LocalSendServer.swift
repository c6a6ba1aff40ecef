import Foundation
import Glibc
import Logging
import ShareLink
import ShareTLS

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
public final class LocalSendServer: @unchecked Sendable {  // mutable state guarded by `lock`
    static let log = Log.logger("share.localsend")
    public struct Limits: Sendable {
        public var connections = 96
        public var perAddress = 12
        public var idleTimeout = 30.0
        public var handshakeTimeout = 10.0
        public init() {}
    }

    public let port: Int
    private let fd: Int32
    private let context: TLSContext
    private let limits: Limits
    private let route: LocalSendRoute
    private let lock = NSCondition()
    private var open: [String: Int] = [:]
    private var total = 0
    private var stopping = false
    private var acceptDone = false
    /// A duplicate of each open connection's socket (valid until its entry is gone), to end it at `stop`.
    private var connections: [String: [Int32]] = [:]

    public init(
        identity: TLSIdentity, host: String, port: Int, limits: Limits = Limits(), route: @escaping LocalSendRoute
    )
        throws
    {
        Syscalls.ignoreSIGPIPE()
        (fd, self.port) = try Syscalls.listen(host: host, port: port)
        context = try TLSContext(
            identity: identity, role: .server, verifier: { _ in true }, peerCertificate: .optional, minimumTLS12: true)
        self.limits = limits
        self.route = route
    }

    public func start() {
        let thread = Thread { [self] in
            defer {
                lock.withLock {
                    acceptDone = true; lock.broadcast()
                }
            }
            while !lock.withLock({ stopping }) {
                guard let accepted = try? Syscalls.accept(fd, timeout: 0.25) else { continue }
                admit(accepted.fd, peer: accepted.peer)
            }
        }
        thread.name = "share-localsend-accept"
        thread.start()
    }

    private func admit(_ client: Int32, peer: String) {
        let host = Self.host(of: peer)
        let duplicate = dup(client)
        let admitted: Bool = lock.withLock {
            guard !stopping, total < limits.connections, open[host, default: 0] < limits.perAddress else {
                return false
            }
            open[host, default: 0] += 1
            total += 1
            connections[host, default: []].append(duplicate)
            return true
        }
        guard admitted else {
            Self.log.debug("closed a connection over its limit", metadata: ["from": "\(host)"])
            Syscalls.close(client)
            Syscalls.close(duplicate)
            return
        }
        let thread = Thread { [self] in
            serve(client, host: host)
            lock.withLock {
                open[host, default: 1] -= 1
                if open[host] == 0 { open[host] = nil }
                total -= 1
                connections[host]?.removeAll { $0 == duplicate }
                if connections[host]?.isEmpty == true { connections[host] = nil }
                Syscalls.close(duplicate)
                lock.broadcast()
            }
            TLSLibrary.threadFinished()
        }
        thread.stackSize = 512 << 10
        thread.start()
    }

    private func serve(_ client: Int32, host: String) {
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
        defer { tls.shutdown() }
        while !lock.withLock({ stopping }) {
            do {
                guard let head = try http.readHead(request: true) else { return }
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
    public var openConnections: Int { lock.withLock { total } }

    /// Stops accepting and ends open connections (their reads fail at once); waits for their threads.
    public func stop() {
        lock.lock()
        stopping = true
        Syscalls.shutdownSocket(fd)
        let deadline = Date().addingTimeInterval(5)
        while !acceptDone && Date() < deadline { _ = lock.wait(until: deadline) }
        Syscalls.close(fd)
        for connection in connections.values.joined() { Syscalls.shutdownSocket(connection) }
        let end = Date().addingTimeInterval(10)
        while total > 0 && Date() < end { _ = lock.wait(until: end) }
        lock.unlock()
    }

    /// `1.2.3.4` of `1.2.3.4:5678`, `::1` of `[::1]:5678`.
    static func host(of peer: String) -> String {
        if peer.hasPrefix("["), let close = peer.firstIndex(of: "]") {
            return String(peer[peer.index(after: peer.startIndex)..<close])
        }
        if let colon = peer.lastIndex(of: ":"), peer.filter({ $0 == ":" }).count == 1 { return String(peer[..<colon]) }
        return peer
    }
}
