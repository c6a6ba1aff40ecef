import Foundation
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
            case file(path: String, identity: String)
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
                source: .file(path: url.path, identity: "\(info.st_dev):\(info.st_ino)"))
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

    private init(entries: [Entry], skipped: [(String, String)]) throws {
        self.entries = entries
        self.skipped = skipped
        contentBytes = entries.reduce(0) { $0 + ($1.kind == .file ? $1.size : 0) }
        streamSize = try Self.measure(entries)
    }

    /// Walks the folder `root`. Unreadable files and folders stop the plan with an error naming them; `maxEntries`
    /// bounds it.
    public static func folder(_ root: URL, maxEntries: Int = 1_000_000) throws -> ArchivePlan {
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
        return try ArchivePlan(entries: entries, skipped: skipped)
    }

    private static func walk(
        directory: String, relative: String, into entries: inout [Entry], skipped: inout [(String, String)],
        maxEntries: Int
    ) throws {
        guard let dir = opendir(directory) else {
            throw ArchiveError(.io, "cannot read the folder \(directory): \(String(cString: strerror(errno)))")
        }
        var names: [String] = []
        while let item = readdir(dir) {
            let raw = withUnsafeBytes(of: item.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
            if raw == [46] || raw == [46, 46] { continue }
            guard let name = String(validating: raw, as: UTF8.self) else {
                skipped.append((relative + String(decoding: raw, as: UTF8.self), "its name is not UTF-8"))
                continue
            }
            names.append(name)
        }
        closedir(dir)
        names.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        for name in names {
            let path = relative.isEmpty ? name : relative + "/" + name
            let full = directory + "/" + name
            var info = stat()
            guard lstat(full, &info) == 0 else {
                throw ArchiveError(.io, "cannot read \(full): \(String(cString: strerror(errno)))")
            }
            guard entries.count < maxEntries else {
                throw ArchiveError(.limit, "the folder holds more than \(maxEntries) entries")
            }
            let mode = UInt32(info.st_mode) & 0o777
            let identity = "\(info.st_dev):\(info.st_ino)"
            switch info.st_mode & S_IFMT {
            case S_IFREG:
                guard access(full, R_OK) == 0 else {
                    throw ArchiveError(.io, "cannot read \(full): permission denied")
                }
                entries.append(
                    Entry(
                        path: path, kind: .file, size: UInt64(info.st_size), mode: mode,
                        modified: Int64(info.st_mtim.tv_sec), source: .file(path: full, identity: identity)))
            case S_IFDIR:
                guard access(full, R_OK | X_OK) == 0 else {
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

    private static func readLink(_ path: String) throws -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count >= 0 else {
            throw ArchiveError(.io, "cannot read the link \(path): \(String(cString: strerror(errno)))")
        }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Stream size: the headers written for real, the data counted without being read.
    private static func measure(_ entries: [Entry]) throws -> UInt64 {
        var total: UInt64 = 0
        let writer = try ArchiveWriter { total += UInt64($0.count) }
        let zeros = [UInt8](repeating: 0, count: 1 << 16)
        try zeros.withUnsafeBytes { zero in
            for entry in entries {
                try writer.writeHeader(entry.info)
                guard entry.kind == .file else { continue }
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
            text += "\(entry.path)\t\(entry.kind)\t\(entry.size)\t\(entry.mode)\t\(entry.modified)\t\(entry.source)\n"
        }
        return StableDigest.hex(text)
    }

    /// Writes the stream into `writer`, reading each file as it goes. `buffer` is reused for reads. A file whose
    /// size or identity changed since planning stops the stream (`sourceChanged`).
    public func write(to writer: ArchiveWriter, buffer: UnsafeMutableRawBufferPointer) throws {
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
                try Self.copy(path, identity: identity, entry: entry, to: writer, buffer: buffer)
            }
        }
        try writer.finish()
    }

    private static func copy(
        _ path: String, identity: String, entry: Entry, to writer: ArchiveWriter, buffer: UnsafeMutableRawBufferPointer
    ) throws {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            throw ArchiveError(.sourceChanged, "\(path) cannot be read any more: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, UInt64(info.st_size) == entry.size, "\(info.st_dev):\(info.st_ino)" == identity,
            Int64(info.st_mtim.tv_sec) == entry.modified
        else {
            throw ArchiveError(.sourceChanged, "\(path) changed after it was planned")
        }
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL)
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
        return String(format: "%016llx%016llx", a, b)
    }
}
