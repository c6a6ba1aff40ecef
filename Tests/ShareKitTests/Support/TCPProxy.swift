import Foundation
import Glibc

/// A TCP proxy on loopback that stands between two devices: it can pace the bytes (to make a transfer last long
/// enough to interrupt), cut every connection after a number of bytes, and flip a byte in flight.
final class TCPProxy: @unchecked Sendable {  // settings and counters guarded by `lock`
    let port: Int
    private let listener: Int32
    private let upstreamPort: Int
    private let lock = NSLock()
    private var stopped = false
    /// What the next connection does; changed by the test between connections, read by the accept thread.
    private struct Settings {
        var bytesPerSecond = 0
        var cutAfter: Int?
        var flipAt: Int?
        var stallAfter: Int?
    }
    private var settings = Settings()
    /// Client-to-server bytes per second (0 = unpaced).
    var bytesPerSecond: Int {
        get { lock.withLock { settings.bytesPerSecond } }
        set { lock.withLock { settings.bytesPerSecond = newValue } }
    }
    /// Close each connection after this many client-to-server bytes.
    var cutAfter: Int? {
        get { lock.withLock { settings.cutAfter } }
        set { lock.withLock { settings.cutAfter = newValue } }
    }
    /// Flip the byte at this client-to-server offset (once per connection).
    var flipAt: Int? {
        get { lock.withLock { settings.flipAt } }
        set { lock.withLock { settings.flipAt = newValue } }
    }
    /// Stop forwarding client-to-server bytes after this many (the connection stays open: a stalled link).
    var stallAfter: Int? {
        get { lock.withLock { settings.stallAfter } }
        set { lock.withLock { settings.stallAfter = newValue } }
    }
    private var accepted = 0
    private var delivered = 0
    /// Bytes passed on from the connecting side to the upstream side, over every connection so far.
    var forwarded: Int { lock.withLock { delivered } }
    /// Connections accepted so far.
    var connections: Int { lock.withLock { accepted } }

    init(upstreamPort: Int) throws {
        self.upstreamPort = upstreamPort
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(listener, 16) == 0 else { throw TestFailure("proxy cannot listen") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        start()
    }

    private func start() {
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    deinit { stop() }

    func stop() {
        lock.lock()
        let wasStopped = stopped
        stopped = true
        lock.unlock()
        if wasStopped { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 { return }
            lock.lock()
            if stopped {
                lock.unlock()
                close(client)
                return
            }
            accepted += 1
            let current = settings
            lock.unlock()
            guard let server = RawClient(port: upstreamPort).map({ dup($0.fd) }) else {
                close(client)
                continue
            }
            let (cut, flip, stall) = (current.cutAfter, current.flipAt, current.stallAfter)
            let pace = current.bytesPerSecond
            let pair = SocketPair(client: client, server: server)
            Thread { [self] in
                pump(
                    from: client, to: server, limit: cut ?? stall, flip: flip, pace: pace, pair: pair,
                    stall: stall != nil, upstream: true)
            }.start()
            Thread { [self] in pump(from: server, to: client, limit: nil, flip: nil, pace: 0, pair: pair) }.start()
        }
    }

    /// The two sockets of one proxied connection: the first pump to end shuts both down (waking the other), the
    /// second closes them. A cut closes with a reset, as a dropped link would look to the sender.
    final class SocketPair: @unchecked Sendable {  // guarded by `lock`
        let client: Int32
        let server: Int32
        private let lock = NSCondition()
        private var finished = 0

        init(client: Int32, server: Int32) {
            self.client = client
            self.server = server
        }

        /// Waits until the other direction's pump has ended (its peer closed), `source` hangs up (killed, or gave
        /// up on the stalled link), or `timeout`.
        func waitForTheOtherDirection(timeout: Double, orHangUpOf source: Int32) {
            let deadline = Date().addingTimeInterval(timeout)
            lock.lock()
            defer { lock.unlock() }
            while finished == 0, Date() < deadline {
                let peerClosed: Int16 = 0x2000  // POLLRDHUP (Linux; not exported without _GNU_SOURCE)
                var entry = pollfd(fd: source, events: peerClosed, revents: 0)
                if poll(&entry, 1, 0) > 0, entry.revents & (peerClosed | Int16(POLLHUP | POLLERR)) != 0 { return }
                _ = lock.wait(until: min(deadline, Date().addingTimeInterval(0.1)))
            }
        }

        func finish(reset: Bool) {
            lock.lock()
            finished += 1
            let last = finished == 2
            lock.broadcast()
            lock.unlock()
            if reset {
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                setsockopt(client, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            }
            if last {
                close(client)
                close(server)
            } else {
                shutdown(client, Int32(SHUT_RDWR))
                shutdown(server, Int32(SHUT_RDWR))
            }
        }
    }

    private func pump(
        from source: Int32, to target: Int32, limit: Int?, flip: Int?, pace: Int, pair: SocketPair, stall: Bool = false,
        upstream: Bool = false
    ) {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        var total = 0
        // The pace of the upstream direction follows `bytesPerSecond` as a test changes it (a transfer slow while it
        // is looked at, then fast), averaged from the last change.
        var pace = pace
        var paced = (since: Date(), bytes: 0)
        defer {
            // A stall holds the connection open, forwarding nothing more, until either end gives up.
            if stall, total >= limit! { pair.waitForTheOtherDirection(timeout: 120, orHangUpOf: source) }
            pair.finish(reset: !stall && limit != nil && total >= limit!)
        }
        while true {
            var want = buffer.count
            if let limit { want = min(want, limit - total) }
            if want <= 0 { return }
            let n = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, want, 0) }
            if n <= 0 { return }
            if let flip, flip >= total, flip < total + n { buffer[flip - total] ^= 0x40 }
            var sent = 0
            while sent < n {
                let m = buffer.withUnsafeBytes { send(target, $0.baseAddress! + sent, n - sent, Int32(MSG_NOSIGNAL)) }
                if m <= 0 { return }
                sent += m
            }
            total += n
            if upstream {
                let now = lock.withLock {
                    delivered += n
                    return settings.bytesPerSecond
                }
                if now != pace { (pace, paced) = (now, (Date(), 0)) }
            }
            paced.bytes += n
            if pace > 0 {
                // Pacing, not synchronisation: keep the average rate at `pace` bytes per second.
                let ahead = Double(paced.bytes) / Double(pace) - Date().timeIntervalSince(paced.since)
                if ahead > 0 { Thread.sleep(forTimeInterval: ahead) }
            }
        }
    }
}
