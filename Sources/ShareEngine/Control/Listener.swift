import FoundationEssentials
import ShareThreads
import Logging
import ShareProtocol
import ShareTLS
import ShareNet
import ShareTrust
import CoreTransferable
import UniformTypeIdentifiers

/// Limits a listener applies before and after authentication.
package struct ListenerLimits: Sendable {
    /// Connections still in their handshake, in all.
    package var handshaking = 64
    /// Connections still in their handshake from one IPv4 address or one IPv6 /64.
    package var handshakingPerAddress = 8
    /// Authenticated sessions at once.
    package var sessions = 256

    package init() {}
}

/// Accepts TLS connections on one port and hands each authenticated session to a handler on its own thread.
///
/// Blocking OpenSSL calls run on dedicated threads, never on Swift's cooperative pool. Before authentication a
/// connection is counted against its address (an IPv4 address or an IPv6 /64) and against all the connections
/// still in their handshake; when either is full, the oldest such connection is evicted (its handshake cut), not
/// the new one refused: a flood from one host (or from many) cannot keep a trusted device out, and every handshake
/// has the handshake timeout to finish. Authenticated sessions have a pool of their own.
package final class Listener: AgentPart, Sendable {
    static let log = Log.logger("share.listener")
    package typealias Handler = @Sendable (Session) -> Void

    package let port: Int
    private let acceptor: Acceptor
    private let context: TLSContext
    private let makeHello: @Sendable () -> Hello
    private let handler: Handler
    private let timeouts: SessionTimeouts
    private let limits: ListenerLimits
    private let sessionNice: Int32
    /// Authenticated sessions being served.
    private let sessions = Guarded([ObjectIdentifier: PeerConnection]())
    package let partName = "listener"

    /// Binds `host:port` (port 0 picks one). Peers are checked with `verifier`. `accept`: how tests make accepting
    /// fail.
    package init(
        device: LocalDevice, host: String, port: Int, verifier: @escaping PeerVerifier,
        hello: @escaping @Sendable () -> Hello, timeouts: SessionTimeouts = SessionTimeouts(),
        limits: ListenerLimits = ListenerLimits(), sessionNice: Int32 = 0, accept: AcceptOverride? = nil,
        handler: @escaping Handler
    ) throws {
        Syscalls.limitMallocArenas()
        Syscalls.raiseOpenFilesLimit()
        do {
            acceptor = try Acceptor(
                host: host, port: port, name: "listener",
                limits: AcceptorLimits(
                    total: limits.handshaking, perAddress: limits.handshakingPerAddress, whenFull: .evictFromBusiest,
                    key: .network, threads: limits.handshaking * 2 + limits.sessions),
                override: accept)
        } catch let error as Syscalls.SocketError {
            throw ShareFailure(.unavailable, "\(error.message); choose another port with --port")
        }
        self.port = acceptor.port
        context = try TLSContext(identity: device.identity, role: .server, verifier: verifier)
        makeHello = hello
        self.handler = handler
        self.timeouts = timeouts
        self.limits = limits
        self.sessionNice = sessionNice
    }

    /// The first listener `make` can bind on `ports`, in order (the last failure when none can).
    package static func bind(ports: [Int], _ make: (Int) throws -> Listener) throws -> Listener {
        var failure: Error?
        for port in ports {
            do { return try make(port) } catch { failure = error }
        }
        throw failure ?? ShareFailure(.unavailable, "no port to listen on")
    }

    /// Starts accepting on a dedicated thread.
    package func start() {
        start(failed: { _ in })
    }

    package func start(failed: @escaping @Sendable (Error) -> Void) {
        acceptor.start(nice: sessionNice, handler: { [self] in serve($0, route: .direct) }, failed: failed)
    }

    /// Serves a connection on a thread of its own, exactly as every accepted one: counted against `key` until its
    /// handshake ends, then authenticated and routed. A relay's session arrives this way too, keyed by the device
    /// ID in its invitation (every relayed session comes from the relay's address).
    package func adopt(_ client: Int32, peer: String, key: String, route: SessionRoute) {
        acceptor.adopt(client, peer: peer, key: key, nice: sessionNice) { [self] in serve($0, route: route) }
    }

    private func serve(_ accepted: AcceptedConnection, route: SessionRoute) {
        let peer = accepted.peer
        let session: Session
        do {
            session = try SessionOpener.accept(
                fileDescriptor: accepted.fd, remoteAddress: peer, context: context, hello: makeHello(),
                timeouts: timeouts, route: route)
            acceptor.release(accepted)
        } catch let error as TLSError where error.kind == .peerNotTrusted {
            Self.log.notice("refused a connection", metadata: ["from": "\(peer)", "reason": "\(error.message)"])
            return
        } catch let error as TLSError where error.kind == .rejectedByPeer {
            Self.log.notice(
                "the peer does not trust this device and closed the connection", metadata: ["from": "\(peer)"])
            return
        } catch let error as TLSError where error.kind == .timeout || error.kind == .connectionLost {
            // Connections that said nothing and were cut or timed out (a flood's, cut in turn) are only debugging:
            // a flood writes nothing per connection.
            Self.log.debug("connection failed before its hello", metadata: ["from": "\(peer)", "error": "\(error)"])
            return
        } catch {
            Self.log.info("connection failed before its hello", metadata: ["from": "\(peer)", "error": "\(error)"])
            return
        }
        let key = ObjectIdentifier(session.connection)
        let admitted: Bool = sessions.withLock { sessions in
            guard !acceptor.isStopping, sessions.count < limits.sessions else { return false }
            sessions[key] = session.connection
            return true
        }
        guard admitted else {
            Self.log.notice("refused a session: too many at once", metadata: ["from": "\(peer)"])
            session.connection.fail(
                with: ProtocolError(.refused, "this device serves \(limits.sessions) sessions at once; try again soon"))
            return
        }
        handler(session)
        session.connection.close()
        sessions.withLock { $0[key] = nil }
    }

    /// Number of authenticated sessions being served.
    package var activeConnections: Int { sessions.withLock { $0.count } }

    /// Connections still in their handshake.
    package var handshakingConnections: Int { acceptor.countedConnections }

    /// A stop (Ctrl-C, SIGTERM) ends within a second or two: sessions still running after a moment are interrupted
    /// and end through their own error path, their partials kept for the resume.
    package func stop() { stop(grace: 0.5) }

    /// Stops accepting, waits up to `grace` seconds for sessions in flight to end, then interrupts those still
    /// running so they end through their own error path (partials flushed) and waits for them too: the process
    /// never exits under a thread that is still using a connection.
    package func stop(grace: Double) {
        acceptor.stop(
            grace: grace,
            interrupt: {
                sessions.withLock { sessions in
                    for connection in sessions.values { connection.interrupt() }
                }
            })
    }
}
