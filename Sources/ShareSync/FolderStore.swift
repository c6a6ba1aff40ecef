/// What one device keeps of one shared folder, persistently: its own index (each entry with the sequence it was
/// recorded at and the stamp of what it recorded on disk), and what it holds of every other device's index. Every
/// call is one transaction: an interrupted device finds either the state before or after it (SQLite in the agent,
/// `MemoryFolderStore` in tests and the simulation).
public protocol FolderStore: AnyObject {
    /// This device's index's identity: new whenever the index starts over (a peer that holds another one of ours
    /// asks for everything again).
    var indexID: UInt64 { get }
    /// The last sequence this device gave an entry.
    var sequence: UInt64 { get }

    func local(_ path: String) -> LocalEntry?
    /// Every entry of this device's own index.
    func allLocal() -> [LocalEntry]
    /// How many live entries (files, folders and links) this device's index holds.
    func liveCount() -> Int
    /// What a scan compares first: every path of this device's index beneath `folder` (everywhere when nil) with
    /// the stamp it recorded (nil for a deletion, or a path whose content is not on disk).
    func stamps(under folder: String?) -> [String: DiskStamp?]
    /// A live entry of this device's index with this content digest (a file that is already here under another
    /// name); nil when there is none.
    func localFile(withDigest digest: [UInt8], size: UInt64) -> LocalEntry?
    /// Records entries of this device's own index, each with the next sequence; returns them as recorded.
    @discardableResult
    func recordLocal(_ entries: [LocalEntry]) -> [FileEntry]
    /// Changes only the stamps of entries (a file found unchanged under a new inode): no new sequence.
    func restamp(_ entries: [LocalEntry])
    /// This device's entries recorded after `sequence`, in sequence order, at most `limit` (changes kept here only,
    /// `localOnly`, left out).
    func localSince(_ sequence: UInt64, limit: Int) -> [FileEntry]

    /// What this device holds of `device`'s index: its identity and the last sequence received in order.
    func remoteState(_ device: ShortID) -> (indexID: UInt64, have: UInt64)?
    /// Stores entries of `device`'s index received in order (`reset`: a new index of it: what was held goes
    /// first), and that everything up to `have` is held.
    func applyRemote(_ device: ShortID, indexID: UInt64, reset: Bool, entries: [FileEntry], have: UInt64)
    /// Every other device's entry for `path`.
    func remotes(_ path: String) -> [ShortID: FileEntry]
    /// Every path any index names.
    func allPaths() -> Set<String>
    /// The paths another device's index holds at another version than this device's (or that only the others'
    /// indexes name): once a scan of the whole folder found the disk as this index says, the only paths a plan can
    /// change.
    func unsettledPaths() -> Set<String>
    /// The paths any index names beneath `folder`.
    func paths(under folder: String) -> Set<String>
    /// Forgets `device` (no longer sharing the folder).
    func forget(_ device: ShortID)
}

extension FolderStore {
    /// The path a conflict copy was made of, as the indexes name it (nil when `copy` is no copy): a copy whose name
    /// was shortened names its original by the hash its name holds, found among the paths beside it.
    public func original(ofConflict copy: String) -> String? {
        guard let named = ConflictName.original(of: copy) else { return nil }
        guard ConflictName.mayBeShortened(named), local(named) == nil, remotes(named).isEmpty else { return named }
        let slash = copy.lastIndex(of: "/")
        let beside = slash.map { paths(under: String(copy[..<$0])) } ?? allPaths()
        return beside.first { ConflictName.isCopy(copy, of: $0) && !ConflictName.isConflictCopy($0) } ?? named
    }

    /// Path by path, over every index (`SQLiteFolderStore` asks its tables at once).
    public func unsettledPaths() -> Set<String> {
        allPaths().filter { path in
            let mine = local(path)?.entry.version
            return remotes(path).values.contains { mine != $0.version }
        }
    }
}

/// A `FolderStore` in memory: the simulation's and the tests'.
public final class MemoryFolderStore: FolderStore {
    public private(set) var indexID: UInt64
    public private(set) var sequence: UInt64 = 0
    private var locals: [String: LocalEntry] = [:]
    private struct RemoteIndex {
        var indexID: UInt64
        var have: UInt64
        var entries: [String: FileEntry]
    }
    private var remoteIndexes: [ShortID: RemoteIndex] = [:]

    public init(indexID: UInt64) { self.indexID = indexID }

    public func local(_ path: String) -> LocalEntry? { locals[path] }
    public func allLocal() -> [LocalEntry] { Array(locals.values) }
    public func liveCount() -> Int { locals.values.filter { !$0.entry.deleted }.count }
    public func stamps(under folder: String?) -> [String: DiskStamp?] {
        let prefix = folder.map { $0 + "/" } ?? ""
        return locals.filter { $0.key.hasPrefix(prefix) }.mapValues { $0.entry.deleted ? nil : $0.stamp }
    }

    public func localFile(withDigest digest: [UInt8], size: UInt64) -> LocalEntry? {
        guard !digest.isEmpty else { return nil }
        return locals.values.filter {
            !$0.entry.deleted && $0.entry.kind == .file && $0.entry.digest == digest && $0.entry.size == size
                && $0.stamp != nil
        }.min { $0.entry.path < $1.entry.path }
    }

    public func recordLocal(_ entries: [LocalEntry]) -> [FileEntry] {
        entries.map { item in
            sequence += 1
            var recorded = item
            recorded.entry.sequence = sequence
            locals[item.entry.path] = recorded
            return recorded.entry
        }
    }

    public func restamp(_ entries: [LocalEntry]) {
        for item in entries where locals[item.entry.path] != nil { locals[item.entry.path]?.stamp = item.stamp }
    }

    public func localSince(_ sequence: UInt64, limit: Int) -> [FileEntry] {
        Array(
            locals.values.map(\.entry).filter { $0.sequence > sequence && !$0.localOnly }
                .sorted { $0.sequence < $1.sequence }.prefix(limit))
    }

    public func remoteState(_ device: ShortID) -> (indexID: UInt64, have: UInt64)? {
        remoteIndexes[device].map { ($0.indexID, $0.have) }
    }

    public func applyRemote(_ device: ShortID, indexID: UInt64, reset: Bool, entries: [FileEntry], have: UInt64) {
        var index =
            reset || remoteIndexes[device]?.indexID != indexID
            ? RemoteIndex(indexID: indexID, have: 0, entries: [:]) : remoteIndexes[device]!
        for entry in entries where (index.entries[entry.path]?.sequence ?? 0) < entry.sequence {
            index.entries[entry.path] = entry
        }
        index.have = max(index.have, have)
        remoteIndexes[device] = index
    }

    public func remotes(_ path: String) -> [ShortID: FileEntry] {
        var found: [ShortID: FileEntry] = [:]
        for (device, index) in remoteIndexes { if let entry = index.entries[path] { found[device] = entry } }
        return found
    }

    public func allPaths() -> Set<String> {
        var paths = Set(locals.keys)
        for index in remoteIndexes.values { paths.formUnion(index.entries.keys) }
        return paths
    }

    public func paths(under folder: String) -> Set<String> {
        allPaths().filter { $0.hasPrefix(folder + "/") }
    }

    public func forget(_ device: ShortID) { remoteIndexes[device] = nil }

    /// The index starts over (its database lost): a new identity, nothing recorded.
    public func startOver(indexID: UInt64) {
        self.indexID = indexID
        sequence = 0
        locals = [:]
        remoteIndexes = [:]
    }
}
