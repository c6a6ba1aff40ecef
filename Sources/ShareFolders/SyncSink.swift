import CoreTransferable
import FoundationEssentials
import ShareDisk
import ShareEngine
import ShareProtocol
import ShareSync
import ShareTLS

/// Where a pull's files land: each in a resumable partial inside the folder (`.share-partial`), received as a delta
/// against this device's version of the same path when it has one, checked against the digest its index entry
/// names (a file's content digest is its transfer's whole digest), and put in place only after the folder checks the
/// path is still what its index says. Its own sink: nothing here prints, imports or names files as a send's does.
final class SyncSink: ItemSink {
    let folder: SharedFolder
    let store: PartialStore
    let versions: Versions?
    /// What was asked for, by item id.
    let wanted: [String: FileEntry]
    /// Partials are named for this device (not the holder): a pull cut short resumes from any device.
    let owner: DeviceID
    /// Called with each item's outcome: placed (bytes received, bytes made from the local copy), or not.
    let report: (FileEntry, Bool) -> Void

    init(
        folder: SharedFolder, wanted: [String: FileEntry], owner: DeviceID, versions: Versions?,
        report: @escaping (FileEntry, Bool) -> Void
    ) throws {
        self.folder = folder
        self.wanted = wanted
        self.owner = owner
        self.versions = versions
        self.report = report
        store = try PartialStore(folder: folder.root)
    }

    func entry(_ item: OfferItem) throws -> FileEntry {
        guard let entry = wanted[item.id] else {
            throw ProtocolError(.badMessage, "the holder offered an item that was not asked for")
        }
        return entry
    }

    func held(item: OfferItem, representation: OfferedRepresentation, chunkSize: Int) throws -> HeldChunks {
        // A small file is received in memory (nothing of it is ever kept to resume from).
        if let entry = wanted[item.id], entry.size <= UInt64(SmallPartial.limit) { return .nothing }
        let key = PartialStore.key(
            sender: owner, item: item.id, contentType: representation.contentType, archive: false)
        guard store.readLedger(key) != nil else { return .nothing }
        let partial = try PartialFile(
            store: store, sender: owner, item: item, representation: representation, chunkSize: chunkSize,
            digest: nil)
        defer { partial.suspend() }
        return HeldChunks(digests: partial.held, algorithm: partial.digest)
    }

    func open(item: OfferItem, representation: OfferedRepresentation, chunkSize: Int, digest: DigestAlgorithm)
        throws -> IncomingPayload
    {
        let entry = try entry(item)
        guard representation.size == entry.size else {
            throw ProtocolError(.badMessage, "the holder offered \(entry.path) at another size than its index says")
        }
        // Small files in memory until they are placed: thousands of them cost their bytes, not a partial file, a
        // ledger and a lock each.
        let partial: any ReceivedBytes =
            entry.size <= UInt64(SmallPartial.limit)
            ? SmallPartial(
                store: store, sender: owner, item: item, representation: representation, chunkSize: chunkSize,
                digest: digest)
            : try PartialFile(
                store: store, sender: owner, item: item, representation: representation, chunkSize: chunkSize,
                digest: digest)
        return SyncPayload(partial: partial, entry: entry, sink: self)
    }

    /// This device's version of the path (as its index recorded it), to receive the new one as a delta against.
    func basis(item: OfferItem, representation: OfferedRepresentation, hasher: ChunkHasher) -> ItemBasis? {
        guard let versions, let entry = wanted[item.id], entry.size >= Delta.minimumSize else { return nil }
        let path = entry.path
        let parts = path.split(separator: "/").map(String.init)
        guard let leaf = parts.last, let directory = try? folder.root.directory(components: Array(parts.dropLast())),
            let info = directory.info(leaf), info.kind == .file,
            let stamp = DiskFolder.stamp(info),
            folder.withFolder({ $0.store.local(path)?.stamp.map { $0.same(as: stamp) } ?? false }),
            var index = versions.index(target: directory, name: leaf, info: info, hasher: hasher)
        else { return nil }
        index.item = item.id
        return ItemBasis(index: index) { try versions.open(target: directory, name: leaf, info: info) }
    }

    /// A verified file: into place, or kept (complete) for the next plan when the path changed here meanwhile.
    fileprivate func complete(_ partial: any ReceivedBytes, entry: FileEntry, done: Done) throws -> Ack {
        // The transfer's whole digest is the content digest when it went in 1 MiB chunks of BLAKE3.
        if partial.digest == .blake3, partial.chunkSize == ContentDigest.chunkSize {
            guard done.digest == entry.digest.hexString else {
                partial.discard()
                report(entry, false)
                throw ProtocolError(.digestMismatch, "\(entry.path) does not hold the content its index names")
            }
        }
        try partial.finish(size: done.size, durable: false)
        let parts = entry.path.split(separator: "/").map(String.init)
        let outcome: SyncFolder.PlaceOutcome
        do {
            outcome = try folder.withFolder { state in
                try state.sync.place(entry) {
                    let directory = try folder.root.directory(components: Array(parts.dropLast()))
                    try partial.place(into: directory, as: parts.last!, mode: mode_t(entry.mode & 0o777))
                    try directory.setAttributes(
                        parts.last!, mode: mode_t(entry.mode & 0o777), modifiedNanoseconds: entry.modified)
                }
            }
        } catch {
            partial.suspend()
            folder.problem(entry.path, "\(error)")
            report(entry, false)
            return Ack(item: done.item, outcome: "kept")
        }
        switch outcome {
        case .placed(let recorded):
            folder.recorded(recorded)
            report(entry, true)
            return Ack(item: done.item, outcome: "synced", savedAs: parts.last)
        case .changedHere:
            // Changed here since the plan: scanned first; the verified partial waits for the next plan.
            partial.suspend()
            folder.rescan(entry.path)
            report(entry, false)
            return Ack(item: done.item, outcome: "kept")
        case .notWanted:
            partial.discard()
            report(entry, false)
            return Ack(item: done.item, outcome: "not wanted")
        }
    }
}

/// One pulled file being received.
final class SyncPayload: IncomingPayload {
    let partial: any ReceivedBytes
    let entry: FileEntry
    unowned let sink: SyncSink

    init(partial: any ReceivedBytes, entry: FileEntry, sink: SyncSink) {
        self.partial = partial
        self.entry = entry
        self.sink = sink
    }

    var held: [Int: [UInt8]] { partial.held }
    func write(index: Int, bytes: UnsafeRawBufferPointer, digest: [UInt8]) throws {
        try partial.write(index: index, bytes: bytes, digest: digest)
    }
    func complete(done: Done) throws -> Ack { try sink.complete(partial, entry: entry, done: done) }
    func discard() { partial.discard() }
    func suspend() { partial.suspend() }
}
