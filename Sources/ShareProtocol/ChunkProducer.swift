import FoundationEssentials
import ShareThreads

/// A buffer for one chunk, allocated once and reused (no copy-on-write: it is handed between threads, never copied).
final class ChunkBuffer {
    let bytes: UnsafeMutableRawBufferPointer

    init(size: Int) { bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 64) }
    deinit { bytes.deallocate() }
}

/// A chunk made ready to send by a producer thread: its bytes (in a buffer the consumer hands back), its digest, and
/// its compressed form when that pays.
struct PreparedChunk {
    var index: Int
    var buffer: ChunkBuffer
    var count: Int
    var digest: [UInt8]
    var packed: [UInt8]?
    /// False for a chunk the receiver already holds: only its digest is needed.
    var send: Bool
}

/// Reads (or makes), hashes and compresses the chunks of one item on a thread of its own, a few chunks ahead of the
/// thread that sends them: the two overlap on two cores, and a busy neighbour on one core slows only half the work.
/// At most `depth` buffers exist; each is reused. Whatever ends the item, `stop()` returns only once the producer
/// thread has left its source alone.
final class ChunkProducer: Sendable {
    private struct State {
        var ready: [PreparedChunk] = []
        var free: [ChunkBuffer] = []
        var finished = false
        var stopped = false
        var running = true
        var failure: Error?
    }
    private let state = Guarded(State())

    /// What the producer's body uses to hand chunks over.
    final class Emitter {
        private unowned let producer: ChunkProducer
        private let chunkSize: Int
        private let hasher: ChunkHasher
        private let compressor: AdaptiveCompressor?
        private let held: (Int) -> Bool
        private var current: ChunkBuffer?
        private var fill = 0
        /// The index of the next chunk.
        private(set) var next = 0

        fileprivate init(
            producer: ChunkProducer, chunkSize: Int, hasher: ChunkHasher, compressor: AdaptiveCompressor?,
            held: @escaping (Int) -> Bool
        ) {
            self.producer = producer
            self.chunkSize = chunkSize
            self.hasher = hasher
            self.compressor = compressor
            self.held = held
        }

        /// One whole chunk at `index`, filled by `read` (which returns how many bytes it put in).
        func chunk(_ index: Int, read: (UnsafeMutableRawBufferPointer) throws -> Int) throws {
            let buffer = try producer.takeBuffer()
            let count = try read(buffer.bytes)
            try hand(index: index, buffer: buffer, count: count)
        }

        /// Bytes of a stream: cut into chunks as they fill.
        func append(_ bytes: UnsafeRawBufferPointer) throws {
            var offset = 0
            while offset < bytes.count {
                if current == nil { current = try producer.takeBuffer() }
                let n = min(chunkSize - fill, bytes.count - offset)
                current!.bytes.baseAddress!.advanced(by: fill).copyMemory(
                    from: bytes.baseAddress!.advanced(by: offset), byteCount: n)
                fill += n
                offset += n
                if fill == chunkSize { try flush() }
            }
        }

        /// Hands over the chunk being filled (or an empty one when the stream made nothing at all).
        func flush() throws {
            if current == nil {
                guard next == 0 else { return }
                current = try producer.takeBuffer()
            }
            let buffer = current!
            current = nil
            let count = fill
            fill = 0
            try hand(index: next, buffer: buffer, count: count)
        }

        private func hand(index: Int, buffer: ChunkBuffer, count: Int) throws {
            let send = !held(index)
            let bytes = UnsafeRawBufferPointer(rebasing: buffer.bytes[0..<count])
            let digest = hasher.digest(bytes)
            let packed = send ? compressor?.compress(bytes) : nil
            next = index + 1
            try producer.put(
                PreparedChunk(index: index, buffer: buffer, count: count, digest: digest, packed: packed, send: send))
        }
    }

    /// Starts `body` on a new thread; it makes the item's chunks through its emitter, in order.
    init(
        chunkSize: Int, depth: Int, hasher: ChunkHasher, compressor: AdaptiveCompressor?,
        held: @escaping (Int) -> Bool, body: @escaping (Emitter) throws -> Void
    ) {
        let buffers = (0..<depth).map { _ in ChunkBuffer(size: chunkSize) }
        state.withLock { $0.free = buffers }
        // The emitter, the body and what it captures are used by the producer thread alone from here on.
        nonisolated(unsafe) let emitter = Emitter(
            producer: self, chunkSize: chunkSize, hasher: hasher, compressor: compressor, held: held)
        nonisolated(unsafe) let run = body
        Threads.start(name: "share-chunks") { [self] in
            var outcome: Error?
            do {
                try run(emitter)
            } catch {
                outcome = error
            }
            state.withLock { state in
                if let outcome, !(outcome is Stopped) { state.failure = outcome }
                state.finished = true
                state.running = false
            }
        }
    }

    /// The next chunk, in order; nil once the body has made them all. The body's error is thrown here.
    func next() throws -> PreparedChunk? {
        try state.withLock(when: { !$0.ready.isEmpty || $0.finished }) { state, _ in
            if !state.ready.isEmpty { return state.ready.removeFirst() }
            if let failure = state.failure { throw failure }
            return nil
        }
    }

    /// Gives a chunk's buffer back for the next chunk.
    func recycle(_ buffer: ChunkBuffer) {
        state.withLock { $0.free.append(buffer) }
    }

    /// Stops the producer and waits until its thread has left the source.
    func stop() {
        state.withLock { $0.stopped = true }
        state.wait { !$0.running }
    }

    private struct Stopped: Error {}

    fileprivate func takeBuffer() throws -> ChunkBuffer {
        try state.withLock(when: { !$0.free.isEmpty || $0.stopped }) { state, _ in
            if state.stopped { throw Stopped() }
            return state.free.removeLast()
        }
    }

    fileprivate func put(_ chunk: PreparedChunk) throws {
        try state.withLock { state in
            if state.stopped { throw Stopped() }
            state.ready.append(chunk)
        }
    }
}
