import Foundation
import Logging
import ShareProtocol
import ShareTLS

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
package final class Listener: AgentPart, @unchecked Sendable {  // mutable state guarded by `lock`
    static let log = Log.logger("share.listener")
    package typealias Handler = @Sendable (Session) -> Void

    package let port: Int
    private let fd: Int32
    private let context: TLSContext
    private let makeHello: @Sendable () -> Hello
    private let handler: Handler
    private let timeouts: SessionTimeouts
    private let limits: ListenerLimits
    private let sessionNice: Int32
    private let lock = NSCondition()
    /// Connections in their handshake, oldest first.
    private var handshaking: [Pending] = []
    /// Authenticated sessions being served.
    private var sessions: [ObjectIdentifier: PeerConnection] = [:]
    private var threads = 0
    private var stopping = false
    private var acceptThreadDone = false
    let partName = "listener"

    /// A connection not authenticated yet: its address's quota key, and a duplicate of its socket that stays
    /// valid until the entry is gone, so cutting it short can never touch a descriptor reused by another.
    final class Pending: @unchecked Sendable {  // fields immutable; the duplicate closed once, under the lock
        let key: String
        let started = ContinuousClock.now
        private var socket: Int32

        init(key: String, fd: Int32) {
            self.key = key
            socket = dup(fd)
        }

        func cut() { if socket >= 0 { Syscalls.shutdownSocket(socket) } }

        func close() {
            if socket >= 0 { Syscalls.close(socket) }
            socket = -1
        }
    }

    /// Binds `host:port` (port 0 picks one). Peers are checked with `verifier`.
    package init(
        device: LocalDevice, host: String, port: Int, verifier: @escaping PeerVerifier,
        hello: @escaping @Sendable () -> Hello, timeouts: SessionTimeouts = SessionTimeouts(),
        limits: ListenerLimits = ListenerLimits(), sessionNice: Int32 = 0, handler: @escaping Handler
    ) throws {
        Syscalls.ignoreSIGPIPE()
        Syscalls.limitMallocArenas()
        do {
            (fd, self.port) = try Syscalls.listen(host: host, port: port)
        } catch let error as Syscalls.SocketError {
            throw ShareFailure(.unavailable, "\(error.message); choose another port with --port")
        }
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

    func start(failed: @escaping @Sendable (Error) -> Void) {
        let thread = Thread { [self] in
            Syscalls.setThreadPriority(lowerBy: 0)
            if let error = acceptLoop() { failed(error) }
        }
        thread.name = "share-accept"
        thread.start()
    }

    /// Accepts until stopped; returns the error that made accepting impossible, if one did.
    private func acceptLoop() -> Error? {
        var failures = 0
        defer {
            lock.lock()
            acceptThreadDone = true
            lock.broadcast()
            lock.unlock()
        }
        while true {
            if lock.withLock({ stopping }) { return nil }
            let accepted: (fd: Int32, peer: String)?
            do {
                accepted = try Syscalls.accept(fd, timeout: 0.25)
                failures = 0
            } catch {
                // `stop` shuts the listening socket down to wake this thread at once.
                if lock.withLock({ stopping }) { return nil }
                // Out of descriptors or memory for a moment: keep listening. Failing for a minute: report.
                failures += 1
                if failures >= 600 { return error }
                Self.log.error("accept failed; still listening", metadata: ["error": "\(error)"])
                Thread.sleep(forTimeInterval: 0.1)
                continue
            }
            guard let (client, peer) = accepted else { continue }
            adopt(client, peer: peer, key: Syscalls.quotaKey(peer), route: .direct)
        }
    }

    /// Serves a connection on a thread of its own, exactly as every accepted one: counted against `key` until its
    /// handshake ends, then authenticated and routed. A relay's session arrives this way too, keyed by the device
    /// ID in its invitation (every relayed session comes from the relay's address).
    package func adopt(_ client: Int32, peer: String, key: String, route: SessionRoute) {
        let pending = Pending(key: key, fd: client)
        guard admit(pending) else {
            pending.close()
            Syscalls.close(client)
            return
        }
        let thread = Thread { [self] in
            Syscalls.setThreadPriority(lowerBy: sessionNice)
            serve(client, peer, pending, route: route)
            TLSLibrary.threadFinished()
            lock.withLock {
                threads -= 1
                lock.broadcast()
            }
        }
        thread.stackSize = 512 << 10
        thread.start()
    }

    /// Counts a new connection in; evicts the oldest connection of its address, or the oldest of all, when a
    /// handshake quota is full.
    private func admit(_ pending: Pending) -> Bool {
        lock.withLock {
            guard !stopping else { return false }
            let sameAddress = handshaking.filter { $0.key == pending.key }
            if sameAddress.count >= limits.handshakingPerAddress, let oldest = sameAddress.first {
                evict(oldest)
            } else if handshaking.count >= limits.handshaking, let oldest = handshaking.first {
                evict(oldest)
            }
            handshaking.append(pending)
            threads += 1
            return true
        }
    }

    /// Called with `lock` held.
    private func evict(_ pending: Pending) {
        Self.log.debug("evicted a connection still in its handshake", metadata: ["from": "\(pending.key)"])
        pending.cut()
        handshaking.removeAll { $0 === pending }
        pending.close()
    }

    /// The connection left the handshake (authenticated or not).
    private func handshakeEnded(_ pending: Pending) {
        lock.withLock {
            handshaking.removeAll { $0 === pending }
            pending.close()
        }
    }

    private func serve(_ client: Int32, _ peer: String, _ pending: Pending, route: SessionRoute) {
        let session: Session
        do {
            session = try SessionOpener.accept(
                fileDescriptor: client, remoteAddress: peer, context: context, hello: makeHello(), timeouts: timeouts,
                route: route)
            handshakeEnded(pending)
        } catch let error as TLSError where error.kind == .peerNotTrusted {
            handshakeEnded(pending)
            Self.log.notice("refused a connection", metadata: ["from": "\(peer)", "reason": "\(error.message)"])
            return
        } catch let error as TLSError where error.kind == .rejectedByPeer {
            handshakeEnded(pending)
            Self.log.notice(
                "the peer does not trust this device and closed the connection", metadata: ["from": "\(peer)"])
            return
        } catch {
            handshakeEnded(pending)
            Self.log.info("connection failed before its hello", metadata: ["from": "\(peer)", "error": "\(error)"])
            return
        }
        let key = ObjectIdentifier(session.connection)
        let admitted: Bool = lock.withLock {
            guard !stopping, sessions.count < limits.sessions else { return false }
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
        lock.withLock {
            sessions[key] = nil
            lock.broadcast()
        }
    }

    /// Number of authenticated sessions being served.
    package var activeConnections: Int { lock.withLock { sessions.count } }

    /// Connections still in their handshake.
    package var handshakingConnections: Int { lock.withLock { handshaking.count } }

    package func stop() { stop(grace: 5) }

    /// Stops accepting, waits up to `grace` seconds for sessions in flight to end, then interrupts those still
    /// running so they end through their own error path (partials flushed) and waits for them too: the process
    /// never exits under a thread that is still using a connection.
    package func stop(grace: Double) {
        lock.lock()
        stopping = true
        // Wakes the accept thread from its wait now rather than at its next poll.
        Syscalls.shutdownSocket(fd)
        let deadline = Date().addingTimeInterval(grace + 1)
        while !acceptThreadDone && Date() < deadline { _ = lock.wait(until: deadline) }
        Syscalls.close(fd)
        for pending in handshaking { pending.cut() }
        let sessionDeadline = Date().addingTimeInterval(grace)
        while threads > 0 && Date() < sessionDeadline { _ = lock.wait(until: sessionDeadline) }
        if threads > 0 {
            for connection in sessions.values { connection.interrupt() }
            for pending in handshaking { pending.cut() }
            let finalDeadline = Date().addingTimeInterval(10)
            while threads > 0 && Date() < finalDeadline { _ = lock.wait(until: finalDeadline) }
        }
        lock.unlock()
    }
}
