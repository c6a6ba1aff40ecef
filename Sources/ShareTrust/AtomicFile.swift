import FoundationEssentials
import Glibc
import ShareNet

/// Writes files so that a reader sees either the old contents or the new, never a mix, even after a crash.
public enum AtomicFile {
    /// Writes `data` to a temporary file beside `url` with `mode` and renames it over `url`. With `durable` (the
    /// default) the file and its directory are flushed to disk too, so the new contents survive a power loss;
    /// without it they survive a crash of the process (the kernel still holds them).
    public static func write(_ data: Data, to url: URL, mode: mode_t = 0o644, durable: Bool = true) throws {
        let directory = url.deletingLastPathComponent()
        let temporary = directory.appendingPathComponent(
            ".\(url.lastPathComponent).tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        let fd = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw posixError("cannot create \(temporary.path)") }
        var ok = false
        defer {
            if !ok { unlink(temporary.path) }
        }
        do {
            defer { close(fd) }
            do {
                try Syscalls.pwriteAll(fd, Array(data)[...], offset: 0)
            } catch {
                throw posixError("cannot write \(url.path)")
            }
            guard fchmod(fd, mode) == 0 else { throw posixError("cannot set the mode of \(url.path)") }
            if durable, fsync(fd) != 0 { throw posixError("cannot flush \(url.path)") }
        }
        guard rename(temporary.path, url.path) == 0 else { throw posixError("cannot replace \(url.path)") }
        ok = true
        guard durable else { return }
        let dirfd = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirfd >= 0 {
            fsync(dirfd)
            close(dirfd)
        }
    }

    public static func posixError(_ what: String) -> FileError {
        let code = errno
        return FileError(description: "\(what): \(String(cString: strerror(code)))", code: code)
    }

    /// A failed file operation, with the system's reason (and its error number, when there was one).
    public struct FileError: Error, CustomStringConvertible, Sendable {
        public let description: String
        public var code: Int32 = 0
        /// Whether the disk (or the user's quota) was full.
        public var isNoSpace: Bool { code == ENOSPC || code == EDQUOT }
    }
}
