import Glibc

/// A doorbell for a thread that waits on a connection: other threads ring it (a non-blocking pipe) to make the
/// wait return at once, so a link's one thread both reads its peer and sends what others queue, never two threads
/// on one TLS connection.
public final class Wakeup: Sendable {
    private let readEnd: Int32
    private let writeEnd: Int32

    public init() {
        var ends: [Int32] = [-1, -1]
        _ = pipe(&ends)
        for end in ends where end >= 0 {
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        readEnd = ends[0]
        writeEnd = ends[1]
    }

    deinit {
        if readEnd >= 0 { close(readEnd) }
        if writeEnd >= 0 { close(writeEnd) }
    }

    /// Wakes the waiter (any thread).
    public func ring() {
        var one: UInt8 = 1
        _ = write(writeEnd, &one, 1)
    }

    /// Clears the rings so far.
    func drain() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(readEnd, &buffer, buffer.count) > 0 {}
    }

    var descriptor: Int32 { readEnd }
}

extension PeerConnection {
    /// Waits until the peer sent something (true) or `wakeup` rang or `timeout` seconds passed (false).
    public func waitForInput(or wakeup: Wakeup, timeout: Double) -> Bool {
        if channel.hasIncomingData { return true }
        var fds = [
            pollfd(fd: tls.fileDescriptor, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wakeup.descriptor, events: Int16(POLLIN), revents: 0),
        ]
        let n = poll(&fds, 2, Int32(max(0, timeout) * 1000))
        if n > 0, fds[1].revents != 0 { wakeup.drain() }
        return n > 0 && fds[0].revents != 0
    }
}
