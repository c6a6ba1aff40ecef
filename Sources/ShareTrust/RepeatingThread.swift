import ShareThreads

/// A thread that runs `body` at once, then again every `interval` seconds or as soon as it is woken, until stopped;
/// `stop()` returns once the thread has finished its round and left.
public final class RepeatingThread: Sendable {
    private struct State {
        var stopped = false
        var running = false
        var woken = false
    }
    private let state = Guarded(State())
    private let name: String
    private let interval: Double
    private let body: @Sendable () -> Void

    public init(name: String, interval: Double, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.interval = interval
        self.body = body
    }

    public func start() {
        state.withLock { $0.running = true }
        Threads.start(name: name) { [self] in
            while true {
                body()
                let stop = state.withLock(when: { $0.stopped || $0.woken }, seconds: interval) { state, _ in
                    state.woken = false
                    if state.stopped { state.running = false }
                    return state.stopped
                }
                if stop { return }
            }
        }
    }

    /// Runs the next round now.
    public func wake() {
        state.withLock { $0.woken = true }
    }

    public func stop() {
        state.withLock { $0.stopped = true }
        state.wait { !$0.running }
    }
}
