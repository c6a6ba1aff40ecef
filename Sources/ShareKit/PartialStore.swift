import CoreTransferable
import Foundation
import Glibc
import ShareArchive
import ShareProtocol
import ShareTLS

/// Incoming items on disk: a partial file beside a small ledger of verified chunks, in a hidden folder inside the
/// target folder (same file system, so completion is a rename). Only a complete item whose digest matches is moved
/// into place; until then nothing under its final name exists.
public final class PartialStore: @unchecked Sendable {  // used by one receiving thread
    public let directory: URL
    public let partials: URL

    public init(directory: URL) throws {
        self.directory = directory
        partials = directory.appendingPathComponent(".share-partial", isDirectory: true)
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try DevicePaths.ensurePrivateDirectory(partials)
        } catch {
            throw ShareError(
                .cannotCreate, "cannot use \(directory.path) for incoming items: \(error.localizedDescription)")
        }
    }

    /// Removes partials (and their ledgers) not touched for `maxAge` seconds; returns how many were removed.
    @discardableResult
    public func removeStale(maxAge: TimeInterval) -> Int {
        let fm = FileManager.default
        guard let names = try? fm.contentsOfDirectory(atPath: partials.path) else { return 0 }
        var removed = 0
        for name in names where name.hasSuffix(".json") {
            let ledger = partials.appendingPathComponent(name)
            let modified = (try? fm.attributesOfItem(atPath: ledger.path)[.modificationDate] as? Date) ?? Date()
            if Date().timeIntervalSince(modified) > maxAge {
                try? fm.removeItem(at: ledger)
                try? fm.removeItem(at: ledger.deletingPathExtension().appendingPathExtension("part"))
                IncomingArchive.removeTree(ledger.deletingPathExtension().appendingPathExtension("dir"))
                removed += 1
            }
        }
        return removed
    }

    /// What the ledger records.
    struct Ledger: Codable {
        var sender: String
        var item: String
        var version: String?
        var contentType: String
        var size: UInt64?
        var chunkSize: Int
        var suggestedName: String?
        /// Chunk index → hex SHA-256 of that chunk, for chunks written to the partial file.
        var chunks: [String: String]
        /// The boot during which the chunks were written: after a reboot, unflushed writes may be lost, so the
        /// chunks are re-hashed from disk before they count.
        var boot: String?
        /// For an archive extracted as it arrives: where the extraction stands (chunks before its safe offset count).
        var archive: ExtractionCheckpoint?
    }

    /// This boot's identity.
    static let bootID: String = {
        (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? "unknown"
    }()

    /// Opens (or starts) the partial for one item. A ledger for another version, chunk size or type is discarded.
    public func open(sender: DeviceID, item: OfferItem, representation: OfferedRepresentation, chunkSize: Int) throws
        -> IncomingItem
    {
        let key = String(
            SHA256Hasher.hash(Array("\(sender)|\(item.id)|\(representation.contentType)".utf8)).hexString.prefix(32))
        let ledgerURL = partials.appendingPathComponent("\(key).json")
        let partURL = partials.appendingPathComponent("\(key).part")
        var ledger = Ledger(
            sender: sender.description, item: item.id, version: item.version, contentType: representation.contentType,
            size: representation.size, chunkSize: chunkSize, suggestedName: representation.suggestedFileName,
            chunks: [:],
            boot: Self.bootID)
        var resumed = false
        var rehash = false
        if item.version != nil, let data = FileManager.default.contents(atPath: ledgerURL.path),
            let old = try? JSONDecoder().decode(Ledger.self, from: data), old.version == item.version,
            old.chunkSize == chunkSize, old.size == representation.size, old.contentType == representation.contentType,
            FileManager.default.fileExists(atPath: partURL.path)
        {
            ledger.chunks = old.chunks
            resumed = !old.chunks.isEmpty
            rehash = old.boot != Self.bootID
        } else {
            unlink(ledgerURL.path)
            unlink(partURL.path)
        }
        let fd = Glibc.open(partURL.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw ShareError(.cannotCreate, "cannot create \(partURL.path): \(String(cString: strerror(errno)))")
        }
        let incoming = IncomingItem(fd: fd, partURL: partURL, ledgerURL: ledgerURL, ledger: ledger, store: self)
        if rehash { incoming.reverifyFromDisk() }
        // An item without a version (text, data produced on request) cannot be resumed: no ledger is kept for it.
        incoming.keepsLedger = item.version != nil
        if !resumed || rehash { try incoming.checkpoint(force: true) }
        return incoming
    }
}

/// Where the chunks of one item being received go: a partial file, or an extraction into a partial folder.
public protocol IncomingPayload: AnyObject {
    /// Chunks already held and verified.
    var verified: Set<Int> { get }
    func verifiedBytes(size: UInt64?) -> UInt64
    func write(index: Int, bytes: ArraySlice<UInt8>, digest: [UInt8]) throws
    /// Verifies the whole item and moves it into place under `name` (or a free variant); returns where it went.
    func complete(done: Done, name: String, durable: Bool) throws -> URL
    func discard()
    func suspend()
}

/// One item being received: writes chunks, checkpoints the ledger, verifies and completes.
public final class IncomingItem: IncomingPayload, @unchecked Sendable {  // used by one receiving thread
    let fd: Int32
    let partURL: URL
    let ledgerURL: URL
    var ledger: PartialStore.Ledger
    let store: PartialStore
    private var unflushed = 0
    private var lastCheckpoint = ContinuousClock.now
    private var closed = false
    /// Whether progress is recorded for a later resume.
    var keepsLedger = true

    init(fd: Int32, partURL: URL, ledgerURL: URL, ledger: PartialStore.Ledger, store: PartialStore) {
        self.fd = fd
        self.partURL = partURL
        self.ledgerURL = ledgerURL
        self.ledger = ledger
        self.store = store
    }

    deinit { close() }

    /// Chunks written and flushed before this session.
    public var verified: Set<Int> { Set(ledger.chunks.keys.compactMap(Int.init)) }

    /// Bytes already held (verified).
    public func verifiedBytes(size: UInt64?) -> UInt64 {
        let chunkSize = UInt64(ledger.chunkSize)
        return ledger.chunks.keys.compactMap(Int.init).reduce(UInt64(0)) { total, index in
            let start = UInt64(index) * chunkSize
            let end = size.map { min($0, start + chunkSize) } ?? start + chunkSize
            return total + (end - start)
        }
    }

    /// Writes one chunk whose digest the caller has checked. A full disk is a `storage` error; what was flushed
    /// before stays verified.
    public func write(index: Int, bytes: ArraySlice<UInt8>, digest: [UInt8]) throws {
        let offset = Int64(index) * Int64(ledger.chunkSize)
        do {
            try Syscalls.pwriteAll(fd, bytes, offset: offset)
        } catch let error as Syscalls.SocketError {
            try? checkpoint(force: true)
            if error.code == ENOSPC || error.code == EDQUOT {
                throw ProtocolError(.storage, "the receiver's disk is full; free space and send again to resume")
            }
            throw ProtocolError(.storage, "the receiver cannot write: \(error.message)")
        }
        pendingChunks[index] = digest.hexString
        unflushed += 1
        try checkpoint(force: false)
    }

    private var pendingChunks: [Int: String] = [:]

    /// Records the chunks written since the last checkpoint. Runs at most every second or 64 chunks unless forced.
    /// Data is not forced to disk here (that would cap throughput at the disk's speed): a killed process loses
    /// nothing the kernel holds, and after a reboot `reverifyFromDisk` checks every recorded chunk before it counts.
    public func checkpoint(force: Bool) throws {
        guard keepsLedger else { return }
        guard force || unflushed >= 64 || ContinuousClock.now - lastCheckpoint > .seconds(1) else { return }
        for (index, digest) in pendingChunks { ledger.chunks[String(index)] = digest }
        pendingChunks.removeAll(keepingCapacity: true)
        ledger.boot = PartialStore.bootID
        do {
            try AtomicFile.write(try JSONEncoder().encode(ledger), to: ledgerURL, mode: 0o600, durable: false)
        } catch {
            throw ProtocolError(.storage, "the receiver cannot record progress: \(error.localizedDescription)")
        }
        unflushed = 0
        lastCheckpoint = ContinuousClock.now
    }

    /// Compares the whole-item digest; on a match moves the file into place under `name` (never overwriting:
    /// `name (2).ext`, …) and returns its URL. On a mismatch the partial is discarded.
    public func complete(done: Done, name: String, durable: Bool) throws -> URL {
        for (index, digest) in pendingChunks { ledger.chunks[String(index)] = digest }
        pendingChunks.removeAll()
        var concatenated: [UInt8] = []
        concatenated.reserveCapacity(done.chunks * 32)
        for index in 0..<done.chunks {
            guard let hex = ledger.chunks[String(index)], let bytes = hexBytes(hex) else {
                discard()
                throw ProtocolError(.digestMismatch, "chunk \(index) is missing from the partial; it was discarded")
            }
            concatenated += bytes
        }
        guard SHA256Hasher.hash(concatenated).hexString == done.digest.lowercased() else {
            discard()
            throw ProtocolError(.digestMismatch, "the whole-item digest does not match; the partial was discarded")
        }
        guard ftruncate(fd, off_t(done.size)) == 0, !durable || fsync(fd) == 0 else {
            throw ProtocolError(.storage, "the receiver cannot finish writing: \(String(cString: strerror(errno)))")
        }
        close()
        let target = try place(name: name)
        unlink(ledgerURL.path)
        if durable {
            let dirfd = Glibc.open(store.directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            if dirfd >= 0 {
                fsync(dirfd)
                Glibc.close(dirfd)
            }
        }
        return target
    }

    /// Links the partial under the first free name, then removes the partial name: no existing file is replaced.
    private func place(name: String) throws -> URL {
        var candidate = FileNamesOnDisk.unique(name, in: store.directory)
        for _ in 0..<1000 {
            if link(partURL.path, candidate.path) == 0 {
                unlink(partURL.path)
                return candidate
            }
            guard errno == EEXIST else {
                throw ProtocolError(.storage, "cannot create \(candidate.path): \(String(cString: strerror(errno)))")
            }
            candidate = FileNamesOnDisk.unique(name, in: store.directory)
        }
        throw ProtocolError(.storage, "no free name for \(name) in \(store.directory.path)")
    }

    /// Keeps only the recorded chunks whose bytes on disk still match their digests (after a reboot).
    func reverifyFromDisk() {
        var buffer = [UInt8](repeating: 0, count: ledger.chunkSize)
        let hasher = SHA256Hasher()
        for (key, digest) in ledger.chunks {
            guard let index = Int(key) else {
                ledger.chunks[key] = nil
                continue
            }
            let start = UInt64(index) * UInt64(ledger.chunkSize)
            let length = ledger.size.map { Int(min(UInt64(ledger.chunkSize), $0 - min($0, start))) } ?? ledger.chunkSize
            let read = (try? Syscalls.pread(fd, into: &buffer, count: length, offset: Int64(start))) ?? -1
            if read == length {
                hasher.update(buffer[0..<length])
                if hasher.finalize().hexString == digest { continue }
            }
            ledger.chunks[key] = nil
        }
    }

    /// The received bytes, for small items handled in memory (printed text).
    public func contents(limit: Int) -> Data? {
        guard let handle = FileHandle(forReadingAtPath: partURL.path) else { return nil }
        defer { try? handle.close() }
        let data = handle.readData(ofLength: limit + 1)
        return data.count > limit ? nil : data
    }

    /// Drops the partial and its ledger.
    public func discard() {
        close()
        unlink(partURL.path)
        unlink(ledgerURL.path)
    }

    /// Flushes what is pending (best effort) and closes the file; the partial stays for a later resume.
    public func suspend() {
        try? checkpoint(force: true)
        close()
    }

    private func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(fd)
    }
}

func hexBytes(_ hex: String) -> [UInt8]? {
    let chars = Array(hex.utf8)
    guard chars.count % 2 == 0 else { return nil }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(chars.count / 2)
    var index = 0
    while index < chars.count {
        guard let high = hexValue(chars[index]), let low = hexValue(chars[index + 1]) else { return nil }
        bytes.append(high << 4 | low)
        index += 2
    }
    return bytes
}

private func hexValue(_ c: UInt8) -> UInt8? {
    switch c {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
    default: return nil
    }
}
