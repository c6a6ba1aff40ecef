import ShareSync

/// A folder in memory, as `SyncFolder` sees a disk: files, folders and links, each with its permission bits, time
/// and inode. A file's content is bytes; its digest a deterministic stand-in for the real one.
final class SimDisk: FolderDisk {
    struct Node: Equatable {
        var kind: FileEntry.Kind
        var content: [UInt8] = []
        var target = ""
        var mode: UInt32
        var modified: Int64
        var inode: UInt64
    }

    private(set) var nodes: [String: Node] = [:]
    private var nextInode: UInt64 = 1
    /// The folder's marker and the folder itself are there (an unmounted disk has neither).
    var mounted = true
    var isPresent: Bool { mounted }
    /// Changes asked at a path that goes through a link (what the agent's disk could never do): any is a failure.
    var throughLinks: [String] = []
    /// The time a write stamps, nanoseconds (the device's clock).
    var now: () -> Int64

    init(now: @escaping () -> Int64) { self.now = now }

    static func digest(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325 ^ UInt64(bytes.count)
        for round in 0..<4 {
            hash ^= UInt64(round) &* 0x9e37_79b9_7f4a_7c15
            for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
            for shift in stride(from: 0, to: 64, by: 8) { out.append(UInt8(truncatingIfNeeded: hash >> UInt64(shift))) }
        }
        return out
    }

    private func parentExists(_ path: String) -> Bool {
        guard let slash = path.lastIndex(of: "/") else { return true }
        return nodes[String(path[..<slash])]?.kind == .directory
    }

    /// Whether a change at `path` would go through a link (a folder of its path is a link): recorded as a failure.
    private func throughLink(_ path: String) -> Bool {
        var ancestor = ""
        for part in path.split(separator: "/").dropLast() {
            ancestor += ancestor.isEmpty ? String(part) : "/" + part
            if nodes[ancestor]?.kind == .symlink {
                throughLinks.append(path)
                return true
            }
        }
        return false
    }

    private func inode() -> UInt64 {
        defer { nextInode += 1 }
        return nextInode
    }

    // MARK: FolderDisk

    func stamp(_ path: String) -> DiskStamp? {
        guard mounted, let node = nodes[path] else { return nil }
        // Beneath a folder that cannot be opened nothing can be looked at (as the system answers).
        if let hidden = unreadable.first(where: { path.hasPrefix($0 + "/") }) {
            unlisted.insert(hidden)
            return nil
        }
        return DiskStamp(
            kind: node.kind, size: UInt64(node.content.count), modified: node.kind == .file ? node.modified : 0,
            mode: node.mode, inode: node.inode)
    }

    func content(_ path: String, _ stamp: DiskStamp) -> Scanner.Content? {
        guard mounted, let node = nodes[path], node.kind == stamp.kind else { return nil }
        return Scanner.Content(digest: node.kind == .file ? Self.digest(node.content) : [], target: node.target)
    }

    /// Folders a listing cannot read (no right to, no descriptor left): their own entries are listed, what they
    /// hold is not (nor can it be looked at one path at a time), and they are named in `unlisted`.
    var unreadable: Set<String> = []
    private(set) var unlisted: Set<String> = []

    func list(under folder: String?, recursive: Bool) -> [String: DiskStamp] {
        guard mounted else { return [:] }
        var result: [String: DiskStamp] = [:]
        unlisted = []
        if let folder, let hidden = unreadable.first(where: { folder == $0 || folder.hasPrefix($0 + "/") }) {
            unlisted.insert(hidden)
            return [:]
        }
        let prefix = folder.map { $0 + "/" } ?? ""
        for path in nodes.keys where path.hasPrefix(prefix) {
            if !recursive, path.dropFirst(prefix.count).contains("/") { continue }
            if let hidden = unreadable.first(where: { path.hasPrefix($0 + "/") }) {
                unlisted.insert(hidden)
                continue
            }
            result[path] = stamp(path)
        }
        return result
    }

    func makeDirectory(_ path: String, mode: UInt32) throws {
        guard !throughLink(path) else { throw FolderDiskError(path, "through a link") }
        guard mounted, nodes[path] == nil, parentExists(path) else { throw FolderDiskError(path, "cannot make") }
        nodes[path] = Node(kind: .directory, mode: mode, modified: 0, inode: inode())
    }

    func makeSymlink(_ path: String, target: String) throws {
        guard !throughLink(path) else { throw FolderDiskError(path, "through a link") }
        guard mounted, nodes[path] == nil, parentExists(path) else { throw FolderDiskError(path, "cannot link") }
        nodes[path] = Node(kind: .symlink, target: target, mode: 0o777, modified: 0, inode: inode())
    }

    func remove(_ path: String) throws {
        guard !throughLink(path) else { throw FolderDiskError(path, "through a link") }
        guard mounted, let node = nodes[path] else { throw FolderDiskError(path, "nothing to remove") }
        if node.kind == .directory, nodes.keys.contains(where: { $0.hasPrefix(path + "/") }) {
            throw FolderDiskError(path, "not empty")
        }
        nodes[path] = nil
    }

    func move(_ from: String, to: String) throws {
        guard !throughLink(from), !throughLink(to) else { throw FolderDiskError(from, "through a link") }
        guard mounted, let node = nodes[from], nodes[to] == nil, parentExists(to) else {
            throw FolderDiskError(from, "cannot move to \(to)")
        }
        nodes[from] = nil
        nodes[to] = node
        if node.kind == .directory {
            for (path, child) in nodes where path.hasPrefix(from + "/") {
                nodes[path] = nil
                nodes[to + path.dropFirst(from.count)] = child
            }
        }
    }

    func copyFile(_ from: String, to: String, mode: UInt32, modified: Int64) throws {
        guard !throughLink(from), !throughLink(to) else { throw FolderDiskError(from, "through a link") }
        guard mounted, let node = nodes[from], node.kind == .file, nodes[to] == nil, parentExists(to) else {
            throw FolderDiskError(from, "cannot copy to \(to)")
        }
        nodes[to] = Node(kind: .file, content: node.content, mode: mode, modified: modified, inode: inode())
    }

    func setMetadata(_ path: String, kind: FileEntry.Kind, mode: UInt32, modified: Int64) throws {
        guard !throughLink(path) else { throw FolderDiskError(path, "through a link") }
        guard mounted, nodes[path] != nil else { throw FolderDiskError(path, "gone") }
        nodes[path]!.mode = mode
        if kind == .file { nodes[path]!.modified = modified }
    }

    /// Puts received content at `path`, replacing a file there (a rename over it).
    func put(_ path: String, content: [UInt8], mode: UInt32, modified: Int64) throws {
        guard !throughLink(path) else { throw FolderDiskError(path, "through a link") }
        guard mounted, parentExists(path), nodes[path].map({ $0.kind == .file }) ?? true else {
            throw FolderDiskError(path, "cannot put")
        }
        nodes[path] = Node(kind: .file, content: content, mode: mode, modified: modified, inode: inode())
    }

    // MARK: What a person does

    func write(_ path: String, _ content: [UInt8], mode: UInt32 = 0o644) -> Bool {
        guard mounted, parentExists(path), nodes[path].map({ $0.kind == .file }) ?? true else { return false }
        let node = nodes[path]
        nodes[path] = Node(
            kind: .file, content: content, mode: node?.mode ?? mode, modified: now(), inode: node?.inode ?? inode())
        return true
    }

    func mkdir(_ path: String) -> Bool {
        (try? makeDirectory(path, mode: 0o755)) != nil
    }

    func delete(_ path: String) -> Bool {
        guard mounted, nodes[path] != nil else { return false }
        for key in nodes.keys where key == path || key.hasPrefix(path + "/") { nodes[key] = nil }
        return true
    }

    func rename(_ from: String, _ to: String) -> Bool {
        guard mounted, nodes[from] != nil, nodes[to] == nil, parentExists(to), !to.hasPrefix(from + "/") else {
            return false
        }
        try? move(from, to: to)
        return true
    }

    func chmod(_ path: String, _ mode: UInt32) -> Bool {
        guard mounted, nodes[path] != nil, nodes[path]!.kind != .symlink else { return false }
        nodes[path]!.mode = mode
        return true
    }

    func symlink(_ path: String, _ target: String) -> Bool {
        (try? makeSymlink(path, target: target)) != nil
    }

    /// What the folder holds, to compare devices: kind, content, link target and permission bits by path.
    var tree: [String: String] {
        var out: [String: String] = [:]
        for (path, node) in nodes {
            switch node.kind {
            case .file: out[path] = "f \(String(node.mode, radix: 8)) \(String(decoding: node.content, as: UTF8.self))"
            case .directory: out[path] = "d \(String(node.mode, radix: 8))"
            case .symlink: out[path] = "l \(node.target)"
            }
        }
        return out
    }
}
