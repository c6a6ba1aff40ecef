internal import CShareSystem
import Glibc
import ShareText

/// A folder we were given, held open as a file descriptor: the only way share creates, opens, renames or removes
/// anything under an inbox, a partial folder, the catalog, the relay store or `--into`.
///
/// Everything beneath is reached from the descriptor, one checked name at a time, with `openat2(RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS)` or, where the kernel lacks it, a walk of `openat(O_NOFOLLOW | O_DIRECTORY)` per component.
/// No link is ever followed and no path string is resolved again later, so a folder swapped for a link between two
/// calls cannot lead outside: the call fails instead. Nothing remembers which folders "are known to be safe".
public final class Directory: @unchecked Sendable {  // one immutable descriptor; each method is system calls on it
    let fd: Int32
    /// Where the folder was when it was opened, for messages only (never resolved again).
    public let path: String

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { Glibc.close(fd) }

    /// Whether `openat2` is used (false on kernels without it, or with `SHARE_DISK_NO_OPENAT2` set, which the tests
    /// use to exercise the per-component walk).
    static let usesOpenat2: Bool = {
        if getenv("SHARE_DISK_NO_OPENAT2") != nil { return false }
        let probe = cshare_openat2_beneath(AT_FDCWD, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0)
        if probe >= 0 {
            Glibc.close(probe)
            return true
        }
        return errno != ENOSYS
    }()

    /// Opens the folder the user named. Links in `path` itself are followed, as for any path a user types; nothing
    /// beneath it ever is. With `create`, missing folders along `path` are made with `mode`.
    public static func open(_ path: String, create: Bool = false, mode: mode_t = 0o700) throws -> Directory {
        if create { try makePath(path, mode: mode) }
        let fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw DiskError.system("cannot open the folder \(path)") }
        return Directory(fd: fd, path: path)
    }

    private static func makePath(_ path: String, mode: mode_t) throws {
        var prefix = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            prefix += "/" + part
            if mkdir(prefix, mode) != 0 && errno != EEXIST {
                throw DiskError.system("cannot create the folder \(prefix)")
            }
        }
    }

    /// The components of a relative path beneath a folder, each checked (see `checkName`); `.` and empty ones are
    /// dropped. An absolute path or a `..` is an error.
    public static func components(_ relative: String) throws -> [String] {
        guard !relative.hasPrefix("/") else {
            throw DiskError(.invalidName, "'\(relative)' is absolute; only names beneath the folder are allowed")
        }
        var parts: [String] = []
        for part in relative.split(separator: "/", omittingEmptySubsequences: true) where part != "." {
            try checkName(String(part))
            parts.append(String(part))
        }
        return parts
    }

    /// One path component: not empty, not `.` or `..`, no `/` or NUL, at most 255 bytes.
    public static func checkName(_ name: String) throws {
        guard name.utf8.count <= 255 else {
            throw DiskError(.invalidName, "'\(name.prefix(80))…' is longer than a file name may be (255 bytes)")
        }
        guard !name.isEmpty, name != ".", name != "..", !name.utf8.contains(UInt8(ascii: "/")), !name.utf8.contains(0)
        else {
            throw DiskError(.invalidName, "'\(name.prefix(80))' is not a single file name")
        }
    }

    private func display(_ name: String) -> String { path + "/" + name }

    // MARK: Folders beneath

    /// The folder at `relative` beneath this one. With `create`, missing folders are made with `mode`; an existing
    /// link or file in the way is an error (`link`, `wrongKind`), never followed.
    public func directory(_ relative: String, create: Bool = false, mode: mode_t = 0o700) throws -> Directory {
        try directory(components: try Self.components(relative), create: create, mode: mode)
    }

    /// The folder at `parts` (each one checked name) beneath this one.
    public func directory(components parts: [String], create: Bool = false, mode: mode_t = 0o700) throws
        -> Directory
    {
        try directory(components: parts, create: create, mode: mode, openat2: Self.usesOpenat2)
    }

    /// `openat2`: whether to try it first (tests pass false to exercise the walk on any kernel).
    func directory(components parts: [String], create: Bool, mode: mode_t, openat2: Bool) throws -> Directory {
        for part in parts { try Self.checkName(part) }
        let joined = parts.joined(separator: "/")
        if parts.isEmpty {
            let copy = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard copy >= 0 else { throw DiskError.system("cannot open the folder \(path)") }
            return Directory(fd: copy, path: path)
        }
        if openat2 {
            let opened = cshare_openat2_beneath(fd, joined, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0)
            if opened >= 0 { return Directory(fd: opened, path: display(joined)) }
            guard errno == ENOENT, create else { throw DiskError.system("cannot open the folder \(display(joined))") }
        }
        // One component at a time: each opened from the descriptor of its parent, never following a link.
        var current: Int32 = fd
        var owned: Int32 = -1
        defer { if owned >= 0 { Glibc.close(owned) } }
        var walked = path
        for part in parts {
            walked += "/" + part
            var next = openat(current, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if next < 0 && errno == ENOENT && create {
                if mkdirat(current, part, mode) != 0 && errno != EEXIST {
                    throw DiskError.system("cannot create the folder \(walked)")
                }
                next = openat(current, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            }
            if next < 0 {
                let code = errno
                if code == ENOTDIR, info(part, in: current)?.kind == .link {
                    throw DiskError.system("cannot open the folder \(walked)", code: ELOOP)
                }
                throw DiskError.system("cannot open the folder \(walked)", code: code)
            }
            if owned >= 0 { Glibc.close(owned) }
            owned = next
            current = next
        }
        let result = Directory(fd: owned, path: walked)
        owned = -1
        return result
    }

    // MARK: Files

    /// How to open a file.
    public enum Access: Sendable {
        /// Read an existing file.
        case read
        /// Read an existing file and leave its access time as it was (O_NOATIME: a scan or a sync reading every file
        /// is no use of them, and each access time written is a journal write); as `read` where the file system or
        /// the file's owner does not allow it.
        case readLeavingAccessTime
        /// Read and write an existing file.
        case update
        /// Create a new file; fails with `exists` if the name is taken.
        case create
        /// Open the file, creating it when missing.
        case createOrUpdate
        /// Append to the file, creating it when missing: every write lands at the end, whole.
        case append
    }

    /// Opens the file `name` (one component) in this folder; a link there is an error, never followed.
    public func openFile(_ name: String, _ access: Access, mode: mode_t = 0o600) throws -> OpenFile {
        try Self.checkName(name)
        var flags = O_CLOEXEC | O_NOFOLLOW
        switch access {
        case .read, .readLeavingAccessTime: flags |= O_RDONLY
        case .update: flags |= O_RDWR
        case .create: flags |= O_RDWR | O_CREAT | O_EXCL
        case .createOrUpdate: flags |= O_RDWR | O_CREAT
        case .append: flags |= O_WRONLY | O_CREAT | O_APPEND
        }
        // Read for its content: a pipe put at the name meanwhile opens without waiting for a writer (and is then
        // seen for what it is); a file reads as it would.
        if access == .readLeavingAccessTime { flags |= O_NONBLOCK }
        var opened = openat(fd, name, access == .readLeavingAccessTime ? flags | CSHARE_O_NOATIME : flags, mode)
        if opened < 0, errno == EPERM, access == .readLeavingAccessTime { opened = openat(fd, name, flags, mode) }
        guard opened >= 0 else {
            let verb = access == .create || access == .createOrUpdate || access == .append ? "create" : "open"
            throw DiskError.system("cannot \(verb) \(display(name))")
        }
        let file = OpenFile(fd: opened, path: display(name))
        if access == .create || access == .createOrUpdate {
            // Whatever the process's umask: the mode asked for is the mode the file gets.
            _ = fchmod(opened, mode)
        }
        return file
    }

    /// What is at `name` (a link is described, not followed); nil when nothing is.
    public func info(_ name: String) -> FileInfo? { info(name, in: fd) }

    private func info(_ name: String, in directory: Int32) -> FileInfo? {
        var st = stat()
        guard fstatat(directory, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return FileInfo(st)
    }

    /// This folder's own description.
    public var ownInfo: FileInfo? {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        return FileInfo(st)
    }

    /// The names in this folder, `.` and `..` left out; empty when it cannot be read.
    public func entries() -> [String] { listing().map(\.name) }

    /// The names in this folder, or nil when it cannot be read (no right to, no descriptor left): not the same as
    /// an empty folder, for whoever would take what it holds for gone.
    public func readableEntries() -> [String]? { readListing()?.map(\.name) }

    /// The names of the folders in this folder, by the kind each entry's listing gives (looked at one by one only
    /// where the file system does not say).
    public func folderEntries() -> [String] {
        listing().compactMap { name, type in
            (type == UInt8(DT_DIR) || (type == UInt8(DT_UNKNOWN) && info(name)?.kind == .directory)) ? name : nil
        }
    }

    /// The names in this folder with the type each one's listing gives (`d_type`), `.` and `..` left out; none when
    /// it cannot be read.
    private func listing() -> [(name: String, type: UInt8)] { readListing() ?? [] }

    private func readListing() -> [(name: String, type: UInt8)]? {
        let copy = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard copy >= 0, let stream = fdopendir(copy) else {
            if copy >= 0 { Glibc.close(copy) }
            return nil
        }
        defer { closedir(stream) }
        var names: [(String, UInt8)] = []
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { return nil }
                break
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append((name, entry.pointee.d_type)) }
        }
        return names
    }

    /// Reads a whole small file; nil when it is missing. Larger than `limit` bytes is an error.
    public func readFile(_ name: String, limit: Int = 16 << 20) throws -> [UInt8]? {
        let file: OpenFile
        do {
            file = try openFile(name, .read)
        } catch let error as DiskError where error.kind == .notFound {
            return nil
        }
        return try file.readAll(limit: limit)
    }

    /// Replaces `name` with `bytes` so that a reader sees the old contents or the new, never a mix: a temporary
    /// file in this folder, then a rename. `durable` also flushes the file and the folder to disk.
    public func writeAtomically(_ name: String, _ bytes: [UInt8], mode: mode_t = 0o600, durable: Bool = true) throws {
        try writeAtomically(name, bytes, mode: mode, modifiedNanoseconds: nil, staging: nil, durable: durable)
    }

    /// As above, the file given its modification time (`modifiedNanoseconds`) before it takes the name, and made in
    /// `staging` (a folder on the same file system that nobody watches) when one is given, so that the folder
    /// sees one change at `name` and none at a temporary name. A staging folder on another file system (a mount
    /// inside the tree) falls back to a temporary file here.
    public func writeAtomically(
        _ name: String, _ bytes: [UInt8], mode: mode_t, modifiedNanoseconds: Int64?, staging: Directory?,
        durable: Bool = false
    ) throws {
        try Self.checkName(name)
        let made = staging ?? self
        let temporary = ".\(FileNames.prefix(name, bytes: 200)).tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        // Without the staging folder (gone, full of names, or on another file system), beside its name.
        func besideIt() throws {
            try writeAtomically(
                name, bytes, mode: mode, modifiedNanoseconds: modifiedNanoseconds, staging: nil, durable: durable)
        }
        let file: OpenFile
        do {
            file = try made.openFile(temporary, .create, mode: mode)
        } catch  where staging != nil {
            return try besideIt()
        }
        do {
            try file.write(bytes[...], at: 0)
            if let modifiedNanoseconds { try file.setModified(nanoseconds: modifiedNanoseconds) }
            if durable { try file.sync() }
            file.close()
            try made.rename(temporary, to: name, in: self, replace: true)
        } catch {
            file.close()
            unlinkat(made.fd, temporary, 0)
            if staging != nil, (error as? DiskError)?.code == EXDEV { return try besideIt() }
            throw error
        }
        if durable { sync() }
    }

    /// Makes the file `name`, which must not exist yet, holding `bytes` with `mode` and (when given) its
    /// modification time: written without a name (O_TMPFILE) and then linked at `name`, so that it appears whole
    /// or not at all, with one change at its name and no temporary file left by a crash. Answers the new file's
    /// description (as a look at `name` right after would see it); a `.exists` error when something took the name
    /// meanwhile (nothing is replaced); nil, with nothing made, where the file system makes no unnamed files or they
    /// cannot be linked (the caller writes the file another way).
    public func writeNew(_ name: String, _ bytes: [UInt8], mode: mode_t, modifiedNanoseconds: Int64?) throws
        -> FileInfo?
    {
        try Self.checkName(name)
        let opened = cshare_open_unnamed(fd, UInt32(mode))
        guard opened >= 0 else {
            if errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL { return nil }
            throw DiskError.system("cannot create \(display(name))")
        }
        let file = OpenFile(fd: opened, path: display(name))
        defer { file.close() }
        try file.write(bytes[...], at: 0)
        if let modifiedNanoseconds { try file.setModified(nanoseconds: modifiedNanoseconds) }
        // Linking changes none of what the description holds (kind, size, time, mode, inode).
        guard var made = file.info else { throw DiskError.system("cannot create \(display(name))") }
        // Whatever the process's umask: the mode asked for is the mode the file gets (set only when the umask took
        // some of it).
        if made.mode != mode & 0o7777 {
            file.setMode(mode)
            guard let changed = file.info else { throw DiskError.system("cannot create \(display(name))") }
            made = changed
        }
        guard cshare_link_unnamed(opened, fd, name) == 0 else {
            // No /proc to link through (or no right to): written the other way.
            if errno == ENOENT || errno == EPERM || errno == EACCES { return nil }
            throw DiskError.system("cannot create \(display(name))")
        }
        return made
    }

    // MARK: Names

    /// Removes the file or link `name`; true if something was removed.
    @discardableResult
    public func remove(_ name: String) throws -> Bool {
        try Self.checkName(name)
        if unlinkat(fd, name, 0) == 0 { return true }
        if errno == ENOENT { return false }
        if errno == EISDIR { return try removeTree(name) }
        throw DiskError.system("cannot remove \(display(name))")
    }

    /// Removes `name` and, if it is a folder, everything inside it (links are removed, never followed; folders the
    /// sender made unwritable are opened up first). True if something was removed.
    @discardableResult
    public func removeTree(_ name: String) throws -> Bool {
        try Self.checkName(name)
        guard let found = info(name) else { return false }
        guard found.kind == .directory else { return try remove(name) }
        // Depth-first without recursion: a hostile tree may be thousands of folders deep.
        var stack: [(parent: Directory, name: String, folder: Directory?)] = [(self, name, nil)]
        while let top = stack.last {
            if top.folder == nil {
                let folder = try top.parent.openingUp(top.name)
                stack[stack.count - 1].folder = folder
                for entry in folder.entries() {
                    if folder.info(entry)?.kind == .directory {
                        stack.append((folder, entry, nil))
                    } else if unlinkat(folder.fd, entry, 0) != 0 && errno != ENOENT {
                        throw DiskError.system("cannot remove \(folder.display(entry))")
                    }
                }
                continue
            }
            stack.removeLast()
            if unlinkat(top.parent.fd, top.name, AT_REMOVEDIR) != 0 && errno != ENOENT {
                throw DiskError.system("cannot remove \(top.parent.display(top.name))")
            }
        }
        return true
    }

    /// The folder `name`, made accessible to its owner first when its mode shuts the owner out (a received tree may
    /// carry such modes). The mode is changed through a descriptor of that very folder, never through a name.
    private func openingUp(_ name: String) throws -> Directory {
        do {
            return try directory(components: [name])
        } catch let error as DiskError where error.kind == .denied {
            let handle = openat(fd, name, CSHARE_O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard handle >= 0 else { throw error }
            defer { Glibc.close(handle) }
            guard chmod("/proc/self/fd/\(handle)", 0o700) == 0 else { throw error }
            return try directory(components: [name])
        }
    }

    /// Renames `name` here to `newName` in `target` (which may be this folder). Without `replace`, an existing
    /// `newName` is an `exists` error and is left alone.
    public func rename(_ name: String, to newName: String, in target: Directory, replace: Bool = false) throws {
        try Self.checkName(name)
        try Self.checkName(newName)
        guard cshare_renameat2(fd, name, target.fd, newName, replace ? 0 : 1) == 0 else {
            throw DiskError.system("cannot move \(display(name)) to \(target.display(newName))")
        }
    }

    /// Makes `newName` in `target` another name of the file `name` here (a hard link; `name` itself is never
    /// followed if it is a link).
    public func link(_ name: String, to newName: String, in target: Directory) throws {
        try Self.checkName(name)
        try Self.checkName(newName)
        guard linkat(fd, name, target.fd, newName, 0) == 0 else {
            throw DiskError.system("cannot link \(target.display(newName)) to \(display(name))")
        }
    }

    /// Creates the symbolic link `name` pointing to `target` (the caller decides whether the target is acceptable).
    public func symlink(_ name: String, target: String) throws {
        try Self.checkName(name)
        guard symlinkat(target, fd, name) == 0 else {
            throw DiskError.system("cannot create the link \(display(name))")
        }
    }

    /// The target of the link `name`.
    public func readLink(_ name: String) throws -> String {
        try Self.checkName(name)
        var buffer = [CChar](repeating: 0, count: 4097)
        let n = readlinkat(fd, name, &buffer, buffer.count - 1)
        guard n >= 0 else { throw DiskError.system("cannot read the link \(display(name))") }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Makes the folder `name` here with `mode` (exactly: the process's umask does not apply); an error when
    /// anything has that name.
    public func makeFolder(_ name: String, mode: mode_t) throws {
        try Self.checkName(name)
        guard mkdirat(fd, name, 0o700) == 0 else { throw DiskError.system("cannot make the folder \(display(name))") }
        try setAttributes(name, mode: mode, modifiedNanoseconds: nil)
    }

    /// Removes the folder `name` only if it is empty; false when nothing was there.
    @discardableResult
    public func removeEmptyFolder(_ name: String) throws -> Bool {
        try Self.checkName(name)
        if unlinkat(fd, name, AT_REMOVEDIR) == 0 { return true }
        if errno == ENOENT { return false }
        throw DiskError.system("cannot remove the folder \(display(name))")
    }

    /// Sets the permission bits and the modification time (nanoseconds since 1970) of the file or folder `name`,
    /// never through a link: the name is opened without following one, checked to be a file or folder, and changed
    /// through that very descriptor.
    public func setAttributes(_ name: String, mode: mode_t?, modifiedNanoseconds: Int64?) throws {
        try Self.checkName(name)
        let handle = openat(fd, name, CSHARE_O_PATH | O_NOFOLLOW | O_CLOEXEC)
        guard handle >= 0 else { throw DiskError.system("cannot open \(display(name))") }
        defer { Glibc.close(handle) }
        var info = stat()
        guard fstat(handle, &info) == 0, info.st_mode & S_IFMT == S_IFREG || info.st_mode & S_IFMT == S_IFDIR else {
            throw DiskError(.wrongKind, "\(display(name)) is not a file or folder")
        }
        let through = "/proc/self/fd/\(handle)"
        if let mode, chmod(through, mode) != 0 { throw DiskError.system("cannot change the mode of \(display(name))") }
        if let modifiedNanoseconds {
            let time = OpenFile.time(nanoseconds: modifiedNanoseconds)
            // The access time is left as it is (UTIME_OMIT, a macro Swift cannot see: (1 << 30) - 2).
            var times = [timespec(tv_sec: 0, tv_nsec: (1 << 30) - 2), time]
            guard utimensat(AT_FDCWD, through, &times, 0) == 0 else {
                throw DiskError.system("cannot set the time of \(display(name))")
            }
        }
    }

    /// `name`, or `name (2).ext`, `name (3).ext`, … whichever is free in this folder now.
    public func freeName(for name: String) -> String {
        if info(name) == nil { return name }
        let dot = name.lastIndex(of: ".").flatMap { $0 == name.startIndex ? nil : $0 }
        let stem = dot.map { String(name[..<$0]) } ?? name
        let ext = dot.map { String(name[$0...]) } ?? ""
        for n in 2..<100_000 {
            let candidate = "\(stem) (\(n))\(ext)"
            if info(candidate) == nil { return candidate }
        }
        return "\(stem) (\(UInt32.random(in: 100_000...UInt32.max)))\(ext)"
    }

    // MARK: The folder itself

    /// Sets this folder's permission bits.
    public func setMode(_ mode: mode_t) { _ = fchmod(fd, mode) }

    /// Sets this folder's modification time (whole seconds).
    public func setModified(_ seconds: Int64) {
        var times = [timespec(tv_sec: time_t(seconds), tv_nsec: 0), timespec(tv_sec: time_t(seconds), tv_nsec: 0)]
        _ = futimens(fd, &times)
    }

    /// Flushes the folder's entries to disk.
    public func sync() { _ = fsync(fd) }

    /// Bytes available to an unprivileged user on this folder's file system.
    public var freeSpace: UInt64? {
        var info = statvfs()
        guard fstatvfs(fd, &info) == 0 else { return nil }
        return UInt64(info.f_bavail) * UInt64(info.f_frsize)
    }

    /// Takes the exclusive lock of the lock file `name` (created if missing), without waiting: nil when another
    /// session holds it, in this process or another. The lock lasts until the returned value is released.
    public func tryLock(_ name: String) throws -> FileLock? {
        try lock(name, wait: false)
    }

    /// Takes the exclusive lock of the lock file `name`, waiting for it.
    public func lock(_ name: String) throws -> FileLock {
        try lock(name, wait: true)!
    }

    private func lock(_ name: String, wait: Bool) throws -> FileLock? {
        for _ in 0..<100 {
            let file = try openFile(name, .createOrUpdate, mode: 0o600)
            while cshare_lock_exclusive(file.fd, wait ? 1 : 0) != 0 {
                if errno == EINTR { continue }
                if errno == EWOULDBLOCK { return nil }
                throw DiskError.system("cannot lock \(display(name))")
            }
            // The holder before us may have removed the lock file as it let go: a lock on a file that no longer
            // has this name locks nothing, so take the one that does.
            if let locked = file.info, let named = info(name), locked.inode == named.inode,
                locked.device == named.device
            {
                return FileLock(file: file)
            }
        }
        throw DiskError(.busy, "cannot lock \(display(name)): it keeps being replaced")
    }
}

/// An exclusive lock on a lock file, held until `release()` or until the value goes away (or the process ends).
public final class FileLock: @unchecked Sendable {  // released once, by its owner
    private var file: OpenFile?

    init(file: OpenFile) { self.file = file }

    public func release() {
        file?.close()
        file = nil
    }

    deinit { release() }
}

/// What is at a name: its kind, size, permission bits and modification time. Links are described, not followed.
public struct FileInfo: Sendable, Equatable {
    public enum Kind: Sendable, Equatable { case file, directory, link, other }
    public let kind: Kind
    public let size: UInt64
    public let mode: mode_t
    public let modified: Int64
    public let modifiedNanoseconds: Int
    public let inode: UInt64
    public let device: UInt64

    /// The modification time in nanoseconds since 1970, held to what 64 bits hold (late 1677 to early 2262): a
    /// file dated after (ext4 keeps times to 2446) reads as the last time they hold, one before as the first.
    public var modifiedTime: Int64 {
        let (scaled, over) = modified.multipliedReportingOverflow(by: 1_000_000_000)
        let (time, overAgain) = scaled.addingReportingOverflow(Int64(modifiedNanoseconds))
        return over || overAgain ? (modified < 0 ? .min : .max) : time
    }

    init(_ st: stat) {
        switch st.st_mode & S_IFMT {
        case S_IFREG: kind = .file
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .link
        default: kind = .other
        }
        size = UInt64(st.st_size)
        mode = st.st_mode & 0o7777
        modified = Int64(st.st_mtim.tv_sec)
        modifiedNanoseconds = Int(st.st_mtim.tv_nsec)
        inode = UInt64(st.st_ino)
        device = UInt64(st.st_dev)
    }
}
