import FoundationEssentials
import ShareThreads

/// Checks and stores the chunks of large items on a thread of its own while the receiving thread reads and
/// decrypts the next ones: each chunk's digest is compared, then the chunk goes to its item's payload (the disk) and
/// its digest is recorded. At most `depth` chunks wait (`ReceiverDriver.writeAhead`); a chunk that does not match its
/// digest stops everything after it (nothing more is written), and the mismatch is what the receiving thread throws
/// next.
final class ChunkWriter: Sendable {
    private struct Job {
        var index: Int
        var buffer: ChunkBuffer
        var length: Int
        var digest: [UInt8]
        var payload: IncomingPayload
        /// The item's hasher, used by the writer thread alone.
        var hasher: ChunkHasher
        /// Already compared with its digest (a patched chunk).
        var checked: Bool
        /// The basis range it is, whole, when its blocks may be shared.
        var origin: ChunkOrigin?
    }

    private struct State {
        var jobs: [Job] = []
        var free: [ChunkBuffer]
        var recorded: [(index: Int, digest: [UInt8])] = []
        var busy = false
        var failure: Error?
        var stopping = false
        var running = true
    }
    private let state: Guarded<State>

    init(depth: Int) {
        state = Guarded(State(free: (0..<depth).map { _ in ChunkBuffer(size: Limits.maxChunkPayload) }))
        Threads.start(name: "share-write") { [self] in work() }
    }

    /// A free buffer to read the next chunk into (waits while every buffer holds a chunk not written yet).
    func takeBuffer() throws -> ChunkBuffer {
        try state.withLock(when: { !$0.free.isEmpty || $0.failure != nil }) { state, _ in
            if let failure = state.failure { throw failure }
            return state.free.removeLast()
        }
    }

    /// Gives back a buffer that held no chunk after all (a control frame arrived).
    func giveBack(_ buffer: ChunkBuffer) {
        state.withLock { $0.free.append(buffer) }
    }

    /// Queues chunk `index` (its `length` bytes in `buffer`) for `payload`: checked against `digest` with `hasher`
    /// (which only the writer thread uses from now on), then written.
    func submit(
        index: Int, buffer: ChunkBuffer, length: Int, digest: [UInt8], payload: IncomingPayload, hasher: ChunkHasher,
        checked: Bool = false, origin: ChunkOrigin? = nil
    ) throws {
        try state.withLock { state in
            if let failure = state.failure { throw failure }
            state.jobs.append(
                Job(
                    index: index, buffer: buffer, length: length, digest: digest, payload: payload, hasher: hasher,
                    checked: checked, origin: origin))
        }
    }

    /// Waits until every queued chunk is written; returns the digests recorded since the last drain, or throws what
    /// went wrong.
    func drain() throws -> [(index: Int, digest: [UInt8])] {
        try state.withLock(when: { ($0.jobs.isEmpty && !$0.busy) || $0.failure != nil }) { state, _ in
            if let failure = state.failure { throw failure }
            defer { state.recorded.removeAll() }
            return state.recorded
        }
    }

    /// Stops once the chunk being written is done; queued chunks are dropped. Returns when the thread has left.
    func stop() {
        state.withLock { state in
            state.stopping = true
            state.jobs.removeAll()
        }
        state.wait { !$0.running }
    }

    private func work() {
        while true {
            let next: Job? = state.withLock(when: { !$0.jobs.isEmpty || $0.stopping }) { state, _ in
                if state.stopping || state.failure != nil {
                    state.running = false
                    return nil
                }
                state.busy = true
                return state.jobs.removeFirst()
            }
            guard let job = next else { return }
            var outcome: Error?
            let data = UnsafeRawBufferPointer(rebasing: job.buffer.bytes[0..<job.length])
            if !job.checked, job.hasher.digest(data) != job.digest {
                outcome = ProtocolError(.digestMismatch, "chunk \(job.index) does not match its digest")
            } else {
                do {
                    if let origin = job.origin {
                        try job.payload.write(index: job.index, bytes: data, digest: job.digest, origin: origin)
                    } else {
                        try job.payload.write(index: job.index, bytes: data, digest: job.digest)
                    }
                } catch {
                    outcome = error
                }
            }
            state.withLock { state in
                state.busy = false
                state.free.append(job.buffer)
                if let outcome {
                    if state.failure == nil { state.failure = outcome }
                    state.jobs.removeAll()
                } else {
                    state.recorded.append((job.index, job.digest))
                }
            }
        }
    }
}
