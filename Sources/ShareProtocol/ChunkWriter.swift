import Foundation
import ShareThreads

/// Checks and stores the chunks of large items on a thread of its own while the receiving thread reads and
/// decrypts the next ones: each chunk's digest is compared, then the chunk goes to its item's payload (the disk) and
/// its digest is recorded. At most `depth` chunks wait (`ReceiverDriver.writeAhead`); a chunk that does not match its
/// digest stops everything after it (nothing more is written), and the mismatch is what the receiving thread throws
/// next.
final class ChunkWriter: @unchecked Sendable {  // guarded by `condition`
    private struct Job {
        var index: Int
        var buffer: ChunkBuffer
        var length: Int
        var digest: [UInt8]
        var payload: IncomingPayload
        /// The item's hasher, used by the writer thread alone.
        var hasher: ChunkHasher
    }

    private let condition = ThreadCondition()
    private var jobs: [Job] = []
    private var free: [ChunkBuffer]
    private var recorded: [(index: Int, digest: [UInt8])] = []
    private var busy = false
    private var failure: Error?
    private var stopping = false
    private var running = true

    init(depth: Int) {
        free = (0..<depth).map { _ in ChunkBuffer(size: Limits.maxChunkPayload) }
        Threads.start(name: "share-write") { [self] in work() }
    }

    /// A free buffer to read the next chunk into (waits while every buffer holds a chunk not written yet).
    func takeBuffer() throws -> ChunkBuffer {
        try condition.withLock {
            while free.isEmpty && failure == nil { condition.wait() }
            if let failure { throw failure }
            return free.removeLast()
        }
    }

    /// Gives back a buffer that held no chunk after all (a control frame arrived).
    func giveBack(_ buffer: ChunkBuffer) {
        condition.withLock {
            free.append(buffer)
            condition.broadcast()
        }
    }

    /// Queues chunk `index` (its `length` bytes in `buffer`) for `payload`: checked against `digest` with `hasher`
    /// (which only the writer thread uses from now on), then written.
    func submit(
        index: Int, buffer: ChunkBuffer, length: Int, digest: [UInt8], payload: IncomingPayload, hasher: ChunkHasher
    ) throws {
        try condition.withLock {
            if let failure { throw failure }
            jobs.append(
                Job(index: index, buffer: buffer, length: length, digest: digest, payload: payload, hasher: hasher))
            condition.broadcast()
        }
    }

    /// Waits until every queued chunk is written; returns the digests recorded since the last drain, or throws what
    /// went wrong.
    func drain() throws -> [(index: Int, digest: [UInt8])] {
        try condition.withLock {
            while (!jobs.isEmpty || busy) && failure == nil { condition.wait() }
            if let failure { throw failure }
            defer { recorded.removeAll() }
            return recorded
        }
    }

    /// Stops once the chunk being written is done; queued chunks are dropped. Returns when the thread has left.
    func stop() {
        condition.lock()
        stopping = true
        jobs.removeAll()
        condition.broadcast()
        while running { condition.wait() }
        condition.unlock()
    }

    private func work() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopping { condition.wait() }
            if stopping || failure != nil {
                running = false
                condition.broadcast()
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            busy = true
            condition.unlock()
            var outcome: Error?
            let data = UnsafeRawBufferPointer(rebasing: job.buffer.bytes[0..<job.length])
            if job.hasher.digest(data) != job.digest {
                outcome = ProtocolError(.digestMismatch, "chunk \(job.index) does not match its digest")
            } else {
                do {
                    try job.payload.write(index: job.index, bytes: data, digest: job.digest)
                } catch {
                    outcome = error
                }
            }
            condition.withLock {
                busy = false
                free.append(job.buffer)
                if let outcome {
                    if failure == nil { failure = outcome }
                    jobs.removeAll()
                } else {
                    recorded.append((job.index, job.digest))
                }
                condition.broadcast()
            }
        }
    }
}
