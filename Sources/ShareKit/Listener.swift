import Foundation
import Logging
import ShareProtocol
import ShareTLS

/// Accepts TLS connections on one port and hands each authenticated session to a handler on its own thread.
///
/// Blocking OpenSSL calls run on dedicated threads, never on Swift's cooperative pool. A connection that is untrusted,
/// garbage, half-open or stalls in the handshake costs one thread until its handshake timeout and never affects the
/// others. The number of connections in flight is capped.
public final class Listener: @unchecked Sendable {  // mutable state guarded by `lock`
    static let log = Log.logger("share.listener")
    public typealias Handler = @Sendable (Session) -> Void

    public let port: Int
    private let fd: Int32
    private let context: TLSContext
    private let makeHello: @Sendable () -> Hello
    private let handler: Handler
    private let timeouts: SessionTimeouts
    private let maxConnections: Int
    private let sessionNice: Int32
    private let lock = NSCondition()
    private var active = 0
    /// Sockets of sessions being served, shut down by `stop` when they outlast the grace period.
    private var clients: Set<Int32> = []
    private var stopping = false
    private var acceptThreadDone = false

    /// Binds `host:port` (port 0 picks one). Peers are checked with `verifier`.
    public init(
        device: LocalDevice, host: String, port: Int, verifier: @escaping PeerVerifier,
        hello: @escaping @Sendable () -> Hello, timeouts: SessionTimeouts = SessionTimeouts(),
        maxConnections: Int = 256, sessionNice: Int32 = 0, handler: @escaping Handler
    ) throws {
        Syscalls.ignoreSIGPIPE()
        Syscalls.limitMallocArenas()
        do {
            (fd, self.port) = try Syscalls.listen(host: host, port: port)
        } catch let error as Syscalls.SocketError {
            throw ShareError(.unavailable, "\(error.message); choose another port with --port")
        }
        context = try TLSContext(identity: device.identity, role: .server, verifier: verifier)
        makeHello = hello
        self.handler = handler
        self.timeouts = timeouts
        self.maxConnections = maxConnections
        self.sessionNice = sessionNice
    }

    /// Starts accepting on a dedicated thread.
    public func start() {
        let thread = Thread { [self] in
            Syscalls.setThreadPriority(lowerBy: 0)
            acceptLoop()
        }
        thread.name = "share-accept"
        thread.start()
    }

    private func acceptLoop() {
        defer {
            lock.lock()
            acceptThreadDone = true
            lock.broadcast()
            lock.unlock()
        }
        while true {
            lock.lock()
            let stop = stopping
            lock.unlock()
            if stop { return }
            let accepted: (fd: Int32, peer: String)?
            do {
                accepted = try Syscalls.accept(fd, timeout: 0.25)
            } catch {
                Self.log.error("accept failed; still listening", metadata: ["error": "\(error)"])
                Thread.sleep(forTimeInterval: 0.1)
                continue
            }
            guard let (client, peer) = accepted else { continue }
            lock.lock()
            if active >= maxConnections || stopping {
                lock.unlock()
                Syscalls.close(client)
                continue
            }
            active += 1
            clients.insert(client)
            lock.unlock()
            let thread = Thread { [self] in
                Syscalls.setThreadPriority(lowerBy: sessionNice)
                serve(client, peer)
                lock.lock()
                clients.remove(client)
                active -= 1
                lock.broadcast()
                lock.unlock()
            }
            thread.stackSize = 512 << 10
            thread.start()
        }
    }

    private func serve(_ client: Int32, _ peer: String) {
        let session: Session
        do {
            session = try SessionOpener.accept(
                fileDescriptor: client, remoteAddress: peer, context: context, hello: makeHello(), timeouts: timeouts)
        } catch let error as TLSError where error.kind == .peerNotTrusted {
            Self.log.notice("refused a connection", metadata: ["from": "\(peer)", "reason": "\(error.message)"])
            return
        } catch let error as TLSError where error.kind == .rejectedByPeer {
            Self.log.notice(
                "the peer does not trust this device and closed the connection", metadata: ["from": "\(peer)"])
            return
        } catch {
            Self.log.info("connection failed before its hello", metadata: ["from": "\(peer)", "error": "\(error)"])
            return
        }
        handler(session)
        session.connection.close()
    }

    /// Number of connections being served.
    public var activeConnections: Int {
        lock.lock()
        defer { lock.unlock() }
        return active
    }

    /// Stops accepting, waits up to `grace` seconds for sessions in flight to end, then shuts down the sockets of
    /// those still running so they end through their own error path (partials flushed) and waits for them too: the
    /// process never exits under a thread that is still using a connection.
    public func stop(grace: Double = 5) {
        lock.lock()
        stopping = true
        let deadline = Date().addingTimeInterval(grace + 1)
        while !acceptThreadDone && Date() < deadline { _ = lock.wait(until: deadline) }
        Syscalls.close(fd)
        let sessionDeadline = Date().addingTimeInterval(grace)
        while active > 0 && Date() < sessionDeadline { _ = lock.wait(until: sessionDeadline) }
        if active > 0 {
            for client in clients { Syscalls.shutdownSocket(client) }
            let finalDeadline = Date().addingTimeInterval(10)
            while active > 0 && Date() < finalDeadline { _ = lock.wait(until: finalDeadline) }
        }
        lock.unlock()
    }
}
