import Dispatch
import Synchronization
import ShareNet

/// Shuts a socket down if a phase (TLS handshake and hello) is not over by its deadline, so a peer that trickles
/// one byte at a time cannot hold a connection thread forever: per-read timeouts alone would never fire.
final class Watchdog: Sendable {
    /// Whether the phase is still being watched, and whether the deadline fired.
    private let state = Mutex((armed: true, fired: false))

    init(fileDescriptor fd: Int32, seconds: Double) {
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
            state.withLock { state in
                if state.armed {
                    state.fired = true
                    Syscalls.shutdownSocket(fd)
                }
            }
        }
    }

    /// Whether the deadline passed and the socket was shut down.
    var fired: Bool { state.withLock { $0.fired } }

    /// The phase finished in time.
    func disarm() { state.withLock { $0.armed = false } }
}
