import FoundationEssentials
import ShareText
import Glibc
import ShareDisk
import ShareNet
import ShareProtocol
import ShareSync
import Synchronization

/// A shared folder on disk, as `SyncFolder` touches it: every call goes through ShareDisk's directory handles from
/// the folder's root, one checked name at a time, never following a link (a link is synced as a link: its target is
/// only ever read as text). What the folder keeps for itself at its root (`SyncNames`) is never listed.
final class DiskFolder: FolderDisk {
    /// The folder (replaced when it is found again elsewhere at its path); used under the folder's lock.
    var root: Directory {
        didSet { forgetFolders() }
    }
    /// While a plan reads the disk (or pulled files are put in place): the folders opened so far, by path (nil
    /// otherwise). Used under the folder's lock only, like everything here.
    private var opened: OpenFolders?
    /// In that time, the folders found missing (a plan of a folder not yet made here looks at each of its paths).
    private var missing: Set<String> = []

    /// Names found in the folder that cannot be synced, by path (the part that is not UTF-8 shown as U+FFFD), and
    /// files that cannot be read, and why: the folder's status lists them, so a file the others never get is never
    /// passed over in silence.
    var leftOut: [String: String] { names.merging(unreadable) { name, _ in name } }
    /// The names (kept apart from the files: Swift's strings compare NFD and NFC forms equal, and the NFC file
    /// read well must not take its NFD twin off the list).
    private var names: [String: String] = [:]
    private var unreadable: [String: String] = [:]
    /// The folders the last listing could not read.
    private(set) var unlisted: Set<String> = []

    /// How many days versions are kept (0: none).
    var versionDays = FolderVersions.defaultDays
    var versions: FolderVersions { FolderVersions(root: root, days: versionDays) }

    init(root: Directory) { self.root = root }

    func keepVersion(_ path: String) throws {
        guard versionDays > 0 else { return }
        try wrap(path) {
            let (folder, leaf) = try parent(of: path)
            try versions.keep(folder, leaf, path: path)
        }
    }

    var isPresent: Bool { root.info(SyncNames.marker)?.kind == .directory }

    func keepingFoldersOpen<T>(_ body: () throws -> T) rethrows -> T {
        guard opened == nil else { return try body() }
        opened = OpenFolders()
        defer {
            opened = nil
            missing = []
        }
        return try body()
    }

    /// The tree's folders changed through this disk: what was kept open may no longer be where it was.
    private func forgetFolders() {
        if opened != nil { opened = OpenFolders() }
        missing = []
    }

    /// The folder holding `path`'s last component, and that component.
    private func parent(of path: String, create: Bool = false) throws -> (Directory, String) {
        let parts = path.split(separator: "/").map(String.init)
        guard let leaf = parts.last else { throw FolderDiskError(path, "an empty path") }
        if !create, opened != nil { return (try folder(parts.dropLast()), leaf) }
        return (try root.directory(components: Array(parts.dropLast()), create: create, mode: 0o755), leaf)
    }

    /// The folder at `parts`, kept open (a few at a time) while folders are kept.
    private func folder(_ parts: ArraySlice<String>) throws -> Directory {
        let open = { try self.root.directory(components: Array(parts)) }
        guard opened != nil else { return try open() }
        return try opened!.folder(parts.joined(separator: "/"), open: open)
    }

    static func stamp(_ info: FileInfo) -> DiskStamp? {
        switch info.kind {
        case .file:
            return DiskStamp(
                kind: .file, size: info.size,
                modified: info.modifiedTime, mode: UInt32(info.mode), inode: info.inode)
        case .directory:
            return DiskStamp(kind: .directory, size: 0, modified: 0, mode: UInt32(info.mode), inode: info.inode)
        case .link:
            return DiskStamp(kind: .symlink, size: 0, modified: 0, mode: 0o777, inode: info.inode)
        case .other:
            return nil
        }
    }

    func stamp(_ path: String) -> DiskStamp? {
        let found = lookUp(path)
        // A path gone is not left out any more (a file that could not be read, removed).
        if found == nil, !unreadable.isEmpty { unreadable[path] = nil }
        return found
    }

    private func lookUp(_ path: String) -> DiskStamp? {
        if opened != nil {
            // The folder is found by the path up to its last slash (kept open by that key), split only when new.
            let slash = path.utf8.lastIndex(of: UInt8(ascii: "/"))
            let key = slash.map { String(path[..<$0]) } ?? ""
            let leaf = slash.map { String(path[path.utf8.index(after: $0)...]) } ?? path
            guard !leaf.isEmpty, !missing.contains(key) else { return nil }
            let open = { try self.root.directory(components: key.split(separator: "/").map(String.init)) }
            let folder: Directory?
            do {
                folder = try opened?.folder(key, open: open)
            } catch {
                // There and not to be opened (no right to, no descriptor left): what it holds is not gone.
                if Self.cannotOpen(error) { unlisted.insert(key) }
                folder = nil
            }
            guard let folder else {
                if missing.count < 4096 { missing.insert(key) }
                return nil
            }
            return folder.info(leaf).flatMap(Self.stamp)
        }
        let folder: Directory
        let leaf: String
        do {
            (folder, leaf) = try parent(of: path)
        } catch {
            if Self.cannotOpen(error) {
                let slash = path.lastIndex(of: "/")
                unlisted.insert(slash.map { String(path[..<$0]) } ?? "")
            }
            return nil
        }
        return folder.info(leaf).flatMap(Self.stamp)
    }

    static let unreadableFolder = "this folder cannot be read here, so what it holds is left as it was"

    /// Whether a folder's opening failed for want of a right or a descriptor (it is there, and what it holds is not
    /// gone), not because nothing (or a file, or a link) is at its path.
    static func cannotOpen(_ error: any Error) -> Bool {
        guard let error = error as? DiskError else { return false }
        return error.kind == .denied || error.kind == .io
    }

    func content(_ path: String, _ stamp: DiskStamp) -> ShareSync.Scanner.Content? {
        guard let (folder, leaf) = try? parent(of: path) else { return nil }
        switch stamp.kind {
        case .symlink:
            return (try? folder.readLink(leaf)).map { Scanner.Content(target: $0) }
        case .directory:
            return Scanner.Content()
        case .file:
            do {
                let digest = try Self.digest(folder, leaf, size: stamp.size)
                if !unreadable.isEmpty { unreadable[path] = nil }
                return digest.map { Scanner.Content(digest: $0) }
            } catch let error as DiskError where [.notFound, .wrongKind, .link].contains(error.kind) {
                // Gone or replaced since it was listed: the next look sees what is there.
                return nil
            } catch {
                let reason = (error as? DiskError)?.message ?? "\(error)"
                unreadable[path] = "it cannot be read here (\(reason)), so the other devices cannot be given it"
                return nil
            }
        }
    }

    /// The content digests of `files` under `root`, each as the stamp it was listed with (one that is no longer at
    /// that stamp once read, or is not a file, is left out: the scan reads it itself). Uses no state of a folder's
    /// disk: it runs without the folder's lock.
    static func readAhead(_ files: some Sequence<(path: String, stamp: DiskStamp)>, in root: Directory)
        -> [String: (DiskStamp, Scanner.Content)]
    {
        var found: [String: (DiskStamp, Scanner.Content)] = [:]
        var folders = OpenFolders()
        for (path, stamp) in files where stamp.kind == .file {
            let slash = path.lastIndex(of: "/")
            let parent = slash.map { path[..<$0] } ?? ""
            let leaf = String(slash.map { path[path.index(after: $0)...] } ?? path[...])
            // What the open file is once read is what the name was when listed (the same inode, size, time and
            // mode), or the content read stands for nothing. The scan looks at the name again before it uses it.
            guard
                let directory = try? folders.folder(
                    String(parent),
                    open: { try root.directory(components: parent.split(separator: "/").map(String.init)) }),
                let file = try? directory.openFile(leaf, .readLeavingAccessTime)
            else { continue }
            defer { file.close() }
            guard let digest = try? digest(file, size: stamp.size),
                let after = file.info.flatMap(Self.stamp), after.same(as: stamp)
            else { continue }
            found[path] = (stamp, Scanner.Content(digest: digest))
        }
        return found
    }

    /// A file's content digest (`ContentDigest`): BLAKE3 of each 1 MiB chunk, then BLAKE3 of those digests. Nil
    /// when the file changed size while it was read.
    static func digest(_ folder: Directory, _ name: String, size: UInt64) throws -> [UInt8]? {
        let file = try folder.openFile(name, .readLeavingAccessTime)
        defer { file.close() }
        guard let digest = try digest(file, size: size), file.info?.size == size else { return nil }
        return digest
    }

    /// The content digest of the open `file`, read as `size` bytes long; nil when it ended sooner (the caller
    /// checks what it is once read).
    static func digest(_ file: OpenFile, size: UInt64) throws -> [UInt8]? {
        file.adviseSequential()
        let chunk = ContentDigest.chunkSize
        // As much as one chunk of this file needs (most files are far smaller than a chunk).
        let buffer = UnsafeMutableRawBufferPointer.allocate(
            byteCount: Int(min(UInt64(chunk), max(size, 1))), alignment: 16)
        defer { buffer.deallocate() }
        let hasher = chunkHasher(.blake3)
        var digests: [UInt8] = []
        var offset: UInt64 = 0
        repeat {
            var filled = 0
            while filled < chunk, offset + UInt64(filled) < size {
                let n = try file.read(
                    into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]), at: offset + UInt64(filled))
                guard n > 0 else { return nil }
                filled += n
            }
            digests += hasher.digest(UnsafeRawBufferPointer(rebasing: buffer[0..<filled]))
            offset += UInt64(filled)
        } while offset < size
        return hasher.digest(digests)
    }

    func list(under folder: String?, recursive: Bool) -> [String: DiskStamp] {
        var result: [String: DiskStamp] = [:]
        let start: Directory
        if let folder {
            do {
                start = try root.directory(components: folder.split(separator: "/").map(String.init))
            } catch {
                // Not there: nothing beneath it is. There and not to be opened: what it holds is left as it was.
                unlisted = Self.cannotOpen(error) ? [folder] : []
                noteLeftOut(
                    Self.cannotOpen(error) ? [folder: Self.unreadableFolder] : [:], under: folder, recursive: true)
                return result
            }
        } else {
            start = root
        }
        // Through folder handles, depth first without recursion: a link is never followed, whatever replaces a
        // folder while it is read. A folder found is opened when its turn comes (by the folder it is in and its
        // name), so what is open at once is about one path's folders, not every folder found and not yet read: a
        // service may open only 1,024 files, and a folder may hold thousands of folders.
        var pending: [(parent: Directory, name: String?, path: String)] = [(start, nil, folder ?? "")]
        var found: [String: String] = [:]
        unlisted = []
        defer { noteLeftOut(found, under: folder ?? "", recursive: recursive) }
        while let (parent, inner, relative) = pending.popLast() {
            // A folder that cannot be read (no right to, no descriptor left) is said, and what it holds is left as
            // it was: not taken for gone.
            let directory = inner == nil ? parent : inner.flatMap { try? parent.directory(components: [$0]) }
            guard let directory, let names = directory.readableEntries()
            else {
                unlisted.insert(relative)
                found[relative] = Self.unreadableFolder
                continue
            }
            for var name in names {
                // Names that are not UTF-8 cannot be named on the wire: left alone, and listed.
                guard !name.unicodeScalars.contains("\u{FFFD}") else {
                    found[relative.isEmpty ? name : relative + "/" + name] =
                        "its name is not UTF-8, which the other devices cannot be given: rename it to sync it"
                    continue
                }
                // One name for what differs only in Unicode normalisation: the index and the wire hold NFC (what
                // Linux and Windows write; macOS writes NFD). A name in another form is renamed to its NFC form
                // here, as Syncthing does; when that name is taken too, this one is left out (and said once).
                let nfc = name.precomposed
                if !nfc.utf8.elementsEqual(name.utf8) {
                    let taken = names.contains { $0.utf8.elementsEqual(nfc.utf8) }
                    guard !taken, (try? directory.rename(name, to: nfc, in: directory)) != nil else {
                        Self.noteUnnormalised(relative.isEmpty ? name : relative + "/" + name)
                        found[relative.isEmpty ? name : relative + "/" + name] =
                            "another name here differs from it only in Unicode normalisation: rename one to sync it"
                        continue
                    }
                    forgetFolders()
                    name = nfc
                }
                let path = relative.isEmpty ? name : relative + "/" + name
                if relative.isEmpty, SyncNames.isInternal(name) { continue }
                guard let info = directory.info(name), let stamp = Self.stamp(info) else { continue }
                result[path] = stamp
                if recursive, info.kind == .directory { pending.append((directory, name, path)) }
            }
        }
        return result
    }

    /// What a listing found left out replaces what an earlier one found in the same part of the folder.
    private func noteLeftOut(_ found: [String: String], under folder: String, recursive: Bool) {
        guard !found.isEmpty || !names.isEmpty || !unreadable.isEmpty else { return }
        func outside(_ path: String) -> Bool {
            if recursive { return !(folder.isEmpty || path.hasPrefix(folder + "/")) }
            return path.split(separator: "/").dropLast().joined(separator: "/") != folder
        }
        names = names.filter { outside($0.key) }
        names.merge(found) { $1 }
        // A file listed again is read again (and said again if it still cannot be).
        unreadable = unreadable.filter { outside($0.key) }
    }

    /// Names left out because their NFC form is taken: said once each (the log), while the agent runs.
    private static let unnormalised = Mutex<Set<[UInt8]>>([])

    private static func noteUnnormalised(_ path: String) {
        guard unnormalised.withLock({ $0.insert(Array(path.utf8)).inserted }) else { return }
        FolderService.log.warning(
            "a name is left out of its folder: another name differs from it only in Unicode normalisation",
            metadata: ["path": "\(path)"])
    }

    func makeDirectory(_ path: String, mode: UInt32) throws {
        forgetFolders()
        try wrap(path) {
            let (folder, leaf) = try parent(of: path)
            try folder.makeFolder(leaf, mode: mode_t(mode & 0o777))
        }
    }

    func makeSymlink(_ path: String, target: String) throws {
        forgetFolders()
        try wrap(path) {
            let (folder, leaf) = try parent(of: path)
            try folder.symlink(leaf, target: target)
        }
    }

    func remove(_ path: String) throws {
        forgetFolders()
        try wrap(path) {
            let (folder, leaf) = try parent(of: path)
            if folder.info(leaf)?.kind == .directory {
                try folder.removeEmptyFolder(leaf)
            } else {
                try folder.remove(leaf)
            }
        }
    }

    func move(_ from: String, to: String) throws {
        forgetFolders()
        try wrap(from) {
            let (source, leaf) = try parent(of: from)
            let (target, newLeaf) = try parent(of: to)
            try source.rename(leaf, to: newLeaf, in: target)
        }
    }

    func copyFile(_ from: String, to: String, mode: UInt32, modified: Int64) throws {
        try wrap(from) {
            let (source, leaf) = try parent(of: from)
            let (target, newLeaf) = try parent(of: to)
            let temporary = ".\(FileNames.prefix(newLeaf, bytes: 200)).share-copy-\(UInt32.random(in: 0...UInt32.max))"
            try source.copyFile(
                leaf, to: temporary, in: target, mode: mode_t(mode & 0o777), modifiedNanoseconds: modified)
            do {
                try target.rename(temporary, to: newLeaf, in: target)
            } catch {
                _ = try? target.remove(temporary)
                throw error
            }
        }
    }

    func setMetadata(_ path: String, kind: FileEntry.Kind, mode: UInt32, modified: Int64) throws {
        guard kind != .symlink else { return }
        try wrap(path) {
            let (folder, leaf) = try parent(of: path)
            try folder.setAttributes(
                leaf, mode: mode_t(mode & 0o777), modifiedNanoseconds: kind == .file ? modified : nil)
        }
    }

    /// Runs a disk step; a failure is the folder's error for that path.
    private func wrap(_ path: String, _ body: () throws -> Void) throws {
        do {
            try body()
        } catch let error as DiskError {
            throw FolderDiskError(path, error.message)
        }
    }
}
