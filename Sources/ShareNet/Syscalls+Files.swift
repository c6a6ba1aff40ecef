internal import CShareSystem
import FoundationEssentials
import Glibc

extension Syscalls {
    /// Reads what `fd` has, at most `count` bytes, into the start of `buffer` (an interrupted read is retried): how
    /// many, 0 at its end.
    public static func read(_ fd: Int32, into buffer: inout [UInt8], count: Int) throws(SocketError) -> Int {
        precondition(count <= buffer.count)
        while true {
            let n = Glibc.read(fd, &buffer, count)
            if n >= 0 { return n }
            if errno != EINTR { throw failure("read") }
        }
    }

    /// Reads what `fd` has, up to `count` bytes; empty at its end or on an error (a terminal's answer, a wake-up).
    public static func readSome(_ fd: Int32, upTo count: Int) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        let n = (try? read(fd, into: &buffer, count: count)) ?? 0
        return Array(buffer[..<n])
    }

    /// Reads `fd` to its end (standard input, a pipe); throws what a failed read said.
    public static func readToEnd(_ fd: Int32) throws(SocketError) -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = try read(fd, into: &buffer, count: buffer.count)
            if n == 0 { return bytes }
            bytes += buffer[..<n]
        }
    }
    /// Reads up to `count` bytes at `offset` into the start of `buffer`; returns the number read (0 at end of file).
    public static func pread(_ fd: Int32, into buffer: inout [UInt8], count: Int, offset: Int64) throws -> Int {
        precondition(count <= buffer.count)
        var done = 0
        while done < count {
            let n = buffer.withUnsafeMutableBytes { raw in
                Glibc.pread(fd, raw.baseAddress! + done, count - done, off_t(offset) + off_t(done))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw failure("read")
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Writes all of `bytes` at `offset`.
    public static func pwriteAll(_ fd: Int32, _ bytes: ArraySlice<UInt8>, offset: Int64) throws {
        try bytes.withUnsafeBytes { raw in
            var done = 0
            while done < raw.count {
                let n = Glibc.pwrite(fd, raw.baseAddress! + done, raw.count - done, off_t(offset) + off_t(done))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw failure("write")
                }
                done += n
            }
        }
    }

    /// Whether `fd` has bytes (or an end of stream) to read right now.
    /// Waits until one of `fds` can be read (or has closed), at most `timeout` seconds; false on timeout or error.
    public static func waitReadable(_ fds: [Int32], timeout: Double) -> Bool {
        var polls = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        while true {
            let n = poll(&polls, nfds_t(polls.count), Int32(timeout * 1000))
            if n < 0 && errno == EINTR { continue }
            return n > 0
        }
    }

    /// Reads off and drops what the other side still sends on `fd`, `limit` bytes and `seconds` at most however
    /// slowly it arrives, so that closing after a refusal does not reset the connection under the answer it has yet
    /// to read. Raw bytes: under TLS they are records nobody will decrypt.
    public static func drain(_ fd: Int32, limit: Int, seconds: Double) {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        var left = limit
        var scratch = [UInt8](repeating: 0, count: 16 << 10)
        while left > 0 {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { return }
            let ms = Double(remaining.components.seconds) + Double(remaining.components.attoseconds) / 1e18
            guard waitReadable([fd], timeout: ms) else { return }
            let n = recv(fd, &scratch, min(scratch.count, left), Int32(MSG_DONTWAIT))
            if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard n > 0 else { return }
            left -= n
        }
    }

    /// Waits up to `timeout` seconds for the other end of `fd` to hang up (shut down its side or close), whatever
    /// bytes it sent before; true when it did.
    public static func waitHangUp(_ fd: Int32, timeout: Double) -> Bool {
        // POLLRDHUP (Linux): the peer closed its writing side, even with unread data still queued.
        let readHangUp: Int16 = 0x2000
        var pfd = pollfd(fd: fd, events: readHangUp, revents: 0)
        while true {
            let n = poll(&pfd, 1, Int32(timeout * 1000))
            if n < 0 && errno == EINTR { continue }
            return n > 0 && pfd.revents & (readHangUp | Int16(POLLHUP) | Int16(POLLERR)) != 0
        }
    }

    public static func isReadable(_ fd: Int32) -> Bool {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&pfd, 1, 0) > 0
    }

    /// Bytes available to an unprivileged user on the file system holding `path`.
    public static func freeSpace(_ path: String) -> UInt64? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        return UInt64(info.f_bavail) * UInt64(info.f_frsize)
    }

    /// Whether standard output is a terminal.
    public static var stdinIsTerminal: Bool { isatty(STDIN_FILENO) == 1 }
    public static var stdoutIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }
    public static var stderrIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }

    /// The width of the terminal on standard output (nil when it is not one); `COLUMNS` wins when set.
    public static var stdoutColumns: Int? { columns(of: STDOUT_FILENO) }

    /// The width of the terminal on standard error (nil when it is not one); `COLUMNS` wins when set.
    public static var stderrColumns: Int? { columns(of: STDERR_FILENO) }

    static func columns(of fd: Int32) -> Int? {
        if let columns = ProcessInfo.processInfo.environment["COLUMNS"].flatMap(Int.init), columns > 0 {
            return columns
        }
        var size = winsize()
        guard ioctl(fd, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
        return Int(size.ws_col)
    }
}
