import Foundation

extension Process {
    /// Waits for the process to exit, sleeping. Foundation's `waitUntilExit` runs the calling thread's run loop until
    /// the process ends, and on a thread with no run-loop source (every test thread) that returns at once: it spins a
    /// core for as long as the process runs (a test waiting two minutes on a transfer burnt 111 s of CPU beside it).
    public func waitForExit() {
        _ = waitForExit(seconds: .infinity)
    }

    /// Waits at most `seconds` (as given: not scaled) for the process to exit; whether it did.
    public func waitForExit(seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while isRunning {
            if Date() >= deadline { return false }
            usleep(2_000)
        }
        return true
    }
}
