import ShareTrust
import ShareNet

/// A transfer stopped by Ctrl-C, `kill` or a closed terminal exits with 75 (interrupted: running the same command
/// again resumes it), as documented, instead of the shell's 130 or 143. What was verified is already on disk (the
/// receiver's ledger), so nothing needs undoing before the exit.
public enum Interrupts {
    /// Installs the handlers; `what` names the command ("the send").
    public static func exitAsInterrupted(_ what: String) {
        let erase = Syscalls.stderrIsTerminal ? "\r\u{1B}[K" : ""
        Syscalls.exitOnInterrupt(
            writing: erase + "share: \(what) was interrupted; run the same command again to resume\n",
            status: ExitStatus.interrupted.rawValue)
    }
}
