import FoundationEssentials
import Glibc
import ShareNet

/// Small file reads and folder listings straight from the system calls. FileManager's own paths touch far more
/// code, and every page of code touched is memory a small device (the watch) keeps.
public enum PosixFiles {
    /// The whole contents of a regular file of at most `limit` bytes; nil when it is missing or unreadable.
    public static func read(_ path: String, limit: Int = 16 << 20) -> Data? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let n = Glibc.read(fd, &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            if n < 0 { return nil }
            if n == 0 { break }
            bytes += buffer[0..<n]
            if bytes.count > limit { return nil }
        }
        return Data(bytes)
    }

    /// The first `limit` bytes of a file (fewer when it is shorter); nil when it is missing or unreadable.
    public static func readHead(_ path: String, limit: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: min(limit, 64 << 10))
        while bytes.count < limit {
            guard let n = try? Syscalls.read(fd, into: &buffer, count: min(buffer.count, limit - bytes.count)) else {
                return nil
            }
            if n == 0 { break }
            bytes += buffer[..<n]
        }
        return bytes
    }

    /// The size of what `path` names (a link followed); nil when it is missing.
    public static func size(_ path: String) -> UInt64? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return UInt64(max(0, info.st_size))
    }

    /// What tells one version of a file from the next: a save replaces it (another inode) or rewrites it (another
    /// size, modification or change time, to the nanosecond).
    public struct Stamp: Equatable, Sendable {
        public let inode: UInt64
        public let size: Int64
        public let modified: Int64
        public let changed: Int64
    }

    /// The stamp of what `path` names (a link followed); nil when it is missing. One `stat`.
    public static func stamp(_ path: String) -> Stamp? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        func nanoseconds(_ time: timespec) -> Int64 { Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec) }
        return Stamp(
            inode: UInt64(info.st_ino), size: Int64(info.st_size), modified: nanoseconds(info.st_mtim),
            changed: nanoseconds(info.st_ctim))
    }

    /// Whether something exists at `path` (a link is not followed).
    public static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// The names in a folder, `.` and `..` left out; empty when it cannot be read.
    public static func entries(_ path: String) -> [String] {
        guard let directory = opendir(path) else { return [] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}
