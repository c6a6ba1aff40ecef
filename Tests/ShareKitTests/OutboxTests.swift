import Foundation
import Synchronization
import Testing

@testable import ShareKit
import ShareTrust
import ShareReach
import ShareProtocol
import ShareEngine
import ShareAgent

/// The agent's outbox with a runner of the test's own: what ends a job and how it is told.
@Suite struct OutboxTests {
    func directory() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("share-outbox-\(UUID().uuidString)")
    }

    /// A device that is reached and fails the same way twice, moving nothing, is not tried a third time: the job
    /// fails and says so (a LocalSend device refusing a name was retried 20 times in 30 s).
    @Test func aJobThatFailsTheSameWayTwiceStopsAndSaysWhy() throws {
        let folder = directory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let attempts = Mutex(0)
        let outbox = try Outbox(directory: folder) { _, _, _ in
            attempts.withLock { $0 += 1 }
            return .failure(ShareFailure(.interrupted, "phone closed the connection during the upload of album//a.jpg"))
        }
        outbox.start()
        defer { outbox.stop() }
        var job = OutboxJob(to: "phone")
        job.localsend = "09591D21"
        try outbox.add(job)
        let ended = try #require(outbox.wait(for: job.id, timeout: 30))
        #expect(ended.state == .failed)
        #expect(attempts.withLock { $0 } == 2)
        #expect(ended.lastError?.contains("failed the same way twice") == true, "\(ended.lastError ?? "")")
    }

    /// Jobs to one device go in the order they were made, whichever is due first: a watch that comes back gets
    /// what was queued for it in that order, even when the older job was still in an attempt as the watch attached
    /// (and so waits for a later try than the newer one).
    @Test func jobsToOneDeviceGoInTheOrderTheyWereMade() throws {
        let folder = directory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let order = Mutex<[String]>([])
        let outbox = try Outbox(directory: folder) { job, _, _ in
            order.withLock { $0.append(job.texts.first ?? "") }
            return .success(SendReport())
        }
        var first = OutboxJob(to: "my-watch")
        first.texts = ["first"]
        first.nextAttempt = Date().addingTimeInterval(600)
        var second = OutboxJob(to: "my-watch")
        second.texts = ["second"]
        second.created = first.created.addingTimeInterval(1)
        var elsewhere = OutboxJob(to: "desk")
        elsewhere.texts = ["elsewhere"]
        elsewhere.created = first.created.addingTimeInterval(-1)
        elsewhere.nextAttempt = Date().addingTimeInterval(600)
        try outbox.add(first)
        try outbox.add(second)
        try outbox.add(elsewhere)
        outbox.start()
        defer { outbox.stop() }
        #expect(outbox.wait(for: second.id, timeout: 30)?.state == .delivered)
        #expect(outbox.wait(for: first.id, timeout: 5)?.state == .delivered)
        // Another device's job keeps its own time.
        #expect(order.withLock { $0 } == ["first", "second"])
    }

    /// A device that comes back while its job is in an attempt that then fails (a watch attaching as the agent
    /// tries it): the job is tried again at once, not after its backoff (30 s here).
    @Test func aJobWhoseDeviceCameBackDuringAFailedAttemptIsTriedAgainAtOnce() throws {
        let folder = directory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let attempts = Mutex(0)
        let inAttempt = DispatchSemaphore(value: 0)
        let cameBack = DispatchSemaphore(value: 0)
        let outbox = try Outbox(directory: folder) { _, _, _ in
            let attempt = attempts.withLock {
                $0 += 1
                return $0
            }
            guard attempt == 1 else { return .success(SendReport()) }
            inAttempt.signal()
            _ = cameBack.wait(timeout: .now() + 10)
            return .failure(ShareFailure(.unavailable, "my-watch is not attached"))
        }
        var job = OutboxJob(to: "my-watch")
        job.texts = ["hello"]
        job.failuresWithoutProgress = 5
        try outbox.add(job)
        outbox.start()
        defer { outbox.stop() }
        #expect(inAttempt.wait(timeout: .now() + 10) == .success)
        outbox.retryNow(to: ["my-watch"])
        cameBack.signal()
        #expect(outbox.wait(for: job.id, timeout: 10)?.state == .delivered)
        #expect(attempts.withLock { $0 } == 2)
    }

    /// Every item declined: the job is declined; every item refused: refused; one delivered: delivered.
    @Test func finalStatesSayWhatHappened() {
        #expect(OutboxJob.finalState(delivered: 0, refusals: ["declined on desk: busy"]) == .declined)
        #expect(OutboxJob.finalState(delivered: 0, refusals: ["declined on desk", "too large"]) == .refused)
        #expect(OutboxJob.finalState(delivered: 1, refusals: ["declined on desk"]) == .delivered)
        #expect(OutboxJob.finalState(delivered: 2, refusals: []) == .delivered)
    }
}
