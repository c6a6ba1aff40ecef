import ShareDisk
import ShareThreads
import Synchronization
import FoundationEssentials
import ShareNet
import ShareTrust
import ShareTLS
import ShareProtocol
import CoreTransferable
import UniformTypeIdentifiers
import ShareEngine

/// The agent's queue of sends: one worker sends the due jobs in order, each device's in the order they were made
/// (a newer job waits behind the oldest queued one to that device); a peer that cannot be reached is retried
/// with backoff (1 s, 2 s, 4 s … at most 30 s) until it is, for at most `giveUpAfter` from the job's creation; an
/// attempt that moved bytes before it broke is retried after 1 s (a dropped link, a restarted peer); errors that a
/// retry cannot fix end the job. `share cancel` ends a queued job at once and a running one by interrupting its
/// connection. Jobs that ended are kept for `keepFinished`, then pruned.
package final class Outbox: AgentPart, Sendable {
    /// One attempt at a job; it reports its progress as it goes.
    package typealias Runner =
        @Sendable (
            OutboxJob, SendCancellation, _ progress: @escaping @Sendable (TransferProgress) -> Void
        ) -> Result<SendReport, ShareFailure>

    package struct Lifetimes: Sendable {
        /// How long a job keeps trying a device that cannot be reached (7 days).
        package var giveUpAfter: TimeInterval = 7 * 86_400
        /// How long an ended job stays listed (7 days).
        package var keepFinished: TimeInterval = 7 * 86_400
        package init() {}
    }

    package let directory: URL
    private struct State {
        var jobs: [String: OutboxJob] = [:]
        /// The session bytes of a running job at its first progress report, to tell whether an attempt moved any.
        var firstProgress: [String: UInt64] = [:]
        var stopping = false
        var workerDone = true
        /// The running job's cancellation.
        var running: (id: String, cancellation: SendCancellation)?
        /// Counts the changes the worker waits for (a job added, retried or cancelled; a stop).
        var changes = 0
        /// The running job's device became reachable during its attempt: a failed attempt is tried again at once.
        var runningHeard = false
        /// The running job's device was removed from the trust list while it ran (its attempt was stopped).
        var runningUntrusted = false
    }
    private let state = Guarded(State())
    private let runner: Runner
    private let nice: Int32
    private let lifetimes: Lifetimes

    /// Loads the persisted jobs; a job that was running when the agent died is queued again.
    /// `nice`: how much lower than the agent's the worker's CPU priority is.
    package init(directory: URL, nice: Int32 = 0, lifetimes: Lifetimes = Lifetimes(), runner: @escaping Runner) throws {
        self.directory = directory
        self.nice = nice
        self.lifetimes = lifetimes
        self.runner = runner
        try DevicePaths.ensurePrivateDirectory(directory)
        var jobs: [String: OutboxJob] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        where name.hasSuffix(".json") {
            guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent(name).path),
                var job = try? JSONDecoder.iso8601.decode(OutboxJob.self, from: data)
            else { continue }
            if job.state == .running {
                job.state = .queued
                job.nextAttempt = Date()
            }
            job.upgradeFinalState()
            job.progress = nil
            jobs[job.id] = job
        }
        state.withLock { state in
            state.jobs = jobs
            pruneFinished(&state)
        }
    }

    /// Removes jobs that ended more than `keepFinished` ago (jobs an earlier version finished count from their
    /// creation). Called with the state locked.
    private func pruneFinished(_ state: inout State) {
        let cutoff = Date().addingTimeInterval(-lifetimes.keepFinished)
        for (id, job) in state.jobs where job.state.isFinal && (job.finished ?? job.created) < cutoff {
            state.jobs[id] = nil
            PathOperations.removeIfPresent(directory.appendingPathComponent("\(id).json").path)
        }
    }

    /// Stops the running job when the device its connection reached is no longer trusted (`isTrusted` false): it
    /// ends as failed, not trusted, instead of sending on to a device the person just removed. Asked once a second
    /// by the agent's session checks.
    package func checkTrust(_ isTrusted: (DeviceID) -> Bool) {
        let stop = state.withLock { state -> SendCancellation? in
            guard let running = state.running, !state.runningUntrusted, let peer = running.cancellation.peer,
                !isTrusted(peer)
            else { return nil }
            state.runningUntrusted = true
            return running.cancellation
        }
        stop?.cancel()
    }

    /// Cancels a job: a queued one ends now; a running one when its connection has been interrupted (the receiver
    /// keeps what it verified). Returns the job as it is now, nil when there is no such job.
    package func cancel(_ id: String) -> OutboxJob? {
        let running = state.withLock { state -> Bool? in
            guard var job = state.jobs[id] else { return nil }
            switch job.state {
            case .queued, .mirroring:
                job.state = .cancelled
                job.finished = Date()
                job.lastError = "cancelled"
                removeForwarded(job)
                state.jobs[id] = job
                state.changes += 1
                try? save(job)
                return false
            case .running:
                if let running = state.running, running.id == id { running.cancellation.cancel() }
                return true
            case .delivered, .declined, .refused, .failed, .cancelled:
                return false
            }
        }
        guard let running else { return nil }
        // The worker ends a running job as cancelled when the attempt returns.
        let finished: (OutboxJob?) -> Bool = { $0.map { $0.state.isFinal } ?? true }
        return state.withLock(when: { !running || finished($0.jobs[id]) }, seconds: 10) { state, _ in state.jobs[id] }
    }

    private func removeForwarded(_ job: OutboxJob) {
        // What was kept only to be passed on goes once the job has ended, delivered or not, and so do the values
        // exported for it.
        for item in job.forwarded ?? [] { PathOperations.removeIfPresent(item.path) }
        if job.items != nil { PathOperations.removeIfPresent(directory.appendingPathComponent(job.id).path) }
    }

    /// Where a job's exported values are kept until it ends: `STATE/outbox/<job>/` (0700).
    package static func exportFolder(_ paths: DevicePaths, job: String) -> URL {
        OutboxJob.exportFolder(paths, job: job)
    }

    package let partName = "outbox"

    package func start() { start(failed: { _ in }) }

    package func start(failed: @escaping @Sendable (Error) -> Void) {
        state.withLock { state in
            state.stopping = false
            state.workerDone = false
        }
        // The worker keeps the agent's priority; each attempt runs on a thread of its own, lowered unless someone
        // waits for the job (a thread can lower its own priority but not raise it again).
        Threads.start(name: "share-outbox", stackSize: 8 << 20) { [self] in
            Syscalls.setThreadPriority(lowerBy: 0)
            work()
            // The worker leaves only when asked to; if it ever left otherwise, no job would go out again.
            if !state.withLock({ $0.stopping }) { failed(PartFailure(part: partName, reason: "its worker ended")) }
        }
    }

    /// Stops the worker: the attempt in progress is interrupted (what the receiver verified stays there, so the job
    /// resumes when the agent starts again; it stays queued), and waits for it.
    package func stop() {
        state.withLock { state in
            state.stopping = true
            state.changes += 1
            state.running?.cancellation.cancel()
        }
        state.wait { $0.workerDone }
    }

    /// Queues a job and wakes the worker. Older jobs to the same device, which it waits behind, are tried when it
    /// is due (the person asks for the device now).
    package func add(_ job: OutboxJob) throws {
        try state.withLock { state in
            try save(job)
            state.jobs[job.id] = job
            for (id, other) in state.jobs
            where other.state == .queued && other.sameDestination(as: job) && other.nextAttempt > job.nextAttempt {
                state.jobs[id]?.nextAttempt = job.nextAttempt
            }
            state.changes += 1
        }
    }

    package var all: [OutboxJob] {
        state.withLock { $0.jobs.values.sorted { $0.created < $1.created } }
    }

    /// A failure's sentence without the advice a one-off send gives ("… and send again"): a queued job tries again
    /// by itself, and its line says when.
    static func withoutResendAdvice(_ message: String) -> String {
        let parts = message.components(separatedBy: "; ")
        let kept = parts.filter { part in
            !["send again", "run the command again", "try again"].contains { part.includes($0) }
        }
        return kept.isEmpty ? message : kept.joined(separator: "; ")
    }

    /// The device named `names` (a watch, or a trusted device heard again: a session from it, its announcement) has
    /// just become reachable: its queued jobs are tried now, not after their backoff.
    package func retryNow(to names: Set<String>) {
        state.withLock { state in
            let now = Date()
            var woken = false
            for (id, job) in state.jobs
            where job.state == .queued && job.via == nil && names.contains(job.to.lowercased())
                && job.nextAttempt > now
            {
                state.jobs[id]?.nextAttempt = now
                state.jobs[id]?.failuresWithoutProgress = nil
                woken = true
            }
            if let running = state.running, let job = state.jobs[running.id], job.via == nil,
                names.contains(job.to.lowercased())
            {
                state.runningHeard = true
            }
            if woken { state.changes += 1 }
        }
    }

    /// A mirror job of an earlier version, now a shared folder: it ends, saying so.
    package func retire(_ id: String, note: String) {
        state.withLock { state in
            guard var job = state.jobs[id], !job.state.isFinal || job.state == .mirroring else { return }
            job.state = .delivered
            job.finished = Date()
            job.lastError = note
            state.jobs[id] = job
            state.changes += 1
            try? save(job)
        }
    }

    /// Waits until job `id` is delivered or failed, `timeout` seconds passed, or `abandoned` says the asker went away
    /// (looked at every second); the job as it stands then (nil: no such job).
    package func wait(for id: String, timeout: Double, until abandoned: () -> Bool = { false }) -> OutboxJob? {
        var left = max(0, timeout)
        while true {
            let slice = min(1, left)
            let (job, ended) = state.withLock(when: { $0.jobs[id].map { $0.state.isFinal } ?? true }, seconds: slice) {
                state, held in (state.jobs[id], held)
            }
            left -= slice
            if ended || left <= 0 || abandoned() { return job }
        }
    }

    /// Progress lives in memory only: it is shown while the job runs, and a restarted agent asks the receiver again.
    private func update(_ id: String, _ progress: TransferProgress) {
        state.withLock { state in
            guard state.jobs[id]?.state == .running else { return }
            if state.firstProgress[id] == nil { state.firstProgress[id] = progress.bytes }
            state.jobs[id]?.progress = progress
        }
    }

    /// Runs `body` on a new thread `nice` steps below the agent's priority and waits for its result.
    private static func onThread(nice: Int32, _ body: @escaping @Sendable () -> Result<SendReport, ShareFailure>)
        -> Result<SendReport, ShareFailure>
    {
        let result = Mutex<Result<SendReport, ShareFailure>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Threads.start(name: "share-send", stackSize: 1 << 20) {
            Syscalls.setThreadPriority(lowerBy: nice)
            let outcome = body()
            result.withLock { $0 = outcome }
            done.signal()
        }
        done.wait()
        return result.withLock { $0 }!
    }

    private func save(_ job: OutboxJob) throws {
        try AtomicFile.write(
            try JSONEncoder.iso8601.encode(job), to: directory.appendingPathComponent("\(job.id).json"), mode: 0o600,
            durable: false)
    }

    private enum Step {
        case stop
        case wait(changes: Int, until: Date?)
        case run(OutboxJob, SendCancellation)
    }

    private func work() {
        defer { state.withLock { $0.workerDone = true } }
        while true {
            let step = state.withLock { state -> Step in
                if state.stopping { return .stop }
                // Each device's jobs go in the order they were made: its oldest queued job is tried, the others
                // wait behind it. Due first; among jobs due at the same moment (a watch that just attached), the
                // oldest first.
                let queued = state.jobs.values.filter { $0.state == .queued }.map { ($0, $0.destination) }
                var oldest: [String: Date] = [:]
                for (job, destination) in queued where oldest[destination].map({ job.created < $0 }) ?? true {
                    oldest[destination] = job.created
                }
                let waiting = queued.filter { oldest[$0.1] == $0.0.created }.map(\.0)
                    .sorted { ($0.nextAttempt, $0.created) < ($1.nextAttempt, $1.created) }
                guard var job = waiting.first else { return .wait(changes: state.changes, until: nil) }
                if job.nextAttempt > Date() { return .wait(changes: state.changes, until: job.nextAttempt) }
                job.state = .running
                job.attempts += 1
                state.jobs[job.id] = job
                try? save(job)
                let cancellation = SendCancellation()
                state.running = (job.id, cancellation)
                state.runningHeard = false
                state.runningUntrusted = false
                return .run(job, cancellation)
            }
            guard case .run(var job, let cancellation) = step else {
                if case .wait(let changes, let until) = step {
                    state.wait(seconds: until.map { max(0, $0.timeIntervalSinceNow) }) { $0.changes != changes }
                    continue
                }
                return
            }
            let id = job.id
            let attempt = job
            let result = Self.onThread(nice: job.foreground == true ? 0 : nice) { [runner] in
                runner(attempt, cancellation) { [weak self] progress in self?.update(id, progress) }
            }
            let progressed = state.withLock { state -> Bool in
                state.running = nil
                let progressed =
                    state.jobs[job.id]?.progress.map { $0.bytes > state.firstProgress[job.id] ?? $0.bytes } ?? false
                state.firstProgress[job.id] = nil
                return progressed
            }
            job.progress = nil
            switch result {
            case .success(let report):
                job.delivered = report.delivered.count
                job.refused = report.refused.count
                job.bytesSent += report.bytesSent
                job.bytesSkipped = report.bytesSkipped
                job.bytesCrossed = (job.bytesCrossed ?? 0) + report.linkBytes
                job.bytesFromCopy = (job.bytesFromCopy ?? 0) + report.bytesFromBasis
                job.state = OutboxJob.finalState(
                    delivered: report.delivered.count, refusals: report.refused.map(\.reason))
                job.failure = report.refused.isEmpty ? nil : .refused
                job.lastError =
                    report.refused.isEmpty
                    ? nil : report.refused.map { "\($0.label): \($0.reason)" }.joined(separator: "; ")
            case .failure where cancellation.isCancelled && state.withLock({ $0.stopping }):
                // Interrupted by the agent's stop, not by the person: tried again when it starts.
                job.state = .queued
                job.nextAttempt = Date()
                job.lastError = "interrupted when the agent stopped; it resumes when the agent starts again"
            case .failure where cancellation.isCancelled && state.withLock({ $0.runningUntrusted }):
                // Its device was removed from the trust list while it ran: not sent on, not tried again.
                job.state = .failed
                job.failure = .notTrusted
                job.lastError =
                    "\(job.via ?? job.to) was removed from this device's trust list while the job ran; it stopped (to send again, trust the device again: share trust add)"
            case .failure(let error) where cancellation.isCancelled:
                job.lastError = "cancelled: \(error.message)"
                job.state = .cancelled
            case .failure(let error)
            where job.localsend != nil && ![.unavailable, .ioError].contains(error.code) && !progressed
                && job.attempts > 1 && job.lastError == error.message:
                // A LocalSend device was reached and failed the same way twice without taking a byte: trying again
                // would fail again (a name it refuses, a request it does not take). Said, not repeated. (A device
                // away or a full disk there can change: those are tried until the job gives up. A share device's
                // cut transfer resumes, so it is always tried again.)
                job.state = .failed
                job.failure = error.code
                job.lastError = "\(error.message) (failed the same way twice; not tried again)"
            case .failure(let error):
                job.lastError = error.message
                if [.unavailable, .interrupted, .ioError].contains(error.code),
                    Date().timeIntervalSince(job.created) >= lifetimes.giveUpAfter
                {
                    job.state = .failed
                    job.failure = .unavailable
                    job.lastError =
                        "gave up after \(Self.describe(lifetimes.giveUpAfter)) of trying: \(error.message)"
                } else if let retryAfter = error.retryAfter {
                    job.lastError = Self.withoutResendAdvice(error.message)
                    // Held for the person's answer there: offered again when the receiver asked, so the answer
                    // is learned within seconds and the offer stays listed there as still wanted.
                    job.state = .queued
                    job.nextAttempt = Date().addingTimeInterval(min(max(retryAfter, 1), 30))
                } else if [.unavailable, .interrupted, .ioError].contains(error.code) {
                    // The job tries again by itself: no advice to send again.
                    job.lastError = Self.withoutResendAdvice(error.message)
                    job.state = .queued
                    let failures = progressed ? 1 : (job.failuresWithoutProgress ?? 0) + 1
                    job.failuresWithoutProgress = failures
                    let delay = min(30, pow(2, Double(min(failures - 1, 5))))
                    job.nextAttempt = Date().addingTimeInterval(delay)
                } else {
                    job.state = .failed
                    job.failure = error.code
                }
            }
            if job.state.isFinal {
                job.finished = Date()
                removeForwarded(job)
            }
            var ended = job
            state.withLock { state in
                // Its device came back while the attempt failed (a watch attaching): tried again now, not after the
                // backoff (the jobs queued behind it wait for it).
                if state.runningHeard, ended.state == .queued { ended.nextAttempt = Date() }
                state.runningHeard = false
                state.jobs[ended.id] = ended
                try? save(ended)
                pruneFinished(&state)
            }
        }
    }

    static func describe(_ seconds: TimeInterval) -> String {
        if seconds >= 86_400, seconds.truncatingRemainder(dividingBy: 86_400) == 0 {
            return "\(Int(seconds / 86_400)) days"
        }
        if seconds >= 3600, seconds.truncatingRemainder(dividingBy: 3600) == 0 { return "\(Int(seconds / 3600)) hours" }
        return "\(Int(seconds)) s"
    }
}
