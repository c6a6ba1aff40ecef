import CShareSystem
import Glibc

/// A mutex with a condition variable (pthreads, waits timed on the monotonic clock), shaped like `NSCondition`.
///
/// The modules a watch links use this and `Threads` instead of Foundation's `NSCondition`, `NSLock` and `Thread`:
/// those are `NSObject` subclasses, and a statically linked program that uses one links CoreFoundation, the rest of
/// Foundation and ICU with it (the watch's binary went from 25 to 75 MB, and ~3 MiB of its resident memory).
package final class ThreadCondition: @unchecked Sendable {  // the pthread objects are only used through pthread calls
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    package init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        precondition(pthread_mutex_init(mutex, nil) == 0, "pthread_mutex_init failed")
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        precondition(pthread_cond_init(condition, &attributes) == 0, "pthread_cond_init failed")
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deinitialize(count: 1)
        condition.deallocate()
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    package func lock() { pthread_mutex_lock(mutex) }

    package func unlock() { pthread_mutex_unlock(mutex) }

    /// Takes the lock if no one holds it; false (not taken) otherwise.
    package func tryLock() -> Bool { pthread_mutex_trylock(mutex) == 0 }

    package func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Waits (the lock held) until signalled; like every condition wait, it may also return spuriously.
    package func wait() { pthread_cond_wait(condition, mutex) }

    /// Waits (the lock held) at most `seconds`; false once that time has passed.
    package func wait(seconds: Double) -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let whole = Int(max(0, seconds))
        var nanoseconds = now.tv_nsec + Int((max(0, seconds) - Double(whole)) * 1e9)
        var deadline = timespec(tv_sec: now.tv_sec + whole + nanoseconds / 1_000_000_000, tv_nsec: 0)
        nanoseconds %= 1_000_000_000
        deadline.tv_nsec = nanoseconds
        return pthread_cond_timedwait(condition, mutex, &deadline) != ETIMEDOUT
    }

    package func signal() { pthread_cond_signal(condition) }

    package func broadcast() { pthread_cond_broadcast(condition) }
}

/// Threads of our own (detached pthreads), for blocking work that must stay off Swift's cooperative pool.
package enum Threads {
    /// Seconds on the monotonic clock (the one the waits here count by): for deadlines and ages, never dates.
    package static func monotonicSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    private final class Start {
        let body: () -> Void
        let name: String
        init(body: @escaping () -> Void, name: String) {
            self.body = body
            self.name = name
        }
    }

    /// Runs `body` on a new detached thread named `name` (the first 15 bytes show in `top -H`). `body` is sent to
    /// that thread: what it captures without being `Sendable` (a session, a source) is handed over, and the compiler
    /// checks that the starting thread no longer touches it.
    package static func start(name: String, stackSize: Int = 1 << 20, _ body: sending @escaping () -> Void) {
        let start = Unmanaged.passRetained(Start(body: body, name: name)).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        pthread_attr_setstacksize(&attributes, max(stackSize, Int(PTHREAD_STACK_MIN)))
        var thread = pthread_t()
        let created = pthread_create(
            &thread, &attributes,
            { context in
                let start = Unmanaged<Start>.fromOpaque(context!).takeRetainedValue()
                _ = cshare_set_thread_name(start.name)
                start.body()
                return nil
            }, start)
        precondition(created == 0, "pthread_create failed: \(created)")
    }

    /// Suspends the calling thread for `seconds` (none for zero or less), resuming after a signal's interruption.
    package static func sleep(seconds: Double) {
        guard seconds > 0 else { return }
        let whole = seconds.rounded(.down)
        var request = timespec(tv_sec: Int(whole), tv_nsec: Int((seconds - whole) * 1e9))
        var remaining = timespec()
        while nanosleep(&request, &remaining) == -1, errno == EINTR { request = remaining }
    }
}

/// State behind one lock, with waits for a condition on it: every `withLock` wakes the waiters, so a wait is always
/// for a predicate, never for a signal that may come before it.
package final class Guarded<State>: @unchecked Sendable {  // `state` is only touched with `condition` locked
    private let condition = ThreadCondition()
    private var state: State

    package init(_ state: State) { self.state = state }

    /// Runs `body` on the state, locked, and wakes every waiter.
    package func withLock<T>(_ body: (inout State) throws -> T) rethrows -> T {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
        }
        return try body(&state)
    }

    /// Waits until `predicate` holds (at most `seconds`; nil: as long as it takes), then runs `body` on the state
    /// within the same hold of the lock, told whether the predicate held; wakes every waiter.
    package func withLock<T>(
        when predicate: (State) -> Bool, seconds: Double? = nil, _ body: (inout State, Bool) throws -> T
    ) rethrows -> T {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
        }
        let held = waitLocked(seconds: seconds, until: predicate)
        return try body(&state, held)
    }

    /// Waits at most `seconds` (nil: as long as it takes) for `predicate` to hold; whether it does.
    @discardableResult
    package func wait(seconds: Double? = nil, until predicate: (State) -> Bool) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return waitLocked(seconds: seconds, until: predicate)
    }

    private func waitLocked(seconds: Double?, until predicate: (State) -> Bool) -> Bool {
        guard let seconds else {
            while !predicate(state) { condition.wait() }
            return true
        }
        let deadline = Threads.monotonicSeconds() + max(0, seconds)
        while !predicate(state) {
            let left = deadline - Threads.monotonicSeconds()
            guard left > 0 else { return false }
            _ = condition.wait(seconds: left)
        }
        return true
    }

}
