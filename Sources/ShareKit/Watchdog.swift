import Dispatch
import Foundation

/// Shuts a socket down if a phase (TLS handshake and hello) is not over by its deadline, so a peer that trickles
/// one byte at a time cannot hold a connection thread forever: per-read timeouts alone would never fire.
final class Watchdog: @unchecked Sendable {  // `armed` guarded by `lock`
    private let lock = NSLock()
    private var armed = true
    private var didFire = false

    init(fileDescriptor fd: Int32, seconds: Double) {
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
            lock.lock()
            defer { lock.unlock() }
            if armed {
                didFire = true
                Syscalls.shutdownSocket(fd)
            }
        }
    }

    /// Whether the deadline passed and the socket was shut down.
    var fired: Bool {
        lock.lock()
        defer { lock.unlock() }
        return didFire
    }

    /// The phase finished in time.
    func disarm() {
        lock.lock()
        armed = false
        lock.unlock()
    }
}
