import ShareThreads
import FoundationEssentials
import Glibc
import ShareDisk

/// Extraction of a tar stream that arrives in pieces (chunks from a connection), on its own thread: `push` hands
/// over bytes in stream order and blocks while a few chunks are queued, so memory stays bounded.
///
/// Resuming: given the checkpoint of an interrupted extraction and the offset where the new input starts (a chunk
/// boundary at or before the checkpoint's safe offset), libarchive is restarted at the interrupted entry's header:
/// the saved header blocks, then zeros standing for the data already on disk (made as they are read, never held: a
/// resume deep into a large file costs no memory for what is already there), then the new bytes.
public final class StreamExtraction: Sendable {
    /// The folder extracted into.
    public let root: Directory
    /// Where the extraction stands (its checkpoint), for any thread.
    public let mark: ExtractionMark
    private struct State {
        var queue: [[UInt8]] = []
        var headOffset = 0
        var inputEnded = false
        var cancelled = false
        var finished = false
        var failure: Error?
        var starving = false
    }
    private let state = Guarded(State())
    private let capacity: Int

    /// The latest consistent point of the extraction (`Extractor.checkpoint`).
    public var checkpoint: ExtractionCheckpoint? { mark.checkpoint }

    /// Where a resumed input must start for `checkpoint`: the chunk boundary at or before its safe offset.
    public static func resumeOffset(for checkpoint: ExtractionCheckpoint, chunkSize: Int) -> Int64 {
        checkpoint.safeOffset / Int64(chunkSize) * Int64(chunkSize)
    }

    /// Starts extracting into `root`. `inputOffset` is the stream offset of the first byte that will be pushed (0,
    /// or `resumeOffset(for: checkpoint, …)` when resuming).
    public init(
        root: Directory, policy: ExtractionPolicy = ExtractionPolicy(),
        resuming checkpoint: ExtractionCheckpoint? = nil,
        inputOffset: Int64 = 0, queuedChunks: Int = 4
    ) throws {
        capacity = queuedChunks
        var prefix: [UInt8] = []
        var zeros: Int64 = 0
        var skipInput: Int64 = 0
        var base: Int64 = inputOffset
        var adjusted = checkpoint
        if var resume = checkpoint {
            guard inputOffset <= resume.safeOffset else {
                throw ArchiveError(.corrupt, "the resumed stream starts after what is on disk")
            }
            base = resume.headerOffset
            if inputOffset <= resume.headerOffset {
                skipInput = resume.headerOffset - inputOffset
                resume.written = 0
            } else if inputOffset <= resume.dataOffset {
                prefix = Array(resume.header[0..<Int(inputOffset - resume.headerOffset)])
                resume.written = 0
            } else {
                prefix = Array(resume.header)
                zeros = inputOffset - resume.dataOffset
                resume.written = UInt64(zeros)
            }
            adjusted = resume
        }
        let extractor = Extractor(root: root, policy: policy, resuming: adjusted)
        self.root = root
        mark = extractor.mark
        let (start, filler, skip, streamBase) = (prefix, zeros, skipInput, base)
        // The extractor is the thread's alone. The thread holds this object only while it runs; keeping the thread
        // in a property would make a cycle (object → thread → closure → object) that LeakSanitizer found leaking
        // every extraction's buffers.
        Threads.start(name: "share-extract") { [self] in
            run(extractor, prefix: start, zeros: filler, skip: skip, base: streamBase)
        }
    }

    private func run(_ extractor: Extractor, prefix: [UInt8], zeros: Int64, skip: Int64, base: Int64) {
        var prefixLeft = prefix[...]
        var zerosLeft = zeros
        var skipLeft = skip
        do {
            let reader = try ArchiveReader(
                stream: { [self] buffer in
                    if !prefixLeft.isEmpty {
                        let n = min(buffer.count, prefixLeft.count)
                        buffer.copyBytes(from: prefixLeft.prefix(n))
                        prefixLeft = prefixLeft.dropFirst(n)
                        return n
                    }
                    if zerosLeft > 0 {
                        let n = Int(min(Int64(buffer.count), zerosLeft))
                        memset(buffer.baseAddress!, 0, n)  // a loop of stores in a debug build: 1.5 ms per MiB
                        zerosLeft -= Int64(n)
                        return n
                    }
                    while true {
                        let n = try pull(into: buffer)
                        guard skipLeft > 0, n > 0 else { return n }
                        if Int64(n) <= skipLeft {
                            skipLeft -= Int64(n)
                            continue
                        }
                        let keep = n - Int(skipLeft)
                        buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer[Int(skipLeft)..<n]))
                        skipLeft = 0
                        return keep
                    }
                })
            try extractor.run(reader, streamBase: base)
            end(nil)
        } catch {
            end(error)
        }
    }

    private func end(_ error: Error?) {
        state.withLock { state in
            state.failure = error
            state.finished = true
            state.queue.removeAll()
        }
    }

    /// Extracts into the folder at `path`, created (private) if missing.
    public convenience init(
        rootPath path: String, policy: ExtractionPolicy = ExtractionPolicy(),
        resuming checkpoint: ExtractionCheckpoint? = nil, inputOffset: Int64 = 0, queuedChunks: Int = 4
    ) throws {
        let root: Directory
        do {
            root = try Directory.open(path, create: true, mode: 0o700)
        } catch let error as DiskError {
            throw ArchiveError(.io, error.message)
        }
        try self.init(
            root: root, policy: policy, resuming: checkpoint, inputOffset: inputOffset, queuedChunks: queuedChunks)
    }

    /// Copies the next queued bytes into `buffer`; 0 at the end of input.
    private func pull(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        // Said to be starving (for `drain`) while it waits.
        state.withLock { state in
            if state.queue.isEmpty && !state.inputEnded && !state.cancelled { state.starving = true }
        }
        return try state.withLock(when: { !$0.queue.isEmpty || $0.inputEnded || $0.cancelled }) { state, _ in
            state.starving = false
            if state.cancelled { throw ArchiveError(.cancelled, "the transfer stopped") }
            guard let head = state.queue.first else { return 0 }
            let offset = state.headOffset
            let n = min(buffer.count, head.count - offset)
            head.withUnsafeBytes {
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + n)]))
            }
            state.headOffset += n
            if state.headOffset == head.count {
                state.queue.removeFirst()
                state.headOffset = 0
            }
            return n
        }
    }

    /// Queues the next bytes of the stream. Throws the extraction's error once it has failed.
    public func push(_ bytes: ArraySlice<UInt8>) throws {
        let piece = Array(bytes)
        try state.withLock(when: { $0.queue.count < capacity || $0.finished || $0.cancelled }) { state, _ in
            if let failure = state.failure { throw failure }
            if state.finished || state.cancelled { return }  // the archive ended; trailing padding is not needed
            state.queue.append(piece)
        }
    }

    /// Ends the input and waits for the extraction; throws its error, or `corrupt` if the archive was incomplete.
    public func finish() throws {
        state.withLock { $0.inputEnded = true }
        let failure = state.withLock(when: { $0.finished }) { state, _ in state.failure }
        if let failure { throw failure }
    }

    /// Waits until the extractor has taken everything pushed and waits for more (or has ended).
    public func drain() {
        state.wait { $0.finished || ($0.queue.isEmpty && $0.starving) }
    }

    /// Stops the extraction (the connection failed) and waits for its thread; the checkpoint stays readable.
    public func cancel() {
        state.withLock { $0.cancelled = true }
        state.wait { $0.finished }
    }

    /// The error the extraction stopped with, if it has.
    public var error: Error? { state.withLock { $0.failure } }
}
