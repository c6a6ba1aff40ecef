import Glibc

/// Watches folder trees for changes (inotify, one watch per folder beneath each root; the only owner of an inotify
/// descriptor). Each tree has an id; `next` returns where each changed: a file (or link) made, written, moved or
/// removed, a folder whose own entry changed, or a folder made, moved or removed (everything beneath it), relative
/// to its root. When the kernel lost events, or a root
/// itself moved, the whole tree is reported. Confined to the thread that calls `next`; `add` and `remove` too.
public final class TreeWatch {
    /// One change: in tree `id`, the folder `folder` ("" for the root) changed; `beneath`: everything beneath it
    /// too; `whole`: the whole tree is to be looked at again; `file`: only the entry of that name in `folder` (not a
    /// folder) changed — a scan of that one path sees it all.
    public struct Change: Hashable, Sendable {
        public var id: String
        public var folder: String
        public var beneath: Bool
        public var whole: Bool
        public var file: String? = nil
    }

    private let fd: Int32
    private var byDescriptor: [Int32: (id: String, path: String)] = [:]
    private var trees: [String: (root: String, descriptors: Set<Int32>)] = [:]
    private var buffer = [UInt8](repeating: 0, count: 64 << 10)
    /// Set once the kernel's watch limit was reached (changes beneath some folders are then found by rescans only).
    public private(set) var full = false
    /// Names at a root that are never watched (what a synced folder keeps for itself).
    public var skipAtRoot: Set<String> = []

    private static let mask = UInt32(
        IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF
            | IN_MOVE_SELF)

    public init() throws {
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { throw DiskError.system("cannot watch folders (inotify)") }
    }

    deinit { close(fd) }

    public var ids: [String] { Array(trees.keys) }

    /// Watches the tree at `root` under `id` (again, if it was watched).
    public func add(_ id: String, root: String) {
        remove(id)
        trees[id] = (root, [])
        addTree(id, root)
    }

    public func remove(_ id: String) {
        guard let tree = trees[id] else { return }
        for descriptor in tree.descriptors {
            inotify_rm_watch(fd, descriptor)
            byDescriptor[descriptor] = nil
        }
        trees[id] = nil
    }

    private func addTree(_ id: String, _ path: String) {
        guard let root = trees[id]?.root else { return }
        var pending = [path]
        while let directory = pending.popLast() {
            let descriptor = inotify_add_watch(fd, directory, Self.mask)
            guard descriptor >= 0 else {
                if errno == ENOSPC { full = true }
                continue
            }
            byDescriptor[descriptor] = (id, directory)
            trees[id]?.descriptors.insert(descriptor)
            guard let folder = try? Directory.open(directory) else { continue }
            for name in folder.folderEntries() {
                if directory == root, skipAtRoot.contains(name) { continue }
                pending.append(directory + "/" + name)
            }
        }
    }

    /// What changed, waiting at most `timeout` seconds for the first change.
    public func next(timeout: Double) -> [Change] {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        _ = poll(&poller, 1, Int32(max(0, timeout) * 1000))
        var changes: [Change] = []
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { break }
            changes += parse(buffer[0..<n])
        }
        return changes
    }

    private func parse(_ bytes: ArraySlice<UInt8>) -> [Change] {
        var changes: [Change] = []
        var offset = bytes.startIndex
        while bytes.endIndex - offset >= 16 {
            let (descriptor, mask, length) = bytes[offset..<(offset + 16)].withUnsafeBytes { raw in
                (
                    raw.loadUnaligned(fromByteOffset: 0, as: Int32.self),
                    raw.loadUnaligned(fromByteOffset: 4, as: UInt32.self),
                    Int(raw.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
                )
            }
            let nameBytes = bytes[(offset + 16)..<min(bytes.endIndex, offset + 16 + length)]
            let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
            offset += 16 + length
            if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                for id in trees.keys { changes.append(Change(id: id, folder: "", beneath: true, whole: true)) }
                continue
            }
            guard let (id, path) = byDescriptor[descriptor], let root = trees[id]?.root else { continue }
            if mask & UInt32(IN_IGNORED) != 0 {
                byDescriptor[descriptor] = nil
                trees[id]?.descriptors.remove(descriptor)
                continue
            }
            if path == root, skipAtRoot.contains(name) { continue }
            if mask & UInt32(IN_ISDIR) != 0, mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0, !name.isEmpty {
                addTree(id, path + "/" + name)
            }
            let relative = path == root ? "" : String(path.dropFirst(root.count + 1))
            if mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF) != 0, path == root {
                changes.append(Change(id: id, folder: "", beneath: true, whole: true))
            } else if mask & UInt32(IN_ISDIR) != 0, !name.isEmpty {
                changes.append(
                    Change(id: id, folder: relative.isEmpty ? name : relative + "/" + name, beneath: true, whole: false)
                )
                changes.append(Change(id: id, folder: relative, beneath: false, whole: false))
            } else if !name.isEmpty {
                changes.append(Change(id: id, folder: relative, beneath: false, whole: false, file: name))
            } else {
                changes.append(Change(id: id, folder: relative, beneath: false, whole: false))
            }
        }
        return changes
    }
}
