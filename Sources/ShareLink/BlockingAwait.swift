import Dispatch

/// Runs async work from a dedicated (non-pool) thread and waits for it.
public func blockingAwait<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let box = AwaitBox<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        do { box.result = .success(try await body()) } catch { box.result = .failure(error) }
        done.signal()
    }
    done.wait()
    return try box.result!.get()
}

/// Written once before the semaphore is signalled, read after.
private final class AwaitBox<T>: @unchecked Sendable {
    var result: Result<T, Error>?
}
