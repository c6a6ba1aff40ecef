import Foundation

/// A thread that runs `body` at once, then again every `interval` seconds or as soon as it is woken, until stopped;
/// `stop()` returns once the thread has finished its round and left.
public final class RepeatingThread: @unchecked Sendable {  // `stopped`, `running`, `woken` guarded by `condition`
    private let condition = NSCondition()
    private var stopped = false
    private var running = false
    private var woken = false
    private let name: String
    private let interval: Double
    private let body: @Sendable () -> Void

    public init(name: String, interval: Double, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.interval = interval
        self.body = body
    }

    public func start() {
        condition.withLock { running = true }
        let thread = Thread { [self] in
            while true {
                body()
                condition.lock()
                let deadline = Date().addingTimeInterval(interval)
                while !stopped && !woken && condition.wait(until: deadline) {}
                woken = false
                let stop = stopped
                if stop {
                    running = false
                    condition.broadcast()
                }
                condition.unlock()
                if stop { return }
            }
        }
        thread.name = name
        thread.start()
    }

    /// Runs the next round now.
    public func wake() {
        condition.withLock {
            woken = true
            condition.broadcast()
        }
    }

    public func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        while running { condition.wait() }
        condition.unlock()
    }
}
