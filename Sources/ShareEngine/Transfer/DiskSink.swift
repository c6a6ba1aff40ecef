import ShareProfileModel
import CoreTransferable
import FoundationEssentials
import ShareText
import ShareThreads
import ShareArchive
import ShareDisk
import ShareProfiles
import ShareProtocol
import ShareTLS
import ShareTrust
import UniformTypeIdentifiers

/// The receiver's sink on disk: each accepted item goes to a partial (file or extraction folder) in the target
/// folder, and once the driver has verified it, it becomes what its type says: plain text and URLs are printed (or
/// kept in the agent's history), profiles and profile bundles are imported into the catalog, folders and files are
/// moved into place under a safe, free name. Everything under the folder is touched through its directory handle.
final class DiskSink: ItemSink {
    let options: ReceiveOptions
    let store: PartialStore
    let sender: DeviceID
    let peerName: String
    let progress: ProgressReporter
    var report = ReceiveReport()
    /// Catalog imports from concurrent sessions (an agent) happen one at a time.
    static let catalogLock = ThreadCondition()

    init(options: ReceiveOptions, store: PartialStore, sender: DeviceID, peerName: String, progress: ProgressReporter) {
        self.options = options
        self.store = store
        self.sender = sender
        self.peerName = peerName
        self.progress = progress
    }

    /// What an earlier session left verified of the item: its partial is opened (and, after a reboot, checked
    /// against its ledger), read and closed again, so nothing stays open or locked for the items announced ahead.
    /// An item without a version can never resume: nothing is looked up.
    func held(item: OfferItem, representation: OfferedRepresentation, chunkSize: Int) throws -> HeldChunks {
        guard item.version != nil else { return .nothing }
        let key = PartialStore.key(
            sender: sender, item: item.id, contentType: representation.contentType,
            archive: Self.isArchive(representation))
        // Nothing was ever received of it: nothing to open (no empty partial is left for items announced ahead).
        guard store.readLedger(key) != nil else { return .nothing }
        let payload = try open(item: item, representation: representation, chunkSize: chunkSize, digest: nil)
        defer { payload.suspend() }
        return HeldChunks(digests: payload.held, algorithm: payload.digest)
    }

    func open(item: OfferItem, representation: OfferedRepresentation, chunkSize: Int, digest: DigestAlgorithm)
        throws -> IncomingPayload
    {
        try open(item: item, representation: representation, chunkSize: chunkSize, digest: Optional(digest))
    }

    /// `digest` nil: as the partial was recorded (looking up what is held).
    private func open(
        item: OfferItem, representation: OfferedRepresentation, chunkSize: Int, digest: DigestAlgorithm?
    ) throws -> SinkItem {
        if Self.isArchive(representation) {
            var policy = ExtractionPolicy()
            if let maxSize = options.maxSize { policy.maxTotalBytes = maxSize }
            let partial = try PartialArchive(
                store: store, sender: sender, item: item, representation: representation, chunkSize: chunkSize,
                policy: policy, digest: digest)
            return SinkItem(.archive(partial), item: item, representation: representation, sink: self)
        }
        if SmallPartial.fits(item: item, representation: representation) {
            let partial = SmallPartial(
                store: store, sender: sender, item: item, representation: representation, chunkSize: chunkSize,
                digest: digest ?? .sha256)
            return SinkItem(.file(partial), item: item, representation: representation, sink: self)
        }
        let partial = try PartialFile(
            store: store, sender: sender, item: item, representation: representation, chunkSize: chunkSize,
            digest: digest)
        return SinkItem(.file(partial), item: item, representation: representation, sink: self)
    }

    /// The file this sender last delivered under the name the item would get, when a later version of it comes:
    /// with its index (cached while the file is unchanged), to receive the item as a delta against it.
    func basis(item: OfferItem, representation: OfferedRepresentation, hasher: ChunkHasher) -> ItemBasis? {
        guard let versions = options.versions, options.keptFor == nil, let size = representation.size,
            size >= Delta.minimumSize
        else { return nil }
        if Self.isArchive(representation) {
            // A folder: the one this sender delivered last under the same name, as a tar stream.
            let name = FileNamesOnDisk.sanitize(representation.suggestedFileName ?? item.label, fallback: "folder")
            guard let (placed, tree) = versions.deliveredFolder(target: store.folder, sender: sender, name: name)
            else { return nil }
            return versions.folderBasis(target: store.folder, name: placed, tree: tree, hasher: hasher).map {
                var index = $0.index
                index.item = item.id
                return ItemBasis(index: index, open: $0.open)
            }
        }
        let name = savedName(item: item, chosen: representation, fileName: nil)
        if let pick = options.earlierVersion {
            // The program names its own earlier version, anywhere it may read.
            guard let url = pick(name, representation.contentType, size, peerName),
                let directory = try? Directory.open(url.deletingLastPathComponent().path),
                let info = directory.info(url.lastPathComponent), info.kind == .file,
                var index = versions.index(
                    target: directory, name: url.lastPathComponent, info: info, hasher: hasher)
            else { return nil }
            index.item = item.id
            return ItemBasis(index: index) {
                try versions.open(target: directory, name: url.lastPathComponent, info: info)
            }
        }
        guard let (placed, info) = versions.delivered(target: store.folder, sender: sender, name: name, hasher: hasher),
            var index = versions.index(target: store.folder, name: placed, info: info, hasher: hasher)
        else { return nil }
        index.item = item.id
        let folder = store.folder
        return ItemBasis(index: index) { try versions.open(target: folder, name: placed, info: info) }
    }

    /// The name a file item is saved under (or its first free variant).
    private func savedName(item: OfferItem, chosen: OfferedRepresentation, fileName: String?) -> String {
        let type = UTType(chosen.contentType) ?? UTType(identifier: chosen.contentType, allowUndeclared: true)
        return withExtension(
            FileNamesOnDisk.sanitize(chosen.suggestedFileName ?? fileName ?? item.label, fallback: "item"), type)
    }

    /// A tar stream to extract as it arrives (rather than a file to store).
    static func isArchive(_ representation: OfferedRepresentation) -> Bool {
        guard representation.kind == .archive, let type = UTType(representation.contentType) else { return false }
        return type.conforms(to: .tarArchive)
    }

    // MARK: Completion

    fileprivate func complete(_ partial: ReceivedBytes, item: OfferItem, chosen: OfferedRepresentation, done: Done)
        throws -> Ack
    {
        try partial.finish(size: done.size, durable: options.durable)
        if let file = partial as? PartialFile { report.bytesShared += file.sharedBytes }
        let type = UTType(chosen.contentType) ?? UTType(identifier: chosen.contentType, allowUndeclared: true)
        if options.keptFor != nil || options.handOver != nil {
            let name = savedName(item: item, chosen: chosen, fileName: done.fileName)
            let placed = try partial.place(
                as: name, mode: 0o600,
                before: options.keptFor == nil ? remembering(name, done: done, partial: partial) : { _, _ in })
            return saved(placed, item: item, type: chosen.contentType, size: done.size)
        }
        if let catalogFile = options.catalogFile, type?.conforms(to: .shareProfile) == true, done.size <= 16 << 20 {
            // A path from another machine names nothing here: the profile arrives without portrait and video
            // (they travel inside a profiles bundle), and keeps the ones this catalog already has for it.
            let bytes = try partial.contents(limit: 16 << 20)
            partial.discard()
            guard let profile = try? JSONDecoder().decode(Profile.self, from: Data(bytes)).withoutMedia else {
                throw ProtocolError(.badMessage, "\(item.label) is not a valid profile")
            }
            let isNew = try Self.catalogLock.withLock {
                try ProfilesArchive(profiles: [profile]).merge(into: catalogFile).added == 1
            }
            report.importedProfiles.append(profile.name)
            progress.note(
                "\(isNew ? "imported" : "updated") profile \(profile.name)", event: "imported",
                fields: ["item": item.label, "profile": profile.name])
            return Ack(item: item.id, outcome: isNew ? "imported" : "updated")
        }
        // Text that was text (a message, a URL, the clipboard) is printed; a file is saved as a file, whatever its
        // type, and so is structured text (CSV, JSON, source code).
        let printable =
            chosen.kind == .data
            && (type.map { [UTType.plainText, .utf8PlainText, .utf16PlainText].contains($0) || $0.conforms(to: .url) }
                ?? false)
        if printable, done.size <= UInt64(options.printLimit) {
            let bytes = try partial.contents(limit: options.printLimit)
            if let text = String(validating: bytes, as: UTF8.self) {
                partial.discard()
                report.printed.append(text)
                if let history = options.history {
                    let from = item.origin ?? peerName
                    try history.append(
                        TextHistory.Entry(date: Date(), from: from, type: chosen.contentType, text: text))
                    progress.note(
                        "kept \(item.label) from \(from) in the inbox history", event: "kept",
                        fields: ["item": item.label])
                    return Ack(item: item.id, outcome: "kept")
                }
                do {
                    try progress.output(
                        text, exactly: options.printExactly, fields: ["item": item.label, "type": chosen.contentType])
                } catch {
                    // Nobody reads what this receiver prints any more (`share receive | head -1`): the text is not
                    // delivered, and the sender hears why rather than of a lost connection.
                    throw ProtocolError(.cancelled, "the receiver stopped: \(error)")
                }
                return Ack(item: item.id, outcome: "printed")
            }
            // Not UTF-8 after all: kept as a file.
        }
        let name = savedName(item: item, chosen: chosen, fileName: done.fileName)
        let placed = try partial.place(as: name, mode: 0o644, before: remembering(name, done: done, partial: partial))
        return saved(placed, item: item, type: chosen.contentType, size: done.size)
    }

    /// Remembers which file (or folder) an item becomes and, for a file, the digest it was verified with: a later
    /// version of it arrives as a delta against it while it is still that version. Recorded as it is placed, before
    /// the rename (Versions.recordDelivery).
    private func remembering(_ name: String, done: Done? = nil, partial: ReceivedBytes? = nil, tree: FolderTree? = nil)
        -> Placing
    {
        guard let versions = options.versions else { return { _, _ in } }
        var verified: Versions.Verified?
        if let done, let partial {
            verified = Versions.Verified(digest: done.digest, chunkSize: partial.chunkSize, algorithm: partial.digest)
        }
        return { [store, sender] candidate, moving in
            versions.recordDelivery(
                target: store.folder, sender: sender, name: name, placed: candidate, info: moving, verified: verified,
                tree: tree)
        }
    }

    fileprivate func complete(_ partial: PartialArchive, item: OfferItem, chosen: OfferedRepresentation, done: Done)
        throws -> Ack
    {
        let root = try partial.finish(durable: options.durable)
        let type = UTType(chosen.contentType)
        if options.keptFor == nil, options.handOver == nil, let catalogFile = options.catalogFile, let type,
            type.conforms(to: .shareProfilesArchive)
        {
            defer { partial.discard() }
            let result: ProfilesArchive.ImportResult
            do {
                let media = (options.mediaDirectory ?? catalogFile.deletingLastPathComponent()).path
                result = try Self.catalogLock.withLock {
                    try ProfilesArchive.importBundle(
                        at: root, into: catalogFile, media: try Directory.open(media, create: true, mode: 0o700))
                }
            } catch {
                throw ProtocolError(.unsafeArchive, "\(item.label) is not a valid profiles archive: \(error)")
            }
            report.importedProfiles += result.names
            progress.note(
                "imported \(result.added) and updated \(result.updated) profiles: \(result.names.joined(separator: ", "))",
                event: "imported", fields: ["item": item.label, "profiles": result.names])
            return Ack(item: item.id, outcome: "imported")
        }
        let name = FileNamesOnDisk.sanitize(chosen.suggestedFileName ?? item.label, fallback: "folder")
        // The tree is read from the extracted folder before it moves: the record is written before the rename.
        let remembers = options.keptFor == nil && options.versions != nil
        let placed = try partial.place(
            as: name, before: remembers ? remembering(name, tree: Versions.tree(of: root.path)) : { _, _ in })
        return saved(placed, item: item, type: chosen.contentType, size: done.size)
    }

    private func saved(_ name: String, item: OfferItem, type: String, size: UInt64) -> Ack {
        let target = options.directory.appendingPathComponent(name)
        report.saved.append(target)
        report.savedItems.append(ReceiveReport.SavedItem(url: target, contentType: type, label: item.label))
        if let handOver = options.handOver {
            progress.note(
                "received \(item.label) as \(type)", event: "received",
                fields: ["item": item.label, "path": target.path, "type": type])
            handOver(
                ReceivedItem(
                    path: target.path, contentType: type, label: item.label, preview: item.preview, from: peerName,
                    fromDevice: sender.description, origin: item.origin, size: size))
            return Ack(item: item.id, outcome: "received")
        }
        if let keptFor = options.keptFor {
            progress.note(
                "kept \(item.label) to pass on to \(keptFor)", event: "kept-for",
                fields: ["item": item.label, "to": keptFor])
            return Ack(item: item.id, outcome: "kept for \(keptFor)")
        }
        progress.note(
            "saved \(item.label) as \(target.path)", event: "saved", fields: ["item": item.label, "path": target.path])
        return Ack(item: item.id, outcome: "saved", savedAs: name)
    }

    private func withExtension(_ name: String, _ type: UTType?) -> String {
        guard PathText.pathExtension(name).isEmpty, let ext = type?.preferredFilenameExtension else { return name }
        return name + "." + ext
    }
}

/// One item of a disk sink: its partial, completed by the sink once the driver has verified it.
final class SinkItem: IncomingPayload {
    enum Partial {
        case file(ReceivedBytes)
        case archive(PartialArchive)
    }

    let partial: Partial
    let item: OfferItem
    let representation: OfferedRepresentation
    unowned let sink: DiskSink

    init(_ partial: Partial, item: OfferItem, representation: OfferedRepresentation, sink: DiskSink) {
        self.partial = partial
        self.item = item
        self.representation = representation
        self.sink = sink
    }

    var held: [Int: [UInt8]] {
        switch partial {
        case .file(let file): return file.held
        case .archive(let archive): return archive.held
        }
    }

    /// The digest `held` was recorded with.
    var digest: DigestAlgorithm {
        switch partial {
        case .file(let file): return file.digest
        case .archive(let archive): return archive.digest
        }
    }

    func write(index: Int, bytes: UnsafeRawBufferPointer, digest: [UInt8]) throws {
        switch partial {
        case .file(let file): try file.write(index: index, bytes: bytes, digest: digest)
        case .archive(let archive): try archive.write(index: index, bytes: bytes, digest: digest)
        }
    }

    func write(index: Int, bytes: UnsafeRawBufferPointer, digest: [UInt8], origin: ChunkOrigin) throws {
        switch partial {
        case .file(let file): try file.write(index: index, bytes: bytes, digest: digest, origin: origin)
        case .archive(let archive): try archive.write(index: index, bytes: bytes, digest: digest)
        }
    }

    func complete(done: Done) throws -> Ack {
        do {
            switch partial {
            case .file(let file): return try sink.complete(file, item: item, chosen: representation, done: done)
            case .archive(let archive):
                return try sink.complete(archive, item: item, chosen: representation, done: done)
            }
        } catch {
            // Whatever stopped the completion, the verified item is kept for a resume, never exposed half done.
            suspend()
            throw error
        }
    }

    func discard() {
        switch partial {
        case .file(let file): file.discard()
        case .archive(let archive): archive.discard()
        }
    }

    func suspend() {
        switch partial {
        case .file(let file): file.suspend()
        case .archive(let archive): archive.suspend()
        }
    }
}
