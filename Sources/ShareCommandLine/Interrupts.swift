import Glibc

/// A transfer stopped by Ctrl-C, `kill` or a closed terminal exits with 75 (interrupted: running the same command
/// again resumes it), as documented, instead of the shell's 130 or 143. What was verified is already on disk (the
/// receiver's ledger), so nothing needs undoing before the exit.
public enum Interrupts {
    /// The line written on standard error, prepared before any signal can arrive (a handler must not allocate).
    nonisolated(unsafe) private static var line: [UInt8] = []

    /// Installs the handlers for SIGINT, SIGTERM and SIGHUP; `what` names the command ("the send").
    public static func exitAsInterrupted(_ what: String) {
        let erase = isatty(STDERR_FILENO) == 1 ? "\r\u{1B}[K" : ""
        line = Array(
            (erase + "share: \(what) was interrupted; run the same command again to resume\n").utf8)
        // A parent may have started this process with the signals blocked (the mask is inherited): unblock them
        // here, before the transfer's threads are made (they inherit this thread's mask).
        var set = sigset_t()
        sigemptyset(&set)
        for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&set, signal) }
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            _ = Glibc.signal(signal) { _ in
                Interrupts.line.withUnsafeBufferPointer { _ = write(STDERR_FILENO, $0.baseAddress, $0.count) }
                _exit(ExitStatus.interrupted.rawValue)
            }
        }
    }
}
