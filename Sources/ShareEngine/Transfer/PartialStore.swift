import ShareNet
import CoreTransferable
import FoundationEssentials
import ShareText
import ShareArchive
import ShareDisk
import ShareTrust
import ShareProtocol
import ShareTLS
import UniformTypeIdentifiers

/// Incoming items on disk: in the hidden `.share-partial` folder inside the target folder (the same file system, so
/// completion is a rename), a partial file — or, for an archive, a partial folder being extracted — beside a small
/// ledger of verified chunks. Everything goes through directory handles. A partial belongs to one session at a time:
/// its lock file is held while the session runs, so two sessions can never write the same partial.
package final class PartialStore: Sendable {
    /// The target folder.
    package let folder: Directory
    /// `.share-partial` inside it.
    package let partials: Directory
    package static let folderName = ".share-partial"

    package init(folder: Directory) throws {
        self.folder = folder
        do {
            partials = try folder.directory(Self.folderName, create: true, mode: 0o700)
        } catch let error as DiskError {
            throw ShareFailure(.cannotCreate, "cannot keep partial items in \(folder.path): \(error.message)")
        }
    }

    /// What the ledger records (its JSON form is read back by every later version).
    package struct Ledger: Codable {
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
        /// The digest `chunks` were recorded with: absent for SHA-256 (as every earlier version wrote them).
        var digest: DigestAlgorithm?

        var recordedDigest: DigestAlgorithm { digest ?? .sha256 }
    }

    /// This boot's identity.
    static let bootID: String = {
        (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8))?
            .trimmed ?? "unknown"
    }()

    /// The name of an item's partial: stable for the same sender, item and type across sessions and versions (the
    /// sender is named in the form earlier versions printed, so their partials are found).
    package static func key(sender: DeviceID, item: String, contentType: String, archive: Bool) -> String {
        let text = "\(sender.earlierDescription)|\(item)|\(contentType)" + (archive ? "|archive" : "")
        return String(SHA256Hasher.hash(Array(text.utf8)).hexString.prefix(32))
    }

    /// Takes the item's lock for this session; a partial another session is writing is refused, not shared.
    func lock(_ key: String, label: String) throws -> FileLock {
        let held: FileLock?
        do {
            held = try partials.tryLock("\(key).lock")
        } catch let error as DiskError {
            throw ProtocolError(.storage, "the receiver cannot lock \(label): \(error.message)")
        }
        guard let held else {
            throw ProtocolError(
                .refused, "\(label) is being received in another session right now; send it again once that ends")
        }
        return held
    }

    /// The ledger as the last session left it: its last checkpoint plus the chunks its journal recorded since.
    package func readLedger(_ key: String) -> Ledger? {
        guard let bytes = try? partials.readFile("\(key).json", limit: 64 << 20),
            var ledger = try? JSONDecoder().decode(Ledger.self, from: Data(bytes))
        else { return nil }
        if let journal = try? partials.readFile("\(key).\(LedgerJournal.suffix)", limit: LedgerJournal.readLimit) {
            LedgerJournal.replay(journal, onto: &ledger)
        }
        return ledger
    }

    /// Bytes of `representation` a partial from `sender` already holds for the same version of `item` (what a
    /// resume does not need room for).
    package func heldBytes(sender: DeviceID, item: OfferItem, representation: OfferedRepresentation) -> UInt64 {
        let key = Self.key(
            sender: sender, item: item.id, contentType: representation.contentType,
            archive: DiskSink.isArchive(representation))
        guard item.version != nil, let ledger = readLedger(key), ledger.version == item.version,
            ledger.size == representation.size
        else { return 0 }
        let bytes = UInt64(ledger.chunks.count).multipliedReportingOverflow(by: UInt64(max(0, ledger.chunkSize)))
        return min(bytes.overflow ? .max : bytes.partialValue, representation.size ?? 0)
    }

    func writeLedger(_ ledger: Ledger, key: String) throws {
        do {
            try partials.writeAtomically("\(key).json", Array(try JSONEncoder().encode(ledger)), durable: false)
        } catch {
            throw ProtocolError(.storage, "the receiver cannot record progress: \(error)")
        }
    }

    /// Removes the partials (and ledgers) nobody is receiving that were not touched for `maxAge` seconds, and
    /// leftovers of items that could never resume (no ledger) after an hour. Returns how many items were removed.
    @discardableResult
    package func removeStale(maxAge: TimeInterval) -> Int {
        let now = Int64(Date().timeIntervalSince1970)
        var keys: Set<String> = []
        for name in partials.entries() {
            guard let dot = name.firstIndex(of: ".") else { continue }
            keys.insert(String(name[..<dot]))
        }
        var removed = 0
        for key in keys where !key.isEmpty {
            let ledger = partials.info("\(key).json")
            let newest = [
                ledger, partials.info("\(key).part"), partials.info("\(key).dir"), partials.info("\(key).log"),
            ]
            .compactMap { $0?.modified }.max()
            let age = now - (newest ?? 0)
            guard age > (ledger == nil ? min(Int64(maxAge), 3600) : Int64(maxAge)) else { continue }
            // A partial another session holds is never removed under it.
            guard let lock = try? partials.tryLock("\(key).lock") else { continue }
            defer { lock.release() }
            for suffix in ["json", "log", "part", "dir"] { _ = try? partials.removeTree("\(key).\(suffix)") }
            _ = try? partials.remove("\(key).lock")
            removed += 1
        }
        return removed
    }

    /// Removes the partial folder when nothing is left in it (a receive that kept nothing for later).
    package func removeIfEmpty() {
        let left = partials.entries().filter { !$0.hasSuffix(".lock") }
        guard left.isEmpty else { return }
        for name in partials.entries() {
            guard let lock = try? partials.tryLock(name) else { return }
            lock.release()
            _ = try? partials.remove(name)
        }
        _ = try? folder.removeTree(Self.folderName)
    }

    /// Moves `name` from the partials into the target folder under `wanted` or its first free variant
    /// (`name (2).ext`); nothing is ever replaced. `before` is told each name about to be tried, with what moves
    /// (a delivery is recorded before the rename). Returns the name it got.
    func place(_ name: String, as wanted: String, before: Placing) throws -> String {
        let moving = partials.info(name)
        for _ in 0..<1000 {
            let candidate = folder.freeName(for: wanted)
            if let moving { before(candidate, moving) }
            Self.dieForTest(at: "placing")
            do {
                try partials.rename(name, to: candidate, in: folder)
                Self.dieForTest(at: "placed")
                return candidate
            } catch let error as DiskError where error.kind == .exists {
                continue
            } catch let error as DiskError {
                throw ProtocolError(.storage, "cannot save \(wanted) in \(folder.path): \(error.message)")
            }
        }
        throw ProtocolError(.storage, "no free name for \(wanted) in \(folder.path)")
    }

    /// Tests only: SHARE_TEST_KILL_AT=placing (or placed) kills the receiver just before (after) an item is moved into
    /// the target folder, the moment no fault test can aim at.
    private static let killAt = ProcessInfo.processInfo.environment["SHARE_TEST_KILL_AT"]

    private static func dieForTest(at moment: String) {
        if killAt == moment { kill(getpid(), SIGKILL) }
    }

    /// Moves `name` from the partials to `leaf` in `directory` (beneath the target folder), replacing what is there.
    func place(_ name: String, into directory: Directory, as leaf: String) throws {
        do {
            try partials.rename(name, to: leaf, in: directory, replace: true)
        } catch let error as DiskError {
            throw ProtocolError(.storage, "cannot save \(leaf) in \(directory.path): \(error.message)")
        }
    }
}

/// Told the name an item is about to be placed under and what is about to move there.
package typealias Placing = (_ candidate: String, _ moving: FileInfo) -> Void

/// What a sink keeps an item's bytes in until it is verified: a partial file, or memory for a small item.
package protocol ReceivedBytes: AnyObject {
    var held: [Int: [UInt8]] { get }
    /// The digest of `held` and of the chunks written.
    var digest: DigestAlgorithm { get }
    /// The size of every chunk but the last.
    var chunkSize: Int { get }
    func write(index: Int, bytes: UnsafeRawBufferPointer, digest: [UInt8]) throws
    /// A chunk that is a whole range of the basis (`origin`): its blocks may be shared.
    func write(index: Int, bytes: UnsafeRawBufferPointer, digest: [UInt8], origin: ChunkOrigin) throws
    func contents(limit: Int) throws -> [UInt8]
    func finish(size: UInt64, durable: Bool) throws
    func place(as name: String, mode: mode_t, before: Placing) throws -> String
    /// Moves the verified file to `leaf` in `directory`, replacing what is there (a shared folder's file).
    func place(into directory: Directory, as leaf: String, mode: mode_t) throws
    func discard()
    func suspend()
}

/// An item that can never resume (it has no version: a text, a URL, a program's value) is received in memory while
/// it is small: text that is printed never touches the disk, and one kept as a file is written once, when it is
/// placed. Thousands of texts in one send cost their bytes, not a partial file, a ledger and a lock each. Past
/// `limit` bytes (such items arrive in order from chunk 0) it moves to a partial file like any other item.
package final class SmallPartial: ReceivedBytes {
    /// The most kept in memory.
    package static let limit = 64 << 10
    let store: PartialStore
    let sender: DeviceID
    let item: OfferItem
    let representation: OfferedRepresentation
    let key: String
    package let chunkSize: Int
    package let held: [Int: [UInt8]] = [:]
    package let digest: DigestAlgorithm
    private var bytes: [UInt8] = []
    private var durable = false
    /// The partial file it moved to once it grew past `limit`.
    private var spilled: PartialFile?

    /// Whether an item of this representation starts in memory.
    static func fits(item: OfferItem, representation: OfferedRepresentation) -> Bool {
        item.version == nil && (representation.size.map { $0 <= UInt64(limit) } ?? true)
    }

    package init(
        store: PartialStore, sender: DeviceID, item: OfferItem, representation: OfferedRepresentation, chunkSize: Int,
        digest: DigestAlgorithm
    ) {
        self.store = store
        self.digest = digest
        self.sender = sender
        self.item = item
        self.representation = representation
        key = PartialStore.key(sender: sender, item: item.id, contentType: representation.contentType, archive: false)
        self.chunkSize = chunkSize
    }

    package func write(index: Int, bytes chunk: UnsafeRawBufferPointer, digest: [UInt8]) throws {
        if let spilled { return try spilled.write(index: index, bytes: chunk, digest: digest) }
        let offset = index * chunkSize
        guard offset + chunk.count <= Self.limit else {
            let file = try PartialFile(
                store: store, sender: sender, item: item, representation: representation, chunkSize: chunkSize,
                digest: self.digest)
            spilled = file
            // What came before, in the chunks it came in.
            var start = 0
            while start < bytes.count {
                let end = min(start + chunkSize, bytes.count)
                try bytes[start..<end].withUnsafeBytes {
                    try file.write(index: start / chunkSize, bytes: $0, digest: [])
                }
                start = end
            }
            bytes = []
            return try file.write(index: index, bytes: chunk, digest: digest)
        }
        if bytes.count < offset + chunk.count {
            bytes.append(contentsOf: repeatElement(0, count: offset + chunk.count - bytes.count))
        }
        bytes.withUnsafeMutableBytes {
            UnsafeMutableRawBufferPointer(rebasing: $0[offset..<offset + chunk.count]).copyMemory(from: chunk)
        }
    }

    /// Kept in memory (or its partial file): nothing of the basis is shared.
    package func write(index: Int, bytes: UnsafeRawBufferPointer, digest: [UInt8], origin: ChunkOrigin) throws {
        try write(index: index, bytes: bytes, digest: digest)
    }

    package func contents(limit: Int) throws -> [UInt8] {
        if let spilled { return try spilled.contents(limit: limit) }
        return Array(bytes.prefix(limit))
    }

    package func finish(size: UInt64, durable: Bool) throws {
        if let spilled { return try spilled.finish(size: size, durable: durable) }
        guard size <= UInt64(Self.limit) else { throw ProtocolError(.badMessage, "an item is longer than sent") }
        if bytes.count > Int(size) { bytes.removeSubrange(Int(size)...) }
        if bytes.count < Int(size) { bytes.append(contentsOf: repeatElement(0, count: Int(size) - bytes.count)) }
        self.durable = durable
    }

    package func place(into directory: Directory, as leaf: String, mode: mode_t) throws {
        if let spilled { return try spilled.place(into: directory, as: leaf, mode: mode) }
        let part = try writePart(mode: mode)
        do {
            try store.place(part, into: directory, as: leaf)
        } catch {
            _ = try? store.partials.remove(part)
            throw error
        }
    }

    /// Writes the verified bytes into a partial file of its own and moves it into the target folder.
    package func place(as name: String, mode: mode_t, before: Placing) throws -> String {
        if let spilled { return try spilled.place(as: name, mode: mode, before: before) }
        let part = try writePart(mode: mode)
        do {
            return try store.place(part, as: name, before: before)
        } catch {
            _ = try? store.partials.remove(part)
            throw error
        }
    }

    /// The verified bytes in a partial file of their own; returns its name.
    private func writePart(mode: mode_t) throws -> String {
        let part = "\(key)-\(UInt32.random(in: 0...UInt32.max)).part"
        do {
            let file = try store.partials.openFile(part, .create, mode: mode)
            defer { file.close() }
            try file.write(bytes[...], at: 0)
            if durable { try file.sync() }
        } catch let error as DiskError {
            _ = try? store.partials.remove(part)
            if error.kind == .noSpace {
                throw ProtocolError(.storage, "the receiver's disk is full; free space and send again")
            }
            throw ProtocolError(.storage, "the receiver cannot write: \(error.message)")
        }
        return part
    }

    package func discard() {
        spilled?.discard()
        bytes = []
    }

    package func suspend() {
        spilled?.suspend()
        bytes = []
    }
}

/// One item being received into a partial file.
package final class PartialFile: IncomingPayload, ReceivedBytes {
    let store: PartialStore
    let key: String
    let file: OpenFile
    private let lock: FileLock
    private var ledger: PartialStore.Ledger
    /// Whether progress is recorded for a later resume (an item without a version cannot resume).
    private let keepsLedger: Bool
    private var pendingChunks: [Int: String] = [:]
    private var unflushed = 0
    private var lastCheckpoint = ContinuousClock.now
    /// Each verified chunk as it is written, between checkpoints.
    private let journal: LedgerJournal
    private var closed = false
    /// Placed, discarded or suspended: nothing more is done to it.
    private var ended = false
    package let held: [Int: [UInt8]]
    package let digest: DigestAlgorithm
    package var chunkSize: Int { ledger.chunkSize }

    /// `digest`: the digest this session records chunks with; a partial recorded with another starts over. Nil
    /// (looking up what is held): whatever the partial was recorded with.
    package init(
        store: PartialStore, sender: DeviceID, item: OfferItem, representation: OfferedRepresentation, chunkSize: Int,
        digest wanted: DigestAlgorithm?
    ) throws {
        self.store = store
        key = PartialStore.key(
            sender: sender, item: item.id, contentType: representation.contentType, archive: false)
        lock = try store.lock(key, label: item.label)
        var ledger = PartialStore.Ledger(
            sender: sender.description, item: item.id, version: item.version,
            contentType: representation.contentType, size: representation.size, chunkSize: chunkSize,
            suggestedName: representation.suggestedFileName, chunks: [:], boot: PartialStore.bootID)
        var rehash = false
        let old = store.readLedger(key)
        if item.version != nil, let old, old.version == item.version,
            old.chunkSize == chunkSize, old.size == representation.size, old.contentType == representation.contentType,
            wanted == nil || wanted == old.recordedDigest, store.partials.info("\(key).part")?.kind == .file
        {
            ledger.chunks = old.chunks
            ledger.digest = old.digest
            rehash = old.boot != PartialStore.bootID
        } else {
            ledger.digest = wanted == .sha256 ? nil : wanted
            _ = try? store.partials.remove("\(key).json")
            _ = try? store.partials.remove("\(key).\(LedgerJournal.suffix)")
            _ = try? store.partials.removeTree("\(key).part")
        }
        journal = LedgerJournal(store: store, key: key)
        do {
            file = try store.partials.openFile("\(key).part", .createOrUpdate, mode: 0o600)
        } catch let error as DiskError {
            throw ProtocolError(.storage, "the receiver cannot create a partial for \(item.label): \(error.message)")
        }
        keepsLedger = item.version != nil
        digest = ledger.recordedDigest
        self.ledger = ledger
        if rehash { self.ledger.chunks = Self.reverify(ledger, file: file) }
        held = self.ledger.chunks.reduce(into: [:]) { held, entry in
            if let index = Int(entry.key), let digest = Hex.bytes(entry.value) { held[index] = digest }
        }
        // The ledger starts out holding everything known (the journal of an earlier session folded in).
        try checkpoint(force: true)
    }

    deinit {
        close()
        readBack?.deallocate()
    }

    package func write(index: Int, bytes: UnsafeRawBufferPointer, digest: [UInt8]) throws {
        try write(index: index, bytes: bytes, digest: digest, origin: nil)
    }

    /// A chunk that is a range of the earlier version, whole: its blocks are shared with it where the file system
    /// can (a reflink on XFS or Btrfs: a re-sent file costs the disk only what changed), else written.
    package func write(index: Int, bytes: UnsafeRawBufferPointer, digest: [UInt8], origin: ChunkOrigin) throws {
        try write(index: index, bytes: bytes, digest: digest, origin: origin as? BasisRange)
    }

    /// Whether blocks may still be shared into this file (false after the file system said it cannot).
    private var shares = true
    /// Bytes shared with the earlier version rather than written.
    package private(set) var sharedBytes: UInt64 = 0

    /// A chunk's room, to read a shared range back into (made at the first clone).
    private var readBack: UnsafeMutableRawBufferPointer?

    private func sharedRangeMatches(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws -> Bool {
        if readBack == nil || readBack!.count < bytes.count {
            readBack?.deallocate()
            readBack = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 16)
        }
        let room = UnsafeMutableRawBufferPointer(rebasing: readBack![0..<bytes.count])
        guard try file.read(into: room, at: offset) == bytes.count else { return false }
        return memcmp(room.baseAddress!, bytes.baseAddress!, bytes.count) == 0
    }

    private func write(index: Int, bytes: UnsafeRawBufferPointer, digest: [UInt8], origin: BasisRange?) throws {
        do {
            let at = UInt64(index) * UInt64(ledger.chunkSize)
            var cloned = OpenFile.Cloned.unsupported
            if shares, let origin {
                cloned = try file.clone(from: origin.file, at: origin.offset, length: bytes.count, to: at)
                // A file system that cannot share blocks is not asked again for this file.
                if cloned == .unsupported { shares = false }
            }
            // The earlier version may have changed since its bytes were read and verified: what the clone shares
            // is compared with the verified bytes (the partial's own blocks, which nothing else writes), and written
            // over where it differs.
            if cloned == .shared, try sharedRangeMatches(bytes, at: at) {
                sharedBytes += UInt64(bytes.count)
            } else {
                try file.write(bytes, at: at)
            }
        } catch let error as DiskError {
            try? checkpoint(force: true)
            if error.kind == .noSpace {
                throw ProtocolError(.storage, "the receiver's disk is full; free space and send again to resume")
            }
            throw ProtocolError(.storage, "the receiver cannot write: \(error.message)")
        }
        let hex = Hex.string(digest)
        pendingChunks[index] = hex
        unflushed += 1
        if keepsLedger, !digest.isEmpty { try journal.record(chunk: index, digest: hex) }
        try checkpoint(force: false)
    }

    /// Folds the chunks journaled since the last checkpoint into the ledger: at most every second or 64 chunks
    /// unless forced. Data is not forced to disk here (that would cap throughput at the disk's speed): a killed
    /// process loses nothing the kernel holds, and after a reboot `reverify` checks every recorded chunk before it
    /// counts.
    func checkpoint(force: Bool) throws {
        guard keepsLedger else { return }
        guard force || unflushed >= 64 || ContinuousClock.now - lastCheckpoint > .seconds(1) else { return }
        for (index, digest) in pendingChunks { ledger.chunks[String(index)] = digest }
        pendingChunks.removeAll(keepingCapacity: true)
        ledger.boot = PartialStore.bootID
        try store.writeLedger(ledger, key: key)
        try journal.reset()
        unflushed = 0
        lastCheckpoint = ContinuousClock.now
    }

    /// The received bytes of a small item, for items handled in memory (printed text, a profile).
    package func contents(limit: Int) throws -> [UInt8] {
        do {
            return try file.readAll(limit: limit)
        } catch {
            throw ProtocolError(.storage, "the receiver cannot read back what it received: \(error)")
        }
    }

    /// The item is complete and verified: sets its length and, with `durable`, flushes it.
    package func finish(size: UInt64, durable: Bool) throws {
        do {
            try file.truncate(to: size)
            if durable { try file.sync() }
        } catch let error as DiskError {
            throw ProtocolError(.storage, "the receiver cannot finish writing: \(error.message)")
        }
    }

    /// Moves the verified file into the target folder under `name` (or a free variant); returns the name it got.
    package func place(as name: String, mode: mode_t = 0o644, before: Placing) throws -> String {
        file.setMode(mode)
        close()
        let placed = try store.place("\(key).part", as: name, before: before)
        ended = true
        _ = try? store.partials.remove("\(key).json")
        journal.remove()
        release()
        return placed
    }

    package func place(into directory: Directory, as leaf: String, mode: mode_t) throws {
        file.setMode(mode)
        close()
        try store.place("\(key).part", into: directory, as: leaf)
        ended = true
        _ = try? store.partials.remove("\(key).json")
        journal.remove()
        release()
    }

    package func complete(done: Done) throws -> Ack {
        preconditionFailure("a disk sink completes its items itself")
    }

    /// Drops the partial and its ledger.
    package func discard() {
        guard !ended else { return }
        ended = true
        close()
        _ = try? store.partials.remove("\(key).part")
        _ = try? store.partials.remove("\(key).json")
        journal.remove()
        release()
    }

    /// Keeps what is verified for a resume; an item that cannot resume (no version) leaves nothing behind.
    package func suspend() {
        guard !ended else { return }
        guard keepsLedger else { return discard() }
        ended = true
        try? checkpoint(force: true)
        journal.close()
        close()
        release()
    }

    private func close() {
        guard !closed else { return }
        closed = true
        file.close()
    }

    private func release() {
        lock.release()
        _ = try? store.partials.remove("\(key).lock")
    }

    /// The recorded chunks whose bytes on disk still match their digests (after a reboot).
    static func reverify(_ ledger: PartialStore.Ledger, file: OpenFile) -> [String: String] {
        var buffer = [UInt8](repeating: 0, count: ledger.chunkSize)
        let hasher = chunkHasher(ledger.recordedDigest)
        var kept: [String: String] = [:]
        for (key, digest) in ledger.chunks {
            guard let index = Int(key) else { continue }
            let start = UInt64(index) * UInt64(ledger.chunkSize)
            let length = ledger.size.map { Int(min(UInt64(ledger.chunkSize), $0 - min($0, start))) } ?? ledger.chunkSize
            let read = (try? file.read(into: &buffer, count: length, at: start)) ?? -1
            if read == length, Hex.string(hasher.digest(Array(buffer[0..<length]))) == digest { kept[key] = digest }
        }
        return kept
    }
}
