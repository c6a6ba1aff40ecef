internal import CShareSystem
import Glibc

/// An open file: positional reads and writes, size, mode, times, flush. Closed by `close()` or when released.
public final class OpenFile: @unchecked Sendable {  // positional I/O on one descriptor; closed once by its owner
    let fd: Int32
    /// Where the file was when it was opened, for messages only.
    public let path: String
    private var closed = false

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { close() }

    public func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(fd)
    }

    /// Reads up to `buffer.count` bytes at `offset`; fewer only at the end of the file.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws -> Int {
        var done = 0
        while done < buffer.count {
            let n = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                throw DiskError.system("cannot read \(path)")
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Reads up to `count` bytes at `offset` into the start of `buffer`.
    public func read(into buffer: inout [UInt8], count: Int, at offset: UInt64) throws -> Int {
        precondition(count <= buffer.count)
        return try buffer.withUnsafeMutableBytes {
            try read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<count]), at: offset)
        }
    }

    /// The whole file, at most `limit` bytes (more is an error).
    public func readAll(limit: Int) throws -> [UInt8] {
        let size = try self.size
        guard size <= UInt64(limit) else {
            throw DiskError(.io, "\(path) is larger than \(limit) bytes")
        }
        var bytes = [UInt8](repeating: 0, count: Int(size))
        let n = try read(into: &bytes, count: bytes.count, at: 0)
        return Array(bytes[0..<n])
    }

    /// A second descriptor of the same open file, closed on its own (for another thread that outlives this one).
    public func duplicate() throws -> OpenFile {
        let copy = dup(fd)
        guard copy >= 0 else { throw DiskError.system("cannot duplicate \(path)") }
        return OpenFile(fd: copy, path: path)
    }

    /// What a clone did.
    public enum Cloned: Sendable { case shared, unaligned, unsupported }

    /// Makes `length` bytes of this file at `offset` share the blocks of `source` at `sourceOffset` instead of a
    /// copy (a reflink, FICLONERANGE): `shared` when done; `unsupported` where the file system cannot share blocks
    /// (ext4, tmpfs) and `unaligned` for a range not on its block boundaries, whose bytes are to be written as
    /// usual. A full disk is an error.
    public func clone(from source: OpenFile, at sourceOffset: UInt64, length: Int, to offset: UInt64) throws -> Cloned {
        if cshare_clone_range(source.fd, sourceOffset, UInt64(length), fd, offset) == 0 { return .shared }
        switch errno {
        case ENOSPC, EDQUOT: throw DiskError(.noSpace, "\(path): no space left on the disk")
        case EIO: throw DiskError.system("cannot write \(path)")
        case EINVAL: return .unaligned
        default: return .unsupported
        }
    }

    /// Writes all of `bytes` at `offset`. A full disk is a `noSpace` error.
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws {
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                throw DiskError.system("cannot write \(path)")
            }
            done += n
        }
    }

    public func write(_ bytes: ArraySlice<UInt8>, at offset: UInt64) throws {
        try bytes.withUnsafeBytes { try write($0, at: offset) }
    }

    /// Appends `bytes` at the end in one write (the file must have been opened with `.append`, so concurrent
    /// writers never interleave inside a line).
    public func append(_ bytes: [UInt8]) throws {
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count else { throw DiskError.system("cannot write \(path)") }
    }

    public var size: UInt64 {
        get throws {
            var st = stat()
            guard fstat(fd, &st) == 0 else { throw DiskError.system("cannot read \(path)") }
            return UInt64(st.st_size)
        }
    }

    /// The file's description.
    public var info: FileInfo? {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        return FileInfo(st)
    }

    public func truncate(to size: UInt64) throws {
        guard ftruncate(fd, off_t(size)) == 0 else { throw DiskError.system("cannot set the size of \(path)") }
    }

    /// Flushes the file's data to disk.
    public func sync() throws {
        guard fsync(fd) == 0 else { throw DiskError.system("cannot flush \(path)") }
    }

    public func setMode(_ mode: mode_t) { _ = fchmod(fd, mode) }

    /// Sets the modification (and access) time, whole seconds.
    public func setModified(_ seconds: Int64) {
        var times = [timespec(tv_sec: time_t(seconds), tv_nsec: 0), timespec(tv_sec: time_t(seconds), tv_nsec: 0)]
        _ = futimens(fd, &times)
    }

    /// Sets the modification time to the nanosecond (the access time is left as it is).
    public func setModified(nanoseconds: Int64) throws {
        let time = Self.time(nanoseconds: nanoseconds)
        // UTIME_OMIT, a macro Swift cannot see: (1 << 30) - 2.
        var times = [timespec(tv_sec: 0, tv_nsec: (1 << 30) - 2), time]
        guard futimens(fd, &times) == 0 else { throw DiskError.system("cannot set the time of \(path)") }
    }

    /// A time in nanoseconds since 1970 as the kernel takes it: whole seconds rounded down, and the nanoseconds
    /// after them (never negative: a time before 1970 with a fraction of a second is refused otherwise).
    static func time(nanoseconds: Int64) -> timespec {
        let (seconds, rest) = nanoseconds.quotientAndRemainder(dividingBy: 1_000_000_000)
        return rest < 0
            ? timespec(tv_sec: time_t(seconds - 1), tv_nsec: Int(rest + 1_000_000_000))
            : timespec(tv_sec: time_t(seconds), tv_nsec: Int(rest))
    }

    /// Tells the kernel the file will be read from start to end.
    public func adviseSequential() { _ = posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL) }
}
