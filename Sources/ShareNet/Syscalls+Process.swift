import Glibc

/// A program started with `posix_spawn` (Foundation's `Process` is an `NSObject` of swift-corelibs-foundation: a
/// program that uses it links CoreFoundation and ICU).
public struct ChildProcess: Sendable {
    public let pid: pid_t
    /// The read end of a pipe from the program's standard error, when asked for.
    public let errors: Int32?

    /// Starts `executable` with `arguments`; its standard input and output are /dev/null, its standard error a pipe
    /// (`captureErrors`) or /dev/null. Throws what `posix_spawn` answered.
    public static func start(_ executable: String, _ arguments: [String], captureErrors: Bool = false)
        throws(Syscalls.SocketError) -> ChildProcess
    {
        var pipeEnds: [Int32] = [-1, -1]
        if captureErrors {
            guard pipe(&pipeEnds) == 0 else { throw Syscalls.failure("pipe") }
            for end in pipeEnds where fcntl(end, F_SETFD, FD_CLOEXEC) != 0 {
                let failed = Syscalls.failure("fcntl FD_CLOEXEC")
                for fd in pipeEnds { close(fd) }
                throw failed
            }
        }
        var actions = posix_spawn_file_actions_t()
        var started = posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // Each step answers 0 or an error number (ENOMEM); the first error is the one said.
        if started == 0 { started = posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0) }
        if started == 0 { started = posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0) }
        if started == 0 {
            started =
                captureErrors
                ? posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 2)
                : posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid = pid_t()
        if started == 0, argv.dropLast().contains(nil) { started = ENOMEM }
        if started == 0 { started = posix_spawn(&pid, executable, &actions, nil, argv, environ) }
        if captureErrors { close(pipeEnds[1]) }
        guard started == 0 else {
            if captureErrors { close(pipeEnds[0]) }
            throw Syscalls.failure("posix_spawn \(executable)", started)
        }
        return ChildProcess(pid: pid, errors: captureErrors ? pipeEnds[0] : nil)
    }

    /// Reads the program's standard error to its end (at most `limit` bytes kept) and closes it.
    public func readErrors(limit: Int = 64 << 10) -> [UInt8] {
        guard let errors else { return [] }
        defer { close(errors) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while let count = try? Syscalls.read(errors, into: &buffer, count: buffer.count), count > 0 {
            if out.count < limit { out += buffer[..<min(count, limit - out.count)] }
        }
        return out
    }

    /// Waits for the program to end: its exit status, or 128 + the signal that ended it.
    @discardableResult
    public func wait() -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            guard errno == EINTR else { return -1 }
        }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }
}
