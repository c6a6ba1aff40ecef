import Foundation
import Glibc

/// Limits an extraction enforces on top of the path rules.
public struct ExtractionPolicy: Sendable {
    /// Most entries one archive may hold.
    public var maxEntries = 100_000
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

/// Extracts an archive into a folder, safely: names are checked lexically (no absolute path, no `..`), nothing is
/// written through a link, links must stay inside, device nodes are refused, and entry count, total size, expansion
/// ratio and free space are limited. Everything is created under `root`; a violation stops with an error naming the
/// entry.
public final class Extractor: @unchecked Sendable {  // runs on one thread; `checkpoint` may be read from another
    public let root: URL
    public let policy: ExtractionPolicy
    private let lock = NSLock()
    private var directories: [DirectoryMeta] = []
    private var entries = 0
    private var totalBytes: UInt64 = 0
    private var knownDirectories: Set<String> = []
    private var progress:
        (
            path: String, header: [UInt8], headerOffset: Int64, entries: Int, bytes: UInt64,
            directories: Int, written: UInt64
        )?
    private let resume: ExtractionCheckpoint?
    /// Files written, for a summary.
    public private(set) var fileCount = 0
    /// Called after each block of file data with its size (progress display).
    public var onBytes: ((Int) -> Void)?

    public init(root: URL, policy: ExtractionPolicy = ExtractionPolicy(), resuming: ExtractionCheckpoint? = nil) throws
    {
        self.root = root
        self.policy = policy
        resume = resuming
        if let resuming {
            directories = resuming.directories
            entries = resuming.entriesBefore
            totalBytes = resuming.bytesBefore
        }
        guard mkdir(root.path, 0o700) == 0 || errno == EEXIST else {
            throw ArchiveError(.io, "cannot create \(root.path): \(String(cString: strerror(errno)))")
        }
    }

    /// The latest consistent point of a streamed extraction (nil before the first entry, or when the current entry's
    /// header could not be captured).
    public var checkpoint: ExtractionCheckpoint? {
        lock.lock()
        defer { lock.unlock() }
        guard let p = progress else { return nil }
        return ExtractionCheckpoint(
            headerOffset: p.headerOffset, header: Data(p.header), path: p.path, written: p.written,
            entriesBefore: p.entries, bytesBefore: p.bytes, directories: Array(directories[0..<p.directories]))
    }

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
        lock.lock()
        progress = nil
        lock.unlock()
        try applyDirectoryMetadata()
    }

    /// Reads an archive file's headers without writing anything and applies every rule that does not need the disk:
    /// names, link targets, entry kinds, entry count, total size and expansion ratio. Returns the entry count and
    /// the total file bytes. Extracting a file after this refuses a hostile archive before its first byte lands.
    public static func inspect(file: URL, policy: ExtractionPolicy = ExtractionPolicy()) throws -> (
        entries: Int, bytes: UInt64
    ) {
        let reader = try ArchiveReader(file: file.path)
        var entries = 0
        var total: UInt64 = 0
        var links: Set<String> = []
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
                if links.contains(prefix) {
                    throw ArchiveError(
                        .unsafeEntry,
                        "refused entry '\(info.path)': '\(prefix)' is a link, and share never writes through links")
                }
            }
            switch info.kind {
            case .symlink(let target):
                guard SafePath.linkStaysInside(link: name, target: target) else {
                    throw ArchiveError(
                        .unsafeEntry, "refused entry '\(info.path)': it links to '\(target)', outside the target folder"
                    )
                }
                links.insert(name)
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
                links.remove(name)
                let (sum, overflow) = total.addingReportingOverflow(info.size ?? 0)
                guard !overflow, sum <= policy.maxTotalBytes else {
                    throw ArchiveError(
                        .limit,
                        "refused entry '\(info.path)': the archive's files exceed \(policy.maxTotalBytes) bytes in total"
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
                links.remove(name)
            }
        }
        return (entries, total)
    }

    private func capture(reader: ArchiveReader, info: ArchiveEntryInfo, base: Int64) {
        let headerOffset = base + reader.headerPosition
        var header: [UInt8]?
        if let bytes = reader.recentBytes(from: reader.headerPosition, limit: 1 << 20),
            let length = TarHeaderSpan.length(of: bytes)
        {
            header = Array(bytes[0..<length])
        }
        lock.lock()
        defer { lock.unlock() }
        if let header {
            progress = (info.path, header, headerOffset, entries, totalBytes, directories.count, 0)
        }
    }

    private func record(written: UInt64) {
        lock.lock()
        progress?.written = written
        lock.unlock()
    }

    private func extract(_ info: ArchiveEntryInfo, reader: ArchiveReader, skip: UInt64) throws {
        guard let parts = SafePath.components(info.path) else {
            throw ArchiveError(
                .unsafeEntry, "refused entry '\(info.path)': its path is absolute or climbs out with '..'")
        }
        let name = parts.joined(separator: "/")
        if parts.isEmpty {
            if info.kind == .directory {  // the root itself ("./")
                lock.lock()
                directories.append(DirectoryMeta(path: "", mode: info.mode & 0o777, modified: info.modified))
                lock.unlock()
                return
            }
            throw ArchiveError(.unsafeEntry, "refused entry '\(info.path)': it has no name")
        }
        let full = root.path + "/" + name
        switch info.kind {
        case .directory:
            try ensureParents(parts, entry: info.path)
            try makeDirectory(full, entry: info.path)
            knownDirectories.insert(name)
            lock.lock()
            directories.append(DirectoryMeta(path: name, mode: info.mode & 0o777, modified: info.modified))
            lock.unlock()
        case .file:
            try ensureParents(parts, entry: info.path)
            try reserve(info.size ?? 0, entry: info.path, reader: reader)
            try writeFile(full, info: info, reader: reader, skip: skip)
            fileCount += 1
        case .symlink(let target):
            guard SafePath.linkStaysInside(link: name, target: target) else {
                throw ArchiveError(
                    .unsafeEntry, "refused entry '\(info.path)': it links to '\(target)', outside the target folder")
            }
            try ensureParents(parts, entry: info.path)
            try removeNonDirectory(full, entry: info.path)
            guard symlink(target, full) == 0 else { throw ioError(full) }
        case .hardlink(let target):
            guard let targetParts = SafePath.components(target), !targetParts.isEmpty else {
                throw ArchiveError(
                    .unsafeEntry,
                    "refused entry '\(info.path)': it is a hard link to '\(target)', outside the target folder")
            }
            try ensureParents(targetParts, entry: info.path, create: false)
            let source = root.path + "/" + targetParts.joined(separator: "/")
            var st = stat()
            guard lstat(source, &st) == 0, st.st_mode & S_IFMT == S_IFREG else {
                throw ArchiveError(
                    .unsafeEntry,
                    "refused entry '\(info.path)': it is a hard link to '\(target)', which is not a file extracted before it"
                )
            }
            try ensureParents(parts, entry: info.path)
            try removeNonDirectory(full, entry: info.path)
            guard link(source, full) == 0 else { throw ioError(full) }
            fileCount += 1
        case .special(let what):
            throw ArchiveError(.unsafeEntry, "refused entry '\(info.path)': it is \(what); share never creates those")
        }
    }

    /// Checks (creating where missing) that every parent of `parts` is a real folder under the root, not a link.
    private func ensureParents(_ parts: [String], entry: String, create: Bool = true) throws {
        var path = ""
        for part in parts.dropLast() {
            path = path.isEmpty ? part : path + "/" + part
            if knownDirectories.contains(path) { continue }
            let full = root.path + "/" + path
            var st = stat()
            if lstat(full, &st) != 0 {
                guard errno == ENOENT, create else { throw ioError(full) }
                guard mkdir(full, 0o755) == 0 else { throw ioError(full) }
            } else if st.st_mode & S_IFMT == S_IFLNK {
                throw ArchiveError(
                    .unsafeEntry, "refused entry '\(entry)': '\(path)' is a link, and share never writes through links")
            } else if st.st_mode & S_IFMT != S_IFDIR {
                throw ArchiveError(.unsafeEntry, "refused entry '\(entry)': '\(path)' is a file, not a folder")
            }
            knownDirectories.insert(path)
        }
    }

    private func makeDirectory(_ full: String, entry: String) throws {
        var st = stat()
        if lstat(full, &st) == 0 {
            if st.st_mode & S_IFMT == S_IFDIR { return }
            guard unlink(full) == 0 else { throw ioError(full) }
        }
        guard mkdir(full, 0o700) == 0 else { throw ioError(full) }
    }

    private func removeNonDirectory(_ full: String, entry: String) throws {
        var st = stat()
        guard lstat(full, &st) == 0 else { return }
        guard st.st_mode & S_IFMT != S_IFDIR else {
            throw ArchiveError(.unsafeEntry, "refused entry '\(entry)': a folder of that name already exists")
        }
        guard unlink(full) == 0 else { throw ioError(full) }
    }

    /// Size limits and free space, checked before a file's data is written.
    private func reserve(_ size: UInt64, entry: String, reader: ArchiveReader) throws {
        let (total, overflow) = totalBytes.addingReportingOverflow(size)
        guard !overflow, total <= policy.maxTotalBytes else {
            throw ArchiveError(
                .limit, "refused entry '\(entry)': the archive's files exceed \(policy.maxTotalBytes) bytes in total")
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
        var fs = statvfs()
        if size > 0, statvfs(root.path, &fs) == 0 {
            let free = UInt64(fs.f_bavail) * UInt64(fs.f_frsize)
            guard size + policy.reserveBytes <= free else {
                throw ArchiveError(
                    .noSpace, "refused entry '\(entry)': it needs \(size) bytes and the disk has \(free) free")
            }
        }
        totalBytes = total
    }

    private func writeFile(_ full: String, info: ArchiveEntryInfo, reader: ArchiveReader, skip: UInt64) throws {
        var flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC
        if skip == 0 {
            try removeNonDirectory(full, entry: info.path)
            flags |= O_TRUNC
        }
        let fd = open(full, flags, 0o600)
        guard fd >= 0 else { throw ioError(full) }
        defer { close(fd) }
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
            var position = start
            while position < bytes.count {
                let n = pwrite(
                    fd, bytes.baseAddress! + position, bytes.count - position, off_t(offset) + off_t(position))
                if n < 0 {
                    if errno == EINTR { continue }
                    if errno == ENOSPC || errno == EDQUOT {
                        throw ArchiveError(.noSpace, "the disk is full while writing '\(info.path)'")
                    }
                    throw ioError(full)
                }
                position += n
            }
            written = max(written, end)
            record(written: written)
            onBytes?(bytes.count - start)
        }
        if declared == nil { totalBytes += written }
        if let declared, written < declared, ftruncate(fd, off_t(declared)) != 0 { throw ioError(full) }
        fchmod(fd, mode_t(info.mode & 0o777))
        if let modified = info.modified {
            var times = [
                timespec(tv_sec: time_t(modified), tv_nsec: 0), timespec(tv_sec: time_t(modified), tv_nsec: 0),
            ]
            futimens(fd, &times)
        }
    }

    /// Folder modes and times, deepest first (a read-only folder is made read-only last).
    private func applyDirectoryMetadata() throws {
        var seen: Set<String> = []
        for meta in directories.reversed() where seen.insert(meta.path).inserted {
            let full = meta.path.isEmpty ? root.path : root.path + "/" + meta.path
            if let modified = meta.modified {
                var times = [
                    timespec(tv_sec: time_t(modified), tv_nsec: 0), timespec(tv_sec: time_t(modified), tv_nsec: 0),
                ]
                utimensat(AT_FDCWD, full, &times, AT_SYMLINK_NOFOLLOW)
            }
            chmod(full, mode_t(meta.mode | 0o700))
        }
    }

    private func ioError(_ path: String) -> ArchiveError {
        let code = errno
        if code == ENOSPC || code == EDQUOT { return ArchiveError(.noSpace, "the disk is full at \(path)") }
        return ArchiveError(.io, "cannot write \(path): \(String(cString: strerror(code)))")
    }
}
