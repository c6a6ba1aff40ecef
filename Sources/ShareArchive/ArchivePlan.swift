import FoundationEssentials
import ShareText
import Glibc

/// The entries of a tar stream, fixed before the first byte is produced, so the stream is the same bytes every time
/// (entries in byte order of their paths, a folder before its contents, owner and group 0, times in whole
/// seconds). Its size is computed without reading any file, and a resumed transfer regenerates the stream and
/// continues by offset.
public struct ArchivePlan: Sendable {
    public struct Entry: Sendable, Equatable {
        /// Where a file's bytes come from.
        public enum Source: Sendable, Equatable {
            case none
            /// A file on disk, with the device and inode it had when planned.
            case file(path: String, identity: FileIdentity)
            case bytes(Data)
        }

        public var path: String
        public var kind: ArchiveEntryInfo.Kind
        public var size: UInt64
        public var mode: UInt32
        public var modified: Int64
        public var source: Source

        public init(
            path: String, kind: ArchiveEntryInfo.Kind, size: UInt64 = 0, mode: UInt32, modified: Int64,
            source: Source = .none
        ) {
            self.path = path
            self.kind = kind
            self.size = size
            self.mode = mode
            self.modified = modified
            self.source = source
        }

        /// A file on disk, planned as it is now.
        public static func file(_ url: URL, as path: String) throws -> Entry {
            var info = stat()
            guard stat(url.path, &info) == 0, info.st_mode & S_IFMT == S_IFREG, access(url.path, R_OK) == 0 else {
                throw ArchiveError(.io, "cannot read \(url.path): \(String(cString: strerror(errno)))")
            }
            return Entry(
                path: path, kind: .file, size: UInt64(info.st_size), mode: UInt32(info.st_mode) & 0o777,
                modified: Int64(info.st_mtim.tv_sec),
                source: .file(path: url.path, identity: FileIdentity(info)))
        }

        public var info: ArchiveEntryInfo {
            ArchiveEntryInfo(path: path, kind: kind, size: kind == .file ? size : nil, mode: mode, modified: modified)
        }
    }

    public let entries: [Entry]
    /// Entries left out and why (special files, links leaving the folder, names that are not UTF-8).
    public let skipped: [(path: String, reason: String)]
    /// Sum of the regular files' sizes.
    public let contentBytes: UInt64
    /// Size of the tar stream in bytes.
    public private(set) var streamSize: UInt64 = 0

    /// Exactly these entries, in this order.
    public init(entries: [Entry]) throws {
        self.entries = entries
        skipped = []
        contentBytes = entries.reduce(0) { $0 + ($1.kind == .file ? $1.size : 0) }
        streamSize = try Self.measure(entries)
    }

    private init(entries: [Entry], skipped: [(String, String)], measure: Bool) throws {
        self.entries = entries
        self.skipped = skipped
        contentBytes = entries.reduce(0) { $0 + ($1.kind == .file ? $1.size : 0) }
        streamSize = measure ? try Self.measure(entries) : 0
    }

    /// Walks the folder `root`. Unreadable files and folders stop the plan with an error naming them; `maxEntries`
    /// bounds it. `measure: false` skips computing `streamSize` (left 0) for a stream nobody needs to announce.
    public static func folder(_ root: URL, maxEntries: Int = 1_000_000, measure: Bool = true) throws -> ArchivePlan {
        var info = stat()
        guard stat(root.path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw ArchiveError(.io, "\(root.path) is not a readable folder")
        }
        // The folder itself first ("./"), for its mode and time.
        var entries = [
            Entry(
                path: "./", kind: .directory, mode: UInt32(info.st_mode) & 0o777, modified: Int64(info.st_mtim.tv_sec))
        ]
        var skipped: [(String, String)] = []
        try walk(
            directory: root.standardizedFileURL.path, relative: "", into: &entries, skipped: &skipped,
            maxEntries: maxEntries)
        dropLinksLeavingThroughLinks(&entries, skipped: &skipped)
        return try ArchivePlan(entries: entries, skipped: skipped, measure: measure)
    }

    private static func walk(
        directory: String, relative: String, into entries: inout [Entry], skipped: inout [(String, String)],
        maxEntries: Int
    ) throws {
        guard let dir = opendir(directory) else {
            throw ArchiveError(.io, "cannot read the folder \(directory): \(String(cString: strerror(errno)))")
        }
        // Names and their metadata while the folder is open (lookups relative to it), sorted by their bytes.
        var listed: [(raw: [UInt8], info: stat)] = []
        let fd = dirfd(dir)
        while let item = readdir(dir) {
            let raw = withUnsafeBytes(of: item.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
            if raw == [46] || raw == [46, 46] { continue }
            var info = stat()
            let found = raw.withUnsafeBufferPointer { bytes in
                bytes.withMemoryRebound(to: CChar.self) { name in
                    var terminated = Array(name)
                    terminated.append(0)
                    return fstatat(fd, terminated, &info, AT_SYMLINK_NOFOLLOW) == 0
                }
            }
            guard found else {
                let code = errno
                closedir(dir)
                throw ArchiveError(
                    .io,
                    "cannot read \(directory)/\(String(decoding: raw, as: UTF8.self)): \(String(cString: strerror(code)))"
                )
            }
            listed.append((raw, info))
        }
        closedir(dir)
        listed.sort { $0.raw.lexicographicallyPrecedes($1.raw) }
        var named: [(name: String, info: stat)] = []
        named.reserveCapacity(listed.count)
        for (raw, info) in listed {
            guard let name = String(validating: raw, as: UTF8.self) else {
                let shown = relative.isEmpty ? "" : relative + "/"
                skipped.append((shown + String(decoding: raw, as: UTF8.self), "its name is not UTF-8"))
                continue
            }
            named.append((name, info))
        }
        for (name, info) in named {
            let path = relative.isEmpty ? name : relative + "/" + name
            let full = directory + "/" + name
            guard entries.count < maxEntries else {
                throw ArchiveError(.limit, "the folder holds more than \(maxEntries) entries")
            }
            let mode = UInt32(info.st_mode) & 0o777
            let identity = FileIdentity(info)
            switch info.st_mode & S_IFMT {
            case S_IFREG:
                guard mayRead(info, full) else { throw ArchiveError(.io, "cannot read \(full): permission denied") }
                entries.append(
                    Entry(
                        path: path, kind: .file, size: UInt64(info.st_size), mode: mode,
                        modified: Int64(info.st_mtim.tv_sec), source: .file(path: full, identity: identity)))
            case S_IFDIR:
                guard mayRead(info, full, execute: true) else {
                    throw ArchiveError(.io, "cannot read the folder \(full): permission denied")
                }
                entries.append(Entry(path: path, kind: .directory, mode: mode, modified: Int64(info.st_mtim.tv_sec)))
                try walk(
                    directory: full, relative: path, into: &entries, skipped: &skipped, maxEntries: maxEntries)
            case S_IFLNK:
                let target = try readLink(full)
                guard SafePath.linkStaysInside(link: path, target: target) else {
                    skipped.append((path, "it is a link to \(target), outside the folder"))
                    continue
                }
                entries.append(
                    Entry(path: path, kind: .symlink(target), mode: 0o777, modified: Int64(info.st_mtim.tv_sec)))
            default:
                skipped.append((path, "it is a device, FIFO or socket"))
            }
        }
    }

    /// Each link was checked alone as it was found; once unpacked, a link is followed through the others (`d -> .`
    /// and `chain -> d/..` each stay inside, together `chain` leads out). Every link is resolved against all the
    /// links kept, whatever their order in the stream, until none leaves: those that do are left out.
    static func dropLinksLeavingThroughLinks(_ entries: inout [Entry], skipped: inout [(String, String)]) {
        var links: [String: String] = [:]
        for entry in entries { if case .symlink(let target) = entry.kind { links[entry.path] = target } }
        guard links.count > 1 else { return }
        // A link left out is no link once unpacked: the others are resolved again without it, until none leaves.
        var kept = links
        var changed = true
        while changed {
            changed = false
            for (path, target) in kept where !SafePath.linkStaysInside(link: path, target: target, links: kept) {
                kept[path] = nil
                changed = true
            }
        }
        let leaving = Set(links.keys).subtracting(kept.keys)
        guard !leaving.isEmpty else { return }
        entries.removeAll { leaving.contains($0.path) }
        for path in leaving.sorted() {
            skipped.append(
                (path, "it is a link to \(links[path]!), which leads outside the folder through other links"))
        }
    }

    /// Readability from the mode bits already at hand (no extra system call per file); `access` only when the bits
    /// alone say no, so ACLs and capabilities are still honoured.
    private static func mayRead(_ info: stat, _ path: String, execute: Bool = false) -> Bool {
        let euid = geteuid()
        let mode = UInt32(info.st_mode)
        let need: UInt32 = execute ? 0o5 : 0o4
        if euid == 0 { return true }
        if info.st_uid == euid, (mode >> 6) & need == need { return true }
        if info.st_uid != euid, info.st_gid == getegid(), (mode >> 3) & need == need { return true }
        if info.st_uid != euid, info.st_gid != getegid(), mode & need == need { return true }
        return access(path, execute ? R_OK | X_OK : R_OK) == 0
    }

    private static func readLink(_ path: String) throws -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count >= 0 else {
            throw ArchiveError(.io, "cannot read the link \(path): \(String(cString: strerror(errno)))")
        }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Stream size: the headers written for real, the data counted without being read. A file under 8 GiB has the
    /// same header whatever its size (ustar's octal field holds it; pax adds a `size` record only beyond), so its
    /// header is written as if empty and its data counted as whole 512-byte blocks; larger files go through the
    /// writer with zeros standing for their data.
    private static func measure(_ entries: [Entry]) throws -> UInt64 {
        var total: UInt64 = 0
        let writer = try ArchiveWriter { total += UInt64($0.count) }
        let zeros = [UInt8](repeating: 0, count: 1 << 16)
        let ustarLimit: UInt64 = 0o77777777777
        try zeros.withUnsafeBytes { zero in
            for entry in entries {
                guard entry.kind == .file, entry.size > 0 else {
                    try writer.writeHeader(entry.info)
                    continue
                }
                if entry.size <= ustarLimit {
                    var info = entry.info
                    info.size = 0
                    try writer.writeHeader(info)
                    total += (entry.size + 511) / 512 * 512
                    continue
                }
                try writer.writeHeader(entry.info)
                var left = entry.size
                while left > 0 {
                    let n = Int(min(left, UInt64(zero.count)))
                    try writer.writeData(UnsafeRawBufferPointer(rebasing: zero[0..<n]))
                    left -= UInt64(n)
                }
            }
        }
        try writer.finish()
        return total
    }

    /// A short fingerprint of everything that shapes the stream: a resumed transfer continues only if it matches.
    public var version: String {
        var text = "\(streamSize)\n"
        for entry in entries {
            text += "\(entry.path)\t\(entry.kind.printed)\t\(entry.size)\t\(entry.mode)\t\(entry.modified)\t"
            text += entry.source.printed + "\n"
        }
        return StableDigest.hex(text)
    }

    /// Writes the stream into `writer`, reading each file as it goes. `buffer` is reused for reads. A file whose
    /// size or identity changed since planning stops the stream (`sourceChanged`).
    public func write(to writer: ArchiveWriter, buffer: UnsafeMutableRawBufferPointer) throws {
        let folders = FolderHandles()
        defer { folders.close() }
        for entry in entries {
            try writer.writeHeader(entry.info)
            guard entry.kind == .file else { continue }
            switch entry.source {
            case .none:
                guard entry.size == 0 else { throw ArchiveError(.io, "\(entry.path) has no source for its data") }
            case .bytes(let data):
                guard UInt64(data.count) == entry.size else {
                    throw ArchiveError(.sourceChanged, "\(entry.path) changed size after it was planned")
                }
                try data.withUnsafeBytes { try writer.writeData($0) }
            case .file(let path, let identity):
                try Self.copy(path, identity: identity, entry: entry, to: writer, buffer: buffer, folders: folders)
            }
        }
        try writer.finish()
    }

    private static func copy(
        _ path: String, identity: FileIdentity, entry: Entry, to writer: ArchiveWriter,
        buffer: UnsafeMutableRawBufferPointer,
        folders: FolderHandles
    ) throws {
        let fd = folders.open(path)
        guard fd >= 0 else {
            throw ArchiveError(.sourceChanged, "\(path) cannot be read any more: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, UInt64(info.st_size) == entry.size, FileIdentity(info) == identity,
            Int64(info.st_mtim.tv_sec) == entry.modified
        else {
            throw ArchiveError(.sourceChanged, "\(path) changed after it was planned")
        }
        if entry.size > 1 << 20 { posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL) }
        var left = entry.size
        var offset: off_t = 0
        while left > 0 {
            let want = Int(min(left, UInt64(buffer.count)))
            let n = pread(fd, buffer.baseAddress, want, offset)
            if n < 0, errno == EINTR { continue }
            guard n > 0 else {
                throw ArchiveError(.sourceChanged, "\(path) became shorter while it was being archived")
            }
            try writer.writeData(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            left -= UInt64(n)
            offset += off_t(n)
        }
    }

    /// One line per entry: the path (folders end in `/`, links show their target) and a file's size.
    public var listing: String {
        var lines: [String] = []
        for entry in entries {
            switch entry.kind {
            case .directory where entry.path == "./": continue
            case .directory: lines.append(entry.path + "/")
            case .symlink(let target): lines.append("\(entry.path) -> \(target)")
            default: lines.append("\(entry.path)\t\(entry.size)")
            }
        }
        return lines.joined(separator: "\n") + (lines.isEmpty ? "" : "\n")
    }
}

extension ArchivePlan.Entry.Source {
    /// What `"\(source)"` prints, written out: the runtime's reflection printed each of a plan's thousands of
    /// entries for its version (a third of a sender's own time for 5,000 small files). Versions stay the same.
    var printed: String {
        switch self {
        case .none: "none"
        case .file(let path, let identity): "file(path: \(path.debugDescription), identity: \(identity))"
        case .bytes(let data): "bytes(\(data.debugDescription))"
        }
    }
}

extension ArchiveEntryInfo.Kind {
    /// What `"\(kind)"` prints, written out (as above).
    var printed: String {
        switch self {
        case .file: "file"
        case .directory: "directory"
        case .symlink(let target): "symlink(\(target.debugDescription))"
        case .hardlink(let target): "hardlink(\(target.debugDescription))"
        case .special(let what): "special(\(what.debugDescription))"
        }
    }
}

/// Device and inode: which file a path named when it was planned.
public struct FileIdentity: Sendable, Equatable, CustomStringConvertible {
    public let device: UInt64
    public let inode: UInt64

    init(_ info: stat) {
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }

    public var description: String { "\(device):\(inode)" }
}

/// The folder of the file opened last, kept open: files are opened relative to it (a plan lists a folder's files
/// together), so the kernel does not walk the whole path again for each one.
final class FolderHandles {
    private var path = ""
    private var fd: Int32 = -1

    /// Opens a file read-only without following a final link; -1 with errno set on failure.
    func open(_ file: String) -> Int32 {
        guard let slash = file.lastIndex(of: "/"), slash != file.startIndex else {
            return Glibc.open(file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        }
        let folder = String(file[..<slash])
        if folder != path {
            close()
            fd = Glibc.open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            path = fd >= 0 ? folder : ""
        }
        guard fd >= 0 else { return Glibc.open(file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        return openat(fd, String(file[file.index(after: slash)...]), O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
    }

    func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
        path = ""
    }
}

/// FNV-1a, 128 bits as two 64-bit lanes: a fingerprint of plan metadata (not a security digest; the transfer itself
/// is protected by SHA-256 per chunk).
enum StableDigest {
    static func hex(_ text: String) -> String {
        var a: UInt64 = 0xcbf2_9ce4_8422_2325
        var b: UInt64 = 0x8422_2325_cbf2_9ce4
        for byte in text.utf8 {
            a = (a ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
            b = (b ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 &+ 1
        }
        return Format.hex(UInt64(a), width: 16) + Format.hex(UInt64(b), width: 16)
    }
}
