internal import CShareSystem
import FoundationEssentials
import Glibc

/// The POSIX calls share needs, by concern (this file: the process — signals, the allocator, thread priority —
/// and the error type; TCP, UDP, Unix sockets and file descriptors in the others); the only files outside the C
/// wrappers that touch raw pointers.
public enum Syscalls {
    /// Keeps a many-threaded process's memory flat: at most `arenas` malloc arenas.
    public static func limitMallocArenas(_ arenas: Int32 = 2) {
        _ = cshare_limit_malloc_arenas(arenas)
    }

    /// Lets a serving process open as many descriptors as its hard limit allows (nothing here uses `select`): a
    /// service's soft limit is often 1,024, fewer than a shared folder's folders and the connections of a busy agent.
    /// False when the limit could not be read or set (it stays as it was: a limit, not a failure).
    @discardableResult
    public static func raiseOpenFilesLimit() -> Bool {
        cshare_raise_open_files_limit() == 0
    }

    /// Writes to a closed socket must fail with EPIPE rather than kill the process.
    public static func ignoreSIGPIPE() {
        signal(SIGPIPE, SIG_IGN)
    }

    /// The bytes the interrupt handler writes, prepared before a signal can arrive (a handler must not allocate).
    nonisolated(unsafe) private static var interruptLine: [UInt8] = []
    nonisolated(unsafe) private static var interruptStatus: Int32 = 1

    /// On SIGINT, SIGTERM or SIGHUP: writes `line` to standard error and exits with `status` at once. The signals are
    /// unblocked first (a parent's mask is inherited, and the threads made later inherit this one's).
    public static func exitOnInterrupt(writing line: String, status: Int32) {
        interruptLine = Array(line.utf8)
        interruptStatus = status
        var set = sigset_t()
        sigemptyset(&set)
        for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&set, signal) }
        let unblocked = pthread_sigmask(SIG_UNBLOCK, &set, nil)
        precondition(unblocked == 0, "pthread_sigmask failed: \(unblocked)")
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in
            Syscalls.interruptLine.withUnsafeBufferPointer { _ = write(STDERR_FILENO, $0.baseAddress, $0.count) }
            _exit(Syscalls.interruptStatus)
        }
        sigemptyset(&action.sa_mask)
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            let installed = sigaction(signal, &action, nil)
            precondition(installed == 0, "sigaction(\(signal)) failed: \(String(cString: strerror(errno)))")
        }
    }

    nonisolated(unsafe) private static var interruptWriter: Int32 = -1

    /// On SIGINT, SIGTERM or SIGHUP from now on, a byte (the signal's number) is written to the pipe whose read end
    /// this returns. The handlers are installed before this returns (a dispatch signal source installs its handler
    /// later, on another thread: a signal that came in between was lost).
    public static func interruptPipe() -> Int32 {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return -1 }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        _ = fcntl(fds[1], F_SETFL, O_NONBLOCK)
        interruptWriter = fds[1]
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { signal in
            var byte = UInt8(truncatingIfNeeded: signal)
            _ = write(Syscalls.interruptWriter, &byte, 1)
        }
        sigemptyset(&action.sa_mask)
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            let installed = sigaction(signal, &action, nil)
            precondition(installed == 0, "sigaction(\(signal)) failed: \(String(cString: strerror(errno)))")
        }
        var set = sigset_t()
        sigemptyset(&set)
        for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&set, signal) }
        let unblocked = pthread_sigmask(SIG_UNBLOCK, &set, nil)
        precondition(unblocked == 0, "pthread_sigmask failed: \(unblocked)")
        return fds[0]
    }

    public struct SocketError: Error, CustomStringConvertible, Sendable {
        public let message: String
        public let code: Int32
        public var description: String { message }
        public var isTimeout: Bool { code == ETIMEDOUT || code == EAGAIN }
        public var isRefused: Bool { code == ECONNREFUSED }
    }

    public static func failure(_ what: String, _ code: Int32 = errno) -> SocketError {
        SocketError(message: "\(what): \(String(cString: strerror(code)))", code: code)
    }

    /// Gives the memory the allocator holds free back to the system, after a burst that took much (an update of a
    /// large mirrored folder): the agent's resident size follows what it uses, not what it once used.
    public static func releaseFreeMemory() { cshare_release_free_memory() }

    /// Sets the calling thread's CPU priority to the process's own lowered by `increment` nice steps (0: the
    /// process's own). Each long-lived thread sets it first: a thread started from a Dispatch or Swift concurrency
    /// thread would otherwise inherit that thread's QoS-derived nice value.
    public static func setThreadPriority(lowerBy increment: Int32) {
        if cshare_set_thread_nice(increment) != 0 {
            Log.logger("share.system").notice(
                "cannot lower a thread's priority", metadata: ["error": "\(String(cString: strerror(errno)))"])
        }
    }
}
