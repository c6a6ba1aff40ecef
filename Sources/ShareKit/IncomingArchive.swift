import CoreTransferable
import Foundation
import Glibc
import ShareArchive
import ShareProtocol
import ShareTLS

extension PartialStore {
    /// Opens (or resumes) an archive item: its entries are extracted as chunks arrive into a partial folder beside
    /// a ledger; nothing of the stream itself is stored. A ledger from another version, size or chunk size, or
    /// written before a reboot (the extracted files may have lost unflushed writes), is discarded.
    func openArchive(
        sender: DeviceID, item: OfferItem, representation: OfferedRepresentation, chunkSize: Int,
        policy: ExtractionPolicy
    ) throws -> IncomingArchive {
        let key = String(
            SHA256Hasher.hash(Array("\(sender)|\(item.id)|\(representation.contentType)|archive".utf8)).hexString
                .prefix(32))
        let ledgerURL = partials.appendingPathComponent("\(key).json")
        let folder = partials.appendingPathComponent("\(key).dir")
        var ledger = Ledger(
            sender: sender.description, item: item.id, version: item.version, contentType: representation.contentType,
            size: representation.size, chunkSize: chunkSize, suggestedName: representation.suggestedFileName,
            chunks: [:], boot: Self.bootID)
        if item.version != nil, let data = FileManager.default.contents(atPath: ledgerURL.path),
            let old = try? JSONDecoder().decode(Ledger.self, from: data), old.version == item.version,
            old.chunkSize == chunkSize, old.size == representation.size, old.contentType == representation.contentType,
            old.boot == Self.bootID, let checkpoint = old.archive,
            FileManager.default.fileExists(atPath: folder.path)
        {
            ledger.chunks = old.chunks
            ledger.archive = checkpoint
        } else {
            try? FileManager.default.removeItem(at: ledgerURL)
            IncomingArchive.removeTree(folder)
        }
        let incoming = try IncomingArchive(
            folder: folder, ledgerURL: ledgerURL, ledger: ledger, store: self, policy: policy)
        try incoming.checkpoint(force: true)
        return incoming
    }
}

/// An archive being received and extracted as it arrives. Chunks must come in order; each is verified by the
/// session before it gets here, its digest is kept for the whole-item check, and the extraction's checkpoint decides
/// which chunks count as held after an interruption.
final class IncomingArchive: IncomingPayload, @unchecked Sendable {  // used by the receiving thread
    let folder: URL
    let ledgerURL: URL
    private var ledger: PartialStore.Ledger
    let store: PartialStore
    private let extraction: StreamExtraction
    private var digests: [Int: String]
    private var nextIndex: Int
    private var unflushed = 0
    private var lastCheckpoint = ContinuousClock.now
    private var stopped = false

    init(folder: URL, ledgerURL: URL, ledger: PartialStore.Ledger, store: PartialStore, policy: ExtractionPolicy)
        throws
    {
        self.folder = folder
        self.ledgerURL = ledgerURL
        self.ledger = ledger
        self.store = store
        let chunkSize = ledger.chunkSize
        var start: Int64 = 0
        if let checkpoint = ledger.archive {
            start = StreamExtraction.resumeOffset(for: checkpoint, chunkSize: chunkSize)
        }
        nextIndex = Int(start / Int64(chunkSize))
        digests = [:]
        for index in 0..<nextIndex {
            guard let digest = ledger.chunks[String(index)] else {
                // A gap in the ledger: start over.
                nextIndex = 0
                start = 0
                self.ledger.archive = nil
                break
            }
            digests[index] = digest
        }
        if nextIndex == 0 {
            digests = [:]
            self.ledger.archive = nil
            self.ledger.chunks = [:]
        }
        do {
            extraction = try StreamExtraction(
                rootPath: folder.path, policy: policy, resuming: self.ledger.archive, inputOffset: start)
        } catch {
            throw Self.protocolError(error)
        }
    }

    var verified: Set<Int> { Set(0..<nextIndexAtOpen) }
    private lazy var nextIndexAtOpen = nextIndex

    func verifiedBytes(size: UInt64?) -> UInt64 {
        let bytes = UInt64(nextIndexAtOpen) * UInt64(ledger.chunkSize)
        return size.map { min($0, bytes) } ?? bytes
    }

    func write(index: Int, bytes: ArraySlice<UInt8>, digest: [UInt8]) throws {
        _ = nextIndexAtOpen
        guard index == nextIndex else {
            throw ProtocolError(.badMessage, "archive chunk \(index) arrived out of order (expected \(nextIndex))")
        }
        do {
            try extraction.push(bytes)
        } catch {
            throw fail(error)
        }
        digests[index] = digest.hexString
        nextIndex += 1
        unflushed += 1
        try checkpoint(force: false)
    }

    /// Records the chunks up to the extraction's checkpoint. At most every second or 64 chunks unless forced.
    func checkpoint(force: Bool) throws {
        guard force || unflushed >= 64 || ContinuousClock.now - lastCheckpoint > .seconds(1) else { return }
        let checkpoint = extraction.extractor.checkpoint
        ledger.archive = checkpoint ?? ledger.archive
        if let saved = ledger.archive {
            let held = Int(StreamExtraction.resumeOffset(for: saved, chunkSize: ledger.chunkSize)) / ledger.chunkSize
            ledger.chunks = Dictionary(
                uniqueKeysWithValues: (0..<held).compactMap { index in digests[index].map { (String(index), $0) } })
        }
        ledger.boot = PartialStore.bootID
        do {
            try AtomicFile.write(try JSONEncoder().encode(ledger), to: ledgerURL, mode: 0o600, durable: false)
        } catch {
            throw ProtocolError(.storage, "the receiver cannot record progress: \(error.localizedDescription)")
        }
        unflushed = 0
        lastCheckpoint = ContinuousClock.now
    }

    func complete(done: Done, name: String, durable: Bool) throws -> URL {
        do {
            try extraction.finish()
        } catch {
            throw fail(error)
        }
        stopped = true
        var concatenated: [UInt8] = []
        concatenated.reserveCapacity(done.chunks * 32)
        for index in 0..<done.chunks {
            guard let hex = digests[index], let bytes = hexBytes(hex) else {
                discard()
                throw ProtocolError(.digestMismatch, "archive chunk \(index) is missing; the partial was discarded")
            }
            concatenated += bytes
        }
        guard SHA256Hasher.hash(concatenated).hexString == done.digest.lowercased() else {
            discard()
            throw ProtocolError(.digestMismatch, "the archive's digest does not match; the partial was discarded")
        }
        if durable { Self.syncTree(folder) }
        let target = try place(name: name)
        try? FileManager.default.removeItem(at: ledgerURL)
        return target
    }

    /// Renames the partial folder to the first free name; an existing file or folder is never replaced.
    private func place(name: String) throws -> URL {
        for _ in 0..<1000 {
            let candidate = FileNamesOnDisk.unique(name, in: store.directory)
            if Syscalls.renameNoReplace(folder.path, to: candidate.path) {
                return candidate
            }
            guard errno == EEXIST else {
                throw ProtocolError(.storage, "cannot create \(candidate.path): \(String(cString: strerror(errno)))")
            }
        }
        throw ProtocolError(.storage, "no free name for \(name) in \(store.directory.path)")
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
        try? FileManager.default.removeItem(at: ledgerURL)
        Self.removeTree(folder)
    }

    func suspend() {
        guard !stopped else { return }
        extraction.cancel()
        stopped = true
        try? checkpoint(force: true)
    }

    /// Removes a partial folder, first giving the owner access to every folder inside (modes came from the sender).
    static func removeTree(_ url: URL) {
        guard FileManager.default.fileExists(atPath: url.path) else { return }
        if let walker = FileManager.default.enumerator(atPath: url.path) {
            for case let path as String in walker {
                var st = stat()
                let full = url.path + "/" + path
                if lstat(full, &st) == 0, st.st_mode & S_IFMT == S_IFDIR { chmod(full, 0o700) }
            }
        }
        try? FileManager.default.removeItem(at: url)
    }

    /// Flushes every file and folder of a completed extraction (the `--durable` option).
    static func syncTree(_ url: URL) {
        var paths = [url.path]
        if let walker = FileManager.default.enumerator(atPath: url.path) {
            for case let path as String in walker { paths.append(url.path + "/" + path) }
        }
        for path in paths {
            let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
            if fd >= 0 {
                fsync(fd)
                close(fd)
            }
        }
    }
}
