import ShareProtocol
import Glibc
import Logging
import ShareTLS
import ShareThreads

/// How a server counts the connections it accepted and has not let go of yet.
package struct AcceptorLimits: Sendable {
    /// What to do with a new connection when a count is full.
    package enum WhenFull: Sendable {
        /// Close the new one at once: the ones being served keep their place.
        case refuseNew
        /// Cut the oldest counted connection of the same address (or of all) and count the new one: a flood cannot
        /// keep a newcomer out, and every counted connection has its own deadline to finish.
        case evictOldest
        /// Cut a connection of the key that holds the most (the new one's own key when that is at its limit): of
        /// those, the oldest that has not yet made itself useful (`Acceptor.markActive`: a whole request, a session),
        /// else its oldest. A flood from a few addresses takes turns with itself; a newcomer from anywhere else
        /// holds its place while it asks.
        case evictFromBusiest
    }

    /// Whom a connection counts against.
    package enum Key: Sendable {
        /// Its address (`::1`, `192.0.2.4`).
        case address
        /// Its IPv4 address or its IPv6 /64 network (one host usually owns a whole /64).
        case network
    }

    /// Connections counted at once, in all.
    package var total: Int
    /// Connections counted at once from one key.
    package var perAddress: Int
    package var whenFull: WhenFull
    package var key: Key
    /// Seconds accepting may keep failing (out of descriptors or memory) before the acceptor stops and reports it.
    package var failingFor: Double = 60
    /// A server for its own user only (the page): a loopback connection from another local user is closed at once,
    /// uncounted (`LoopbackPeer`).
    package var ownUserOnly = false

    /// For a server that takes its connections with `next`, one at a time: nothing is counted.
    package static let serial = AcceptorLimits(total: 1, perAddress: 1, whenFull: .refuseNew, key: .address)

    /// Handler threads alive at once: past it, accepting waits for one to end (the kernel queues what comes
    /// meanwhile). A flood whose connections are cut as fast as they come would otherwise start threads faster than
    /// the cut ones end (each takes OpenSSL's global lock to start and to end), and the process would hold
    /// thousands.
    package var threads: Int

    package init(total: Int, perAddress: Int, whenFull: WhenFull, key: Key, threads: Int? = nil) {
        self.total = total
        self.perAddress = perAddress
        self.whenFull = whenFull
        self.key = key
        self.threads = threads ?? (total * 2 + 16)
    }
}

/// A connection the acceptor took: its socket (the handler's to close), its peer and the key it counts against.
package struct AcceptedConnection: Sendable {
    package let fd: Int32
    package let peer: String
    package let key: String
    let id: Int
}

/// Accepting as a test makes it happen: `call` instead of the system's accept (failing as a full descriptor table
/// makes it fail), and `failingFor` instead of the limits' minute.
package struct AcceptOverride: Sendable {
    package var call: Acceptor.Call
    package var failingFor: Double

    package init(failingFor: Double, call: @escaping Acceptor.Call) {
        self.call = call
        self.failingFor = failingFor
    }
}

/// Accepting could not go on: the listening socket failed, or accepting failed for `failingFor` seconds in a row.
package struct AcceptorFailure: Error, Sendable, CustomStringConvertible {
    package let message: String
    package var description: String { message }
}

/// The one accept loop: every server of share (the trusted-device listener, LocalSend's HTTPS server, the page, a
/// pairing's port and a wormhole transit's direct port) takes its connections here.
///
/// Each accepted connection is counted against its address and in all (`AcceptorLimits`), served by a handler on a
/// thread of its own, and cut when the server stops. When accepting fails for want of descriptors or memory, the loop
/// backs off (50 ms doubling to 1 s; the failure is logged once a streak and every 10 s) instead of spinning on a
/// listening socket that stays readable; after `failingFor` seconds of nothing but failures it stops and reports
/// the failure, so the part that owns it can fail in the open. Servers that take one connection at a time call
/// `next` instead of `start`, with the same back-off.
package final class Acceptor: Sendable {
    /// The system call under `accept`, replaceable (`AcceptOverride`) to make it fail.
    package typealias Call = @Sendable (_ listener: Int32, _ timeout: Double) throws -> (fd: Int32, peer: String)?
    static let log = Log.logger("share.acceptor")
    /// `SHARE_TEST_ACCEPT_FAILING_SECONDS`: how long accepting may fail before it is reported, shortened for tests.
    static let testFailingFor = getenv("SHARE_TEST_ACCEPT_FAILING_SECONDS").flatMap { Double(String(cString: $0)) }

    package let name: String
    package let port: Int
    private let fd: Int32
    private let limits: AcceptorLimits
    private let call: Call

    private struct Entry {
        let id: Int
        let key: String
        /// A duplicate of the connection's socket (-1 when none could be made), valid until the entry is gone:
        /// cutting it can never touch a descriptor number reused by another connection.
        var socket: Int32
        /// Whether it has made itself useful (`markActive`); idle ones are cut first when a count is full.
        var active = false
    }

    private struct State {
        var counted: [Entry] = []
        var running = 0
        var nextID = 0
        var stopping = false
        /// Set when `stop` has finished.
        var stopped = false
        var loopRunning = false
        var listenerClosed = false
        /// Failures since the last connection accepted, and when the first of them happened.
        var failures = 0
        var failingSince: ContinuousClock.Instant?
    }
    private let state = Guarded(State())

    /// Takes over a listening socket bound to `port`.
    /// What a listening socket is: TCP (peers are addresses) or a Unix socket (every peer is "local").
    package enum Family: Sendable { case network, local }

    package init(
        listening fd: Int32, port: Int, name: String, limits: AcceptorLimits, family: Family = .network,
        override: AcceptOverride? = nil
    ) {
        self.fd = fd
        self.port = port
        self.name = name
        var limits = limits
        if let seconds = Self.testFailingFor { limits.failingFor = seconds }
        if let override { limits.failingFor = override.failingFor }
        self.limits = limits
        let local: Call = { listener, timeout in try Syscalls.unixAccept(listener, timeout: timeout) }
        let network: Call = { listener, timeout in try Syscalls.accept(listener, timeout: timeout) }
        let system = family == .local ? local : network
        self.call = override?.call ?? system
    }

    /// Binds `host:port` (port 0 picks one) and takes it over.
    package convenience init(
        host: String, port: Int, name: String, limits: AcceptorLimits, override: AcceptOverride? = nil
    ) throws {
        Syscalls.ignoreSIGPIPE()
        let (fd, bound) = try Syscalls.listen(host: host, port: port)
        self.init(listening: fd, port: bound, name: name, limits: limits, override: override)
    }

    // MARK: Serving on threads

    /// Accepts on a thread of its own until stopped; each connection is served by `handler` on a new thread (with
    /// `stackSize` bytes of stack, its priority lowered by `nice`). `failed` is called once if accepting stops for any
    /// other reason than `stop`.
    package func start(
        stackSize: Int = 512 << 10, nice: Int32 = 0, handler: @escaping @Sendable (AcceptedConnection) -> Void,
        failed: @escaping @Sendable (Error) -> Void = { _ in }
    ) {
        guard
            state.withLock({ state in
                guard !state.stopping, !state.loopRunning else { return false }
                state.loopRunning = true
                return true
            })
        else { return }
        Threads.start(name: "share-\(name)") { [self] in
            defer { state.withLock { $0.loopRunning = false } }
            while true {
                // At most `threads` handlers at once: the next connection waits in the kernel's queue.
                let room = state.wait(seconds: 0.25, until: { $0.running < limits.threads || $0.stopping })
                if state.withLock({ $0.stopping }) { return }
                guard room else { continue }
                let accepted: (fd: Int32, peer: String)?
                do {
                    accepted = try acceptOnce(timeout: 0.25)
                } catch {
                    if state.withLock({ $0.stopping }) { return }
                    Self.log.error("stopped accepting", metadata: ["server": "\(name)", "error": "\(error)"])
                    failed(error)
                    return
                }
                if state.withLock({ $0.stopping }) {
                    if let accepted { Syscalls.close(accepted.fd) }
                    return
                }
                guard let accepted else { continue }
                adopt(accepted.fd, peer: accepted.peer, stackSize: stackSize, nice: nice, handler: handler)
            }
        }
    }

    /// Serves a connection accepted elsewhere (a relay's session) exactly as one accepted here: counted against
    /// `key` (its address's key when nil), on a thread of its own.
    package func adopt(
        _ client: Int32, peer: String, key: String? = nil, stackSize: Int = 512 << 10, nice: Int32 = 0,
        handler: @escaping @Sendable (AcceptedConnection) -> Void
    ) {
        if limits.ownUserOnly, let owner = LoopbackPeer.owner(of: client), owner != getuid() {
            Self.log.debug("closed a connection of another local user", metadata: ["server": "\(name)"])
            Syscalls.close(client)
            return
        }
        guard let connection = admit(client, peer: peer, key: key ?? keyOf(peer)) else {
            Self.log.debug("closed a connection over its limit", metadata: ["server": "\(name)", "from": "\(peer)"])
            Syscalls.close(client)
            return
        }
        Threads.start(name: "share-\(name)", stackSize: stackSize) { [self] in
            if nice > 0 { Syscalls.setThreadPriority(lowerBy: nice) }
            handler(connection)
            release(connection)
            TLSLibrary.threadFinished()
            state.withLock { $0.running -= 1 }
        }
    }

    /// Stops counting `connection` against its address and the total (a listener's connection once authenticated:
    /// sessions have a pool of their own). It is no longer cut by `stop` either.
    package func release(_ connection: AcceptedConnection) {
        state.withLock { state in
            guard let index = state.counted.firstIndex(where: { $0.id == connection.id }) else { return }
            if state.counted[index].socket >= 0 { Syscalls.close(state.counted[index].socket) }
            state.counted.remove(at: index)
        }
    }

    /// `connection` made itself useful (a whole request, an authenticated session): when a count is full, idle
    /// connections are cut before it (`WhenFull.evictFromBusiest`).
    package func markActive(_ connection: AcceptedConnection) {
        state.withLock { state in
            guard let index = state.counted.firstIndex(where: { $0.id == connection.id }) else { return }
            state.counted[index].active = true
        }
    }

    /// Whether `stop` has begun.
    package var isStopping: Bool { state.withLock { $0.stopping } }

    /// Connections counted now (not yet released).
    package var countedConnections: Int { state.withLock { $0.counted.count } }

    /// Handler threads running now.
    package var runningConnections: Int { state.withLock { $0.running } }

    private func admit(_ client: Int32, peer: String, key: String) -> AcceptedConnection? {
        state.withLock { state in
            guard !state.stopping else { return nil }
            let sameKey = state.counted.filter { $0.key == key }
            if sameKey.count >= limits.perAddress || state.counted.count >= limits.total {
                let victim: Entry?
                switch limits.whenFull {
                case .refuseNew:
                    victim = nil
                case .evictOldest:
                    victim = sameKey.count >= limits.perAddress ? sameKey.first : state.counted.first
                case .evictFromBusiest:
                    let pool = sameKey.count >= limits.perAddress ? sameKey : Self.busiest(state.counted)
                    victim = pool.first { !$0.active } ?? pool.first
                }
                guard let victim else { return nil }
                Self.log.debug("evicted a connection", metadata: ["server": "\(name)", "from": "\(victim.key)"])
                if victim.socket >= 0 {
                    Syscalls.shutdownSocket(victim.socket)
                    Syscalls.close(victim.socket)
                }
                state.counted.removeAll { $0.id == victim.id }
            }
            // Out of descriptors, there is no duplicate (-1): the connection is served all the same (refusing it
            // would free its descriptor for the next accept, and accepting would never be seen failing); it is then
            // ended by its own deadlines rather than cut at `stop`.
            let copy = dup(client)
            state.nextID += 1
            state.counted.append(Entry(id: state.nextID, key: key, socket: copy))
            state.running += 1
            return AcceptedConnection(fd: client, peer: peer, key: key, id: state.nextID)
        }
    }

    /// The connections of the key that holds the most, oldest first (of two keys holding as many, the one whose
    /// oldest connection is older).
    private static func busiest(_ counted: [Entry]) -> [Entry] {
        var byKey: [String: [Entry]] = [:]
        for entry in counted { byKey[entry.key, default: []].append(entry) }
        return byKey.values.max { a, b in a.count != b.count ? a.count < b.count : a[0].id > b[0].id } ?? []
    }

    private func keyOf(_ peer: String) -> String {
        switch limits.key {
        case .network: return Syscalls.quotaKey(peer)
        case .address: return Syscalls.host(of: peer)
        }
    }

    // MARK: One connection at a time

    /// The next connection within `timeout` seconds (nil if none came), for a server that serves one at a time: it
    /// is not counted, and is the caller's to close. Throws once accepting has failed for `failingFor` seconds.
    package func next(timeout: Double) throws -> AcceptedConnection? {
        guard let accepted = try acceptOnce(timeout: timeout) else { return nil }
        return AcceptedConnection(fd: accepted.fd, peer: accepted.peer, key: keyOf(accepted.peer), id: 0)
    }

    /// One accept; a failure for want of resources waits (backing off) and answers nil until it has lasted
    /// `failingFor` seconds.
    private func acceptOnce(timeout: Double) throws -> (fd: Int32, peer: String)? {
        do {
            let accepted = try call(fd, timeout)
            if accepted != nil {
                state.withLock {
                    $0.failures = 0; $0.failingSince = nil
                }
            }
            return accepted
        } catch {
            if state.withLock({ $0.stopping }) { return nil }
            let now = ContinuousClock.now
            let (failures, since) = state.withLock { state -> (Int, ContinuousClock.Instant) in
                state.failures += 1
                if state.failingSince == nil { state.failingSince = now }
                return (state.failures, state.failingSince!)
            }
            let failing = (now - since).seconds
            if failing >= limits.failingFor {
                let seconds =
                    limits.failingFor.rounded() == limits.failingFor
                    ? "\(Int(limits.failingFor))" : "\(limits.failingFor)"
                throw AcceptorFailure(message: "\(name) cannot accept connections (\(error)) for \(seconds) s")
            }
            let pause = min(1.0, 0.05 * Double(1 << min(failures - 1, 5)))
            if failures == 1 || Int(failing / 10) != Int((failing - pause) / 10) {
                Self.log.error(
                    "accept failed; still listening", metadata: ["server": "\(name)", "error": "\(error)"])
            }
            _ = state.wait(seconds: pause) { $0.stopping }
            return nil
        }
    }

    // MARK: Stopping

    /// Stops accepting, cuts every counted connection, calls `cut` (for what else the handlers wait on), waits up
    /// to `grace` seconds for the handlers, then calls `interrupt` (to end released connections through their own
    /// error path), cuts again and waits up to 10 s more: the process never exits under a thread that is still
    /// using a connection.
    /// (Both closures are labelled at every call: a trailing closure would bind to `cut`.)
    package func stop(grace: Double = 5, cut: () -> Void = {}, interrupt: () -> Void = {}) {
        let first = state.withLock { state -> Bool in
            defer { state.stopping = true }
            return !state.stopping
        }
        guard first else {
            // A second caller returns when the first has finished stopping, as the first does.
            state.wait(seconds: grace + 16) { $0.stopped }
            return
        }
        defer { state.withLock { $0.stopped = true } }
        // Wakes the accept thread from its wait now rather than at its next poll.
        Syscalls.shutdownSocket(fd)
        state.wait(seconds: 5) { !$0.loopRunning }
        state.withLock { state in
            if !state.listenerClosed { Syscalls.close(fd) }
            state.listenerClosed = true
        }
        cutCounted()
        cut()
        guard !state.wait(seconds: grace, until: { $0.running == 0 }) else { return }
        interrupt()
        cutCounted()
        state.wait(seconds: 10) { $0.running == 0 }
    }

    /// Closes the listening socket of a server that takes one connection at a time (`next`), when it is done.
    package func close() {
        state.withLock { state in
            state.stopping = true
            state.stopped = true
            if !state.listenerClosed { Syscalls.close(fd) }
            state.listenerClosed = true
        }
    }

    private func cutCounted() {
        state.withLock { state in
            for entry in state.counted where entry.socket >= 0 { Syscalls.shutdownSocket(entry.socket) }
        }
    }
}
