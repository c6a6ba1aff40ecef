import ShareThreads

/// A thread that runs `body` at once, then again every `interval` seconds or as soon as it is woken, until stopped;
/// `stop()` returns once the thread has finished its round and left.
public final class RepeatingThread: @unchecked Sendable {  // `stopped`, `running`, `woken` guarded by `condition`
    private let condition = ThreadCondition()
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
        Threads.start(name: name) { [self] in
            while true {
                body()
                condition.lock()
                let deadline = ContinuousClock.now + .seconds(interval)
                while !stopped && !woken, case let left = deadline - ContinuousClock.now, left > .zero,
                    condition.wait(
                        seconds: Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18)
                {}
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
