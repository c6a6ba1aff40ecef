import ShareText
import Synchronization
import FoundationEssentials
import Glibc
import ShareDisk

/// Limits an extraction enforces on top of the path rules.
public struct ExtractionPolicy: Sendable {
    /// Most entries one archive may hold.
    public var maxEntries = 100_000
    /// Files (entries with data) at most, when set: what a sender said its folder holds.
    public var maxFiles: Int?
    /// Most bytes all files together may hold.
    public var maxTotalBytes: UInt64 = 1 << 50
    /// Most bytes extracted per input byte, when the input size is known (a compressed bomb), above `ratioFloor`.
    public var maxExpansionRatio: UInt64 = 200
    public var ratioFloor: UInt64 = 64 << 20
    /// Free space kept on the target's file system.
    public var reserveBytes: UInt64 = 16 << 20

    public init() {}
}

/// Modes and times of folders, applied once everything inside them exists.
public struct DirectoryMeta: Codable, Sendable, Equatable {
    public var path: String
    public var mode: UInt32
    public var modified: Int64?
}

/// Where an interrupted extraction of a tar stream stands: the entry in progress (its header's raw bytes and how
/// many of its data bytes are on disk) and what came before it. A resumed stream restarts libarchive at that header.
public struct ExtractionCheckpoint: Codable, Sendable, Equatable {
    /// Stream offset of the entry's first header block.
    public var headerOffset: Int64
    /// The raw header blocks, `headerOffset` up to the data.
    public var header: Data
    /// The entry's path as stored.
    public var path: String
    /// Data bytes of the entry already written.
    public var written: UInt64
    /// Entries before this one, and the bytes of their files.
    public var entriesBefore: Int
    public var bytesBefore: UInt64
    public var directories: [DirectoryMeta]

    public var dataOffset: Int64 { headerOffset + Int64(header.count) }

    /// Stream offset up to which everything is on disk.
    public var safeOffset: Int64 { dataOffset + Int64(written) }
}

/// Where an extraction stands, readable from any thread while the extracting thread moves on: the entry in
/// progress and the folders made so far, from which `checkpoint` is built.
public final class ExtractionMark: Sendable {
    struct State {
        var directories: [DirectoryMeta] = []
        var progress:
            (
                path: String, header: [UInt8], headerOffset: Int64, entries: Int, bytes: UInt64,
                directories: Int, written: UInt64
            )?
    }
    let state = Mutex(State())
    /// The watcher, in a box: a function value kept directly in a generic container is re-wrapped (re-abstracted)
    /// at every look inside it, so each call would walk every earlier look.
    private final class Watcher: Sendable {
        let call: @Sendable (Int64) -> Void
        init(_ call: @escaping @Sendable (Int64) -> Void) { self.call = call }
    }
    private let onAdvance = Mutex<Watcher?>(nil)

    /// Calls `handler` on the extracting thread, with the new safe offset, each time more of the stream is on disk (a
    /// block of file data written, an entry begun): a receiver records progress as soon as it is durable in the
    /// kernel, not when the next chunk arrives.
    public func whenAdvanced(_ handler: (@Sendable (Int64) -> Void)?) {
        let watcher = handler.map(Watcher.init)
        onAdvance.withLock { $0 = watcher }
    }

    /// The stream offset up to which everything is on disk, without building a checkpoint (nil before the first
    /// entry).
    public var safeOffset: Int64? {
        state.withLock { state in
            state.progress.map { $0.headerOffset + Int64($0.header.count) + Int64($0.written) }
        }
    }

    func advanced() {
        guard let watcher = onAdvance.withLock({ $0 }), let offset = safeOffset else { return }
        watcher.call(offset)
    }

    /// The latest consistent point of a streamed extraction (nil before the first entry, or when the current entry's
    /// header could not be captured).
    public var checkpoint: ExtractionCheckpoint? {
        state.withLock { state in
            guard let p = state.progress else { return nil }
            return ExtractionCheckpoint(
                headerOffset: p.headerOffset, header: Data(p.header), path: p.path, written: p.written,
                entriesBefore: p.entries, bytesBefore: p.bytes,
                directories: Array(state.directories[0..<p.directories]))
        }
    }
}

/// Extracts an archive into a folder, safely. Every entry is created through the folder's directory handle
/// (`ShareDisk`): its parents are opened from the handle one checked name at a time, never through a link, so an
/// entry can never land outside, whatever earlier entries (or a racing session) did to the tree. Names are checked
/// lexically (no absolute path, no `..`); a symbolic link is created only if its target, resolved against the tree
/// as it stands (links already in it followed), stays inside, and every link is checked again once the archive has
/// ended. Device nodes are refused; entry count, total size, expansion ratio and free space are limited; received
/// modes lose group and other write. A violation stops with an error naming the entry.
public final class Extractor {
    public let root: Directory
    public let policy: ExtractionPolicy
    /// Where the extraction stands, for any thread.
    public let mark = ExtractionMark()
    private var entries = 0
    private var totalBytes: UInt64 = 0
    /// The links this extraction created (relative paths), checked again against the final tree.
    private var links: [[String]] = []
    private let resume: ExtractionCheckpoint?
    /// Files written, for a summary.
    public private(set) var fileCount = 0
    /// Called after each block of file data with its size (progress display).
    public var onBytes: ((Int) -> Void)?

    /// Extracts into the folder `root` (held open; see `Directory`).
    public init(root: Directory, policy: ExtractionPolicy = ExtractionPolicy(), resuming: ExtractionCheckpoint? = nil) {
        self.root = root
        self.policy = policy
        resume = resuming
        if let resuming {
            mark.state.withLock { $0.directories = resuming.directories }
            entries = resuming.entriesBefore
            totalBytes = resuming.bytesBefore
        }
    }

    /// Extracts into the folder at `path`, created (private) if missing.
    public convenience init(
        rootPath path: String, policy: ExtractionPolicy = ExtractionPolicy(), resuming: ExtractionCheckpoint? = nil
    ) throws {
        do {
            self.init(root: try Directory.open(path, create: true, mode: 0o700), policy: policy, resuming: resuming)
        } catch let error as DiskError {
            throw ArchiveError(.io, error.message)
        }
    }

    /// The latest consistent point of a streamed extraction (nil before the first entry, or when the current entry's
    /// header could not be captured).
    public var checkpoint: ExtractionCheckpoint? { mark.checkpoint }

    /// Extracts every entry `reader` yields. `streamBase` is the stream offset of the reader's first byte (for
    /// checkpoints). When resuming, the first entry must be the checkpoint's, and its first `written` data bytes
    /// are already on disk and not rewritten.
    public func run(_ reader: ArchiveReader, streamBase: Int64? = nil) throws {
        var first = true
        while let info = try reader.nextEntry() {
            var skip: UInt64 = 0
            if first, let resume {
                guard info.path == resume.path else {
                    throw ArchiveError(
                        .corrupt, "the resumed stream does not continue at \(resume.path); the partial was discarded")
                }
                skip = resume.written
            }
            first = false
            guard entries < policy.maxEntries else {
                throw ArchiveError(.limit, "the archive holds more than \(policy.maxEntries) entries; it was refused")
            }
            if let streamBase { capture(reader: reader, info: info, base: streamBase) }
            entries += 1
            try extract(info, reader: reader, skip: skip)
        }
        mark.state.withLock { $0.progress = nil }
        try checkLinks()
        try applyDirectoryMetadata()
    }

    /// Reads an archive file's headers without writing anything and applies every rule that does not need the disk:
    /// names, link targets, entry kinds, entry count, total size and expansion ratio. Returns the entry count and
    /// the total file bytes. Extracting a file after this refuses a hostile archive before its first byte lands.
    public static func inspect(file: URL, policy: ExtractionPolicy = ExtractionPolicy()) throws -> (
        entries: Int, bytes: UInt64, files: Int
    ) {
        let reader = try ArchiveReader(file: file.path)
        var entries = 0
        var total: UInt64 = 0
        var links: [String: String] = [:]
        var files: Set<String> = []
        let allowed = max(
            policy.ratioFloor, (reader.inputSize ?? 0).multipliedReportingOverflow(by: policy.maxExpansionRatio).0)
        while let info = try reader.nextEntry() {
            entries += 1
            guard entries <= policy.maxEntries else {
                throw ArchiveError(.limit, "the archive holds more than \(policy.maxEntries) entries; it was refused")
            }
            guard let parts = SafePath.components(info.path) else {
                throw ArchiveError(
                    .unsafeEntry, "refused entry '\(info.path)': its path is absolute or climbs out with '..'")
            }
            let name = parts.joined(separator: "/")
            var prefix = ""
            for part in parts.dropLast() {
                prefix = prefix.isEmpty ? part : prefix + "/" + part
                if links[prefix] != nil {
                    throw ArchiveError(
                        .unsafeEntry,
                        "refused entry '\(info.path)': '\(prefix)' is a link, and share never writes through links")
                }
            }
            switch info.kind {
            case .symlink(let target):
                guard SafePath.linkStaysInside(link: name, target: target, links: links) else {
                    throw ArchiveError(
                        .unsafeEntry, "refused entry '\(info.path)': it links to '\(target)', outside the target folder"
                    )
                }
                links[name] = target
            case .hardlink(let target):
                guard let targetParts = SafePath.components(target), files.contains(targetParts.joined(separator: "/"))
                else {
                    throw ArchiveError(
                        .unsafeEntry,
                        "refused entry '\(info.path)': it is a hard link to '\(target)', which is not a file extracted before it"
                    )
                }
            case .special(let what):
                throw ArchiveError(
                    .unsafeEntry, "refused entry '\(info.path)': it is \(what); share never creates those")
            case .file:
                files.insert(name)
                links[name] = nil
                if let maxFiles = policy.maxFiles, files.count > maxFiles {
                    throw ArchiveError(.limit, "the archive holds more than the \(maxFiles) files its sender announced")
                }
                let (sum, overflow) = total.addingReportingOverflow(info.size ?? 0)
                guard !overflow, sum <= policy.maxTotalBytes else {
                    throw ArchiveError(
                        .limit,
                        "refused entry '\(info.path)': the archive's files exceed \(Format.bytes(policy.maxTotalBytes)) in total"
                    )
                }
                guard sum <= allowed else {
                    throw ArchiveError(
                        .limit,
                        "refused entry '\(info.path)': \(sum) bytes from a \(reader.inputSize ?? 0)-byte archive is more than \(policy.maxExpansionRatio) times its size (an archive bomb?)"
                    )
                }
                total = sum
            case .directory:
                links[name] = nil
            }
        }
        for (link, target) in links where !SafePath.linkStaysInside(link: link, target: target, links: links) {
            throw ArchiveError(
                .unsafeEntry, "refused entry '\(link)': it links to '\(target)', outside the target folder")
        }
        return (entries, total, files.count)
    }

    private func capture(reader: ArchiveReader, info: ArchiveEntryInfo, base: Int64) {
        let headerOffset = base + reader.headerPosition
        var header: [UInt8]?
        // Most headers fit in a few blocks; only a long extended header needs the wider look (copying a megabyte
        // of the window for each of 5,000 small files was a third of a receive's time).
        for limit in [4096, 1 << 20] {
            if let bytes = reader.recentBytes(from: reader.headerPosition, limit: limit),
                let length = TarHeaderSpan.length(of: bytes)
            {
                header = Array(bytes[0..<length])
                break
            }
        }
        let (entries, totalBytes) = (self.entries, self.totalBytes)
        mark.state.withLock { mark in
            // Without its header this entry cannot be resumed into: no checkpoint until the next entry whose header
            // is kept (the last one journaled stands). Kept, the earlier entry's mark would take this entry's bytes.
            mark.progress =
                header.map { (info.path, $0, headerOffset, entries, totalBytes, mark.directories.count, 0) }
        }
        mark.advanced()
    }

    private func record(written: UInt64) {
        mark.state.withLock { $0.progress?.written = written }
        mark.advanced()
    }

    private func extract(_ info: ArchiveEntryInfo, reader: ArchiveReader, skip: UInt64) throws {
        guard let parts = SafePath.components(info.path) else {
            throw ArchiveError(
                .unsafeEntry, "refused entry '\(info.path)': its path is absolute or climbs out with '..'")
        }
        if parts.isEmpty {
            if info.kind == .directory {  // the root itself ("./")
                mark.state.withLock {
                    $0.directories.append(DirectoryMeta(path: "", mode: info.mode & 0o777, modified: info.modified))
                }
                return
            }
            throw ArchiveError(.unsafeEntry, "refused entry '\(info.path)': it has no name")
        }
        let name = parts.last!
        switch info.kind {
        case .directory:
            let parent = try folder(Array(parts.dropLast()), entry: info.path, create: true)
            if let existing = parent.info(name), existing.kind != .directory {
                try disk(info.path) { try parent.remove(name) }
            }
            _ = try folder(parts, entry: info.path, create: true)
            mark.state.withLock {
                $0.directories.append(
                    DirectoryMeta(
                        path: parts.joined(separator: "/"), mode: info.mode & 0o777, modified: info.modified))
            }
        case .file:
            let parent = try folder(Array(parts.dropLast()), entry: info.path, create: true)
            try reserve(info.size ?? 0, entry: info.path, reader: reader)
            try writeFile(name, in: parent, info: info, reader: reader, skip: skip)
            fileCount += 1
        case .symlink(let target):
            guard staysInside(link: parts, target: target) else {
                throw ArchiveError(
                    .unsafeEntry, "refused entry '\(info.path)': it links to '\(target)', outside the target folder")
            }
            let parent = try folder(Array(parts.dropLast()), entry: info.path, create: true)
            try replaceNonDirectory(name, in: parent, entry: info.path)
            try disk(info.path) { try parent.symlink(name, target: target) }
            links.append(parts)
        case .hardlink(let target):
            guard let targetParts = SafePath.components(target), let targetName = targetParts.last else {
                throw ArchiveError(
                    .unsafeEntry,
                    "refused entry '\(info.path)': it is a hard link to '\(target)', outside the target folder")
            }
            let sourceFolder = try folder(Array(targetParts.dropLast()), entry: info.path, create: false)
            guard sourceFolder.info(targetName)?.kind == .file else {
                throw ArchiveError(
                    .unsafeEntry,
                    "refused entry '\(info.path)': it is a hard link to '\(target)', which is not a file extracted before it"
                )
            }
            let parent = try folder(Array(parts.dropLast()), entry: info.path, create: true)
            try replaceNonDirectory(name, in: parent, entry: info.path)
            try disk(info.path) { try sourceFolder.link(targetName, to: name, in: parent) }
            fileCount += 1
        case .special(let what):
            throw ArchiveError(.unsafeEntry, "refused entry '\(info.path)': it is \(what); share never creates those")
        }
    }

    /// The folder at `parts` beneath the root, opened (and with `create`, made) through the handle: a link or a file
    /// in the way stops the extraction.
    private func folder(_ parts: [String], entry: String, create: Bool) throws -> Directory {
        do {
            return try root.directory(components: parts, create: create, mode: 0o700)
        } catch let error as DiskError {
            switch error.kind {
            case .link:
                throw ArchiveError(
                    .unsafeEntry,
                    "refused entry '\(entry)': a link stands in its path, and share never writes through links")
            case .wrongKind:
                throw ArchiveError(.unsafeEntry, "refused entry '\(entry)': a file stands where its folder should be")
            case .notFound:
                throw ArchiveError(
                    .unsafeEntry, "refused entry '\(entry)': it refers to something not extracted before it")
            default:
                throw Self.archiveError(error)
            }
        }
    }

    /// Removes a file or link of that name, so a later entry replaces an earlier one (tar's rule); a folder stays.
    private func replaceNonDirectory(_ name: String, in parent: Directory, entry: String) throws {
        guard let existing = parent.info(name) else { return }
        guard existing.kind != .directory else {
            throw ArchiveError(.unsafeEntry, "refused entry '\(entry)': a folder of that name already exists")
        }
        try disk(entry) { try parent.remove(name) }
    }

    @discardableResult
    private func disk<T>(_ entry: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as DiskError {
            throw Self.archiveError(error)
        }
    }

    static func archiveError(_ error: DiskError) -> ArchiveError {
        switch error.kind {
        case .noSpace: return ArchiveError(.noSpace, error.message)
        case .link, .invalidName: return ArchiveError(.unsafeEntry, error.message)
        default: return ArchiveError(.io, error.message)
        }
    }

    /// Whether a link at `link` pointing to `target` resolves inside the root, following the links the tree holds
    /// now (at most 40, as the kernel does). Absolute targets never stay inside.
    func staysInside(link: [String], target: String) -> Bool {
        SafePath.resolvesInside(link: link, target: target) { path in
            guard let name = path.last, let parent = try? root.directory(components: Array(path.dropLast())),
                parent.info(name)?.kind == .link
            else { return nil }
            return (try? parent.readLink(name)) ?? "/"
        }
    }

    /// Every link created, against the final tree: a link that became a way out (through links added after it) is
    /// removed and refused now, before the folder is ever moved into place.
    private func checkLinks() throws {
        var refused: ArchiveError?
        for link in links {
            guard let name = link.last, let parent = try? root.directory(components: Array(link.dropLast())),
                parent.info(name)?.kind == .link, let target = try? parent.readLink(name)
            else { continue }
            guard !staysInside(link: link, target: target) else { continue }
            _ = try? parent.remove(name)
            refused =
                refused
                ?? ArchiveError(
                    .unsafeEntry,
                    "refused entry '\(link.joined(separator: "/"))': it links to '\(target)', which leads outside the target folder through other links"
                )
        }
        if let refused { throw refused }
    }

    /// Size limits and free space, checked before a file's data is written.
    private func reserve(_ size: UInt64, entry: String, reader: ArchiveReader) throws {
        let (total, overflow) = totalBytes.addingReportingOverflow(size)
        guard !overflow, total <= policy.maxTotalBytes else {
            throw ArchiveError(
                .limit,
                "refused entry '\(entry)': the archive's files exceed \(Format.bytes(policy.maxTotalBytes)) in total")
        }
        if let input = reader.inputSize {
            let allowed = max(policy.ratioFloor, input.multipliedReportingOverflow(by: policy.maxExpansionRatio).0)
            guard total <= allowed else {
                throw ArchiveError(
                    .limit,
                    "refused entry '\(entry)': \(total) bytes from a \(input)-byte archive is more than \(policy.maxExpansionRatio) times its size (an archive bomb?)"
                )
            }
        }
        if size > 0, let free = root.freeSpace {
            guard size + policy.reserveBytes <= free else {
                throw ArchiveError(
                    .noSpace,
                    "refused entry '\(entry)': it needs \(Format.bytes(size)) and the disk has \(Format.bytes(free)) free"
                )
            }
        }
        totalBytes = total
    }

    private func writeFile(
        _ name: String, in parent: Directory, info: ArchiveEntryInfo, reader: ArchiveReader, skip: UInt64
    ) throws {
        if skip == 0 { try replaceNonDirectory(name, in: parent, entry: info.path) }
        let file = try disk(info.path) { try parent.openFile(name, skip == 0 ? .create : .update, mode: 0o600) }
        defer { file.close() }
        var written: UInt64 = 0
        let declared = info.size
        while let (bytes, offset) = try reader.nextBlock() {
            let end = UInt64(offset) + UInt64(bytes.count)
            guard declared.map({ end <= $0 }) ?? (totalBytes + end <= policy.maxTotalBytes) else {
                throw ArchiveError(.limit, "refused entry '\(info.path)': it holds more data than its header says")
            }
            if declared == nil, let input = reader.inputSize,
                end > max(policy.ratioFloor, input &* policy.maxExpansionRatio)
            {
                throw ArchiveError(
                    .limit,
                    "refused entry '\(info.path)': it expands to more than \(policy.maxExpansionRatio) times the archive"
                )
            }
            var start = 0
            if UInt64(offset) < skip { start = Int(min(UInt64(bytes.count), skip - UInt64(offset))) }
            if start < bytes.count {
                do {
                    try file.write(
                        UnsafeRawBufferPointer(rebasing: bytes[start...]), at: UInt64(offset) + UInt64(start))
                } catch let error as DiskError where error.kind == .noSpace {
                    throw ArchiveError(.noSpace, "the disk is full while writing '\(info.path)'")
                } catch let error as DiskError {
                    throw Self.archiveError(error)
                }
            }
            written = max(written, end)
            record(written: written)
            onBytes?(bytes.count - start)
        }
        if declared == nil { totalBytes += written }
        if let declared, written < declared {
            try disk(info.path) { try file.truncate(to: declared) }
        }
        file.setMode(mode_t(info.mode & 0o755))
        if let modified = info.modified { file.setModified(modified) }
    }

    /// Folder modes and times, deepest first (a read-only folder is made read-only last). Received folders lose
    /// group and other write, and stay open to their owner.
    private func applyDirectoryMetadata() throws {
        var seen: Set<String> = []
        for meta in mark.state.withLock({ $0.directories }).reversed() where seen.insert(meta.path).inserted {
            guard let parts = SafePath.components(meta.path),
                let folder = try? root.directory(components: parts)
            else { continue }
            if let modified = meta.modified { folder.setModified(modified) }
            folder.setMode(mode_t((meta.mode & 0o755) | 0o700))
        }
    }
}
