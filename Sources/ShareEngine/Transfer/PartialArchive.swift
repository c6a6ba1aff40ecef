import Synchronization
import CoreTransferable
import FoundationEssentials
import ShareArchive
import ShareDisk
import ShareProtocol
import ShareTLS
import ShareTrust
import UniformTypeIdentifiers

/// An archive being received and extracted as it arrives into a partial folder beside its ledger. Chunks come in
/// order (the receiver machine refuses anything else); the extraction's checkpoint decides which chunks count as
/// held after an interruption. Only the driver's verified chunks reach it.
final class PartialArchive: IncomingPayload {
    let store: PartialStore
    let key: String
    private let lock: FileLock
    private let extraction: StreamExtraction
    /// The digests, the journal and the ledger, shared with the extraction's thread.
    private let progress: ArchiveProgress
    private var nextIndex: Int
    private var stopped = false
    private var released = false
    let held: [Int: [UInt8]]
    /// The digest of `held` and of the chunks written.
    let digest: DigestAlgorithm
    let label: String
    /// Whether the item can resume (it has a version): only then is progress journaled.
    private let resumable: Bool

    /// A ledger from another version, size, chunk size or digest (`digest`; nil when looking up what is held: any),
    /// or written before a reboot (extracted files may have lost unflushed writes and cannot be re-hashed against
    /// stream chunks), starts the item over.
    init(
        store: PartialStore, sender: DeviceID, item: OfferItem, representation: OfferedRepresentation, chunkSize: Int,
        policy: ExtractionPolicy, digest wanted: DigestAlgorithm?
    ) throws {
        self.store = store
        label = item.label
        resumable = item.version != nil
        key = PartialStore.key(sender: sender, item: item.id, contentType: representation.contentType, archive: true)
        lock = try store.lock(key, label: item.label)
        var ledger = PartialStore.Ledger(
            sender: sender.description, item: item.id, version: item.version,
            contentType: representation.contentType, size: representation.size, chunkSize: chunkSize,
            suggestedName: representation.suggestedFileName, chunks: [:], boot: PartialStore.bootID)
        if item.version != nil, let old = store.readLedger(key), old.version == item.version,
            old.chunkSize == chunkSize, old.size == representation.size, old.contentType == representation.contentType,
            old.boot == PartialStore.bootID, let checkpoint = old.archive,
            wanted == nil || wanted == old.recordedDigest,
            store.partials.info("\(key).dir")?.kind == .directory
        {
            ledger.chunks = old.chunks
            ledger.archive = checkpoint
            ledger.digest = old.digest
        } else {
            ledger.digest = wanted == .sha256 ? nil : wanted
            _ = try? store.partials.remove("\(key).json")
            _ = try? store.partials.remove("\(key).\(LedgerJournal.suffix)")
            _ = try? store.partials.removeTree("\(key).dir")
        }
        var start: Int64 = 0
        if let checkpoint = ledger.archive {
            start = StreamExtraction.resumeOffset(for: checkpoint, chunkSize: chunkSize)
        }
        var next = Int(start / Int64(chunkSize))
        var digests: [Int: String] = [:]
        for index in 0..<next {
            guard let digest = ledger.chunks[String(index)] else {
                // A gap in the ledger: start over.
                next = 0
                start = 0
                break
            }
            digests[index] = digest
        }
        if next == 0 {
            digests = [:]
            ledger.archive = nil
            ledger.chunks = [:]
            _ = try? store.partials.removeTree("\(key).dir")
        }
        digest = ledger.recordedDigest
        nextIndex = next
        held = digests.reduce(into: [:]) { held, entry in
            if let digest = Hex.bytes(entry.value) { held[entry.key] = digest }
        }
        do {
            let root = try store.partials.directory("\(key).dir", create: true, mode: 0o700)
            // Two chunks queued ahead of the extraction (not four): what a killed receiver loses is what was
            // handed over and not yet on disk, so a folder's interruption costs about what a file's does.
            extraction = try StreamExtraction(
                root: root, policy: policy, resuming: ledger.archive, inputOffset: start, queuedChunks: 2)
        } catch let error as DiskError {
            lock.release()
            throw ProtocolError(.storage, "the receiver cannot extract \(item.label): \(error.message)")
        } catch {
            lock.release()
            throw Self.protocolError(error)
        }
        progress = ArchiveProgress(
            store: store, key: key, extraction: extraction, ledger: ledger, digests: digests, journaled: next)
        try checkpoint(force: true)
        if resumable {
            // Weakly: the progress holds the extraction, which holds its mark (a cycle would keep all three).
            extraction.mark.whenAdvanced { [weak progress] offset in progress?.extracted(upTo: offset) }
        }
    }

    deinit {
        if !stopped { extraction.cancel() }
    }

    func write(index: Int, bytes: UnsafeRawBufferPointer, digest: [UInt8]) throws {
        guard index == nextIndex else {
            throw ProtocolError(.badMessage, "archive chunk \(index) arrived out of order (expected \(nextIndex))")
        }
        // The digest is known before the extraction can reach the chunk's end (it journals from its own thread).
        progress.handed(index, digest: Hex.string(digest))
        do {
            try extraction.push(Array(bytes)[...])
        } catch {
            throw fail(error)
        }
        nextIndex += 1
        if resumable { try progress.journal() }
        try checkpoint(force: false)
    }

    /// Records the chunks up to the extraction's checkpoint in the ledger (emptying the journal): at most every
    /// second or 64 chunks unless forced.
    func checkpoint(force: Bool) throws {
        try progress.rewriteLedger(force: force)
    }

    /// Ends the extraction (every chunk is in and verified): any last entry error surfaces here. Returns the
    /// extracted folder, still inside the partials.
    func finish(durable: Bool) throws -> Directory {
        do {
            try extraction.finish()
        } catch {
            throw fail(error)
        }
        stopped = true
        let root = extraction.root
        if durable { Self.sync(root) }
        return root
    }

    /// Moves the extracted folder into the target folder under `name` (or a free variant); returns the name.
    func place(as name: String, before: Placing) throws -> String {
        let placed = try store.place("\(key).dir", as: name, before: before)
        _ = try? store.partials.remove("\(key).json")
        progress.close(removing: true)
        release()
        return placed
    }

    func complete(done: Done) throws -> Ack {
        preconditionFailure("a disk sink completes its items itself")
    }

    /// Stops after an extraction error: a hostile or broken archive leaves nothing behind.
    private func fail(_ error: Error) -> Error {
        let mapped = Self.protocolError(error)
        if mapped.code == .unsafeArchive || mapped.code == .digestMismatch {
            discard()
        } else {
            suspend()
        }
        return mapped
    }

    static func protocolError(_ error: Error) -> ProtocolError {
        guard let error = error as? ArchiveError else {
            return error as? ProtocolError ?? ProtocolError(.internalError, "\(error)")
        }
        switch error.kind {
        case .unsafeEntry, .limit, .corrupt: return ProtocolError(.unsafeArchive, error.message)
        case .noSpace: return ProtocolError(.storage, "the receiver's disk is full: \(error.message)")
        case .io: return ProtocolError(.storage, "the receiver cannot write: \(error.message)")
        case .sourceChanged: return ProtocolError(.sourceChanged, error.message)
        case .cancelled: return ProtocolError(.cancelled, error.message)
        }
    }

    func discard() {
        if !stopped {
            extraction.cancel()
            stopped = true
        }
        _ = try? store.partials.remove("\(key).json")
        progress.close(removing: true)
        _ = try? store.partials.removeTree("\(key).dir")
        release()
    }

    func suspend() {
        if !stopped {
            // Every chunk handed over was verified: extracted before the checkpoint, so a cut connection costs a
            // folder no more than a file (the chunk in flight), not the extraction's queue as well.
            if extraction.error == nil { extraction.drain() }
            extraction.cancel()
            stopped = true
            try? checkpoint(force: true)
        }
        progress.close(removing: false)
        release()
    }

    private func release() {
        guard !released else { return }
        released = true
        lock.release()
        _ = try? store.partials.remove("\(key).lock")
    }

    /// Flushes every file and folder of a completed extraction (`--fsync`), through the handles.
    static func sync(_ root: Directory) {
        var pending = [root]
        while let folder = pending.popLast() {
            folder.sync()
            for name in folder.entries() {
                switch folder.info(name)?.kind {
                case .directory: if let sub = try? folder.directory(components: [name]) { pending.append(sub) }
                case .file: try? folder.openFile(name, .read).sync()
                default: break
                }
            }
        }
    }
}

/// What the connection's thread (each chunk handed over) and the extraction's (each time more is on disk) share: the
/// chunk digests, the journal and the ledger. Both journal, so a killed receiver loses what was not yet extracted,
/// not also what was extracted since the last chunk arrived.
private final class ArchiveProgress: Sendable {
    private struct State {
        var ledger: PartialStore.Ledger
        var digests: [Int: String]
        /// Chunks below this index are in the ledger or the journal.
        var journaled: Int
        var unflushed = 0
        var lastCheckpoint = ContinuousClock.now
        /// Each extracted chunk and where the extraction stands, between checkpoints.
        let journal: LedgerJournal
        /// The item ended: nothing more is recorded.
        var closed = false
        /// A journal write that failed on the extraction's thread, thrown at the next chunk.
        var failure: ProtocolError?
    }
    private let state: Mutex<State>
    private let store: PartialStore
    private let key: String
    private let extraction: StreamExtraction

    init(
        store: PartialStore, key: String, extraction: StreamExtraction, ledger: PartialStore.Ledger,
        digests: [Int: String], journaled: Int
    ) {
        self.store = store
        self.key = key
        self.extraction = extraction
        state = Mutex(
            State(
                ledger: ledger, digests: digests, journaled: journaled,
                journal: LedgerJournal(store: store, key: key)))
    }

    /// A verified chunk is about to be handed to the extraction.
    func handed(_ index: Int, digest: String) {
        state.withLock { state in
            state.digests[index] = digest
            state.unflushed += 1
        }
    }

    /// The connection's thread, after each chunk: journals what the extraction has put on disk, or throws what
    /// failed on its thread.
    func journal() throws {
        try state.withLock { state in
            if let failure = state.failure { throw failure }
            try record(&state)
        }
    }

    /// The extraction's thread: more of the stream is on disk (up to `offset`).
    func extracted(upTo offset: Int64) {
        state.withLock { state in
            guard state.failure == nil, Int(offset) / state.ledger.chunkSize > state.journaled else { return }
            do {
                try record(&state)
            } catch {
                state.failure = error as? ProtocolError ?? ProtocolError(.storage, "\(error)")
            }
        }
    }

    /// Journals the chunks the extraction has put on disk since the last line (it runs a few chunks behind the
    /// ones handed to it): a resume may skip exactly those, so the journal, like the ledger, holds nothing else.
    private func record(_ state: inout State) throws {
        guard !state.closed, let mark = extraction.checkpoint else { return }
        let chunkSize = state.ledger.chunkSize
        let safe = Int(StreamExtraction.resumeOffset(for: mark, chunkSize: chunkSize)) / chunkSize
        guard safe > state.journaled else { return }
        for chunk in state.journaled..<safe {
            guard let digest = state.digests[chunk] else { return }
            try state.journal.record(chunk: chunk, digest: digest, checkpoint: chunk == safe - 1 ? mark : nil)
            state.journaled = chunk + 1
        }
    }

    /// Records the chunks up to the extraction's checkpoint in the ledger (emptying the journal): at most every
    /// second or 64 chunks unless forced.
    func rewriteLedger(force: Bool) throws {
        try state.withLock { state in
            guard !state.closed else { return }
            guard force || state.unflushed >= 64 || ContinuousClock.now - state.lastCheckpoint > .seconds(1) else {
                return
            }
            // Never back: a resumed extraction passes again over the part of its entry already on disk (its mark
            // climbs from the entry's start), and the ledger keeps what it held until the mark is past it.
            if let mark = extraction.checkpoint, mark.safeOffset >= state.ledger.archive?.safeOffset ?? 0 {
                state.ledger.archive = mark
            }
            if let saved = state.ledger.archive {
                let chunkSize = state.ledger.chunkSize
                let held = Int(StreamExtraction.resumeOffset(for: saved, chunkSize: chunkSize)) / chunkSize
                let digests = state.digests
                state.ledger.chunks = Dictionary(
                    uniqueKeysWithValues: (0..<held).compactMap { index in digests[index].map { (String(index), $0) } }
                )
                state.journaled = held
            }
            state.ledger.boot = PartialStore.bootID
            try store.writeLedger(state.ledger, key: key)
            try state.journal.reset(directoriesInLedger: state.ledger.archive?.directories.count ?? 0)
            state.unflushed = 0
            state.lastCheckpoint = ContinuousClock.now
        }
    }

    /// The item ended: the journal is closed (or removed with the partial) and nothing more is recorded.
    func close(removing: Bool) {
        state.withLock { state in
            state.closed = true
            if removing { state.journal.remove() } else { state.journal.close() }
        }
    }
}
