/// One step that brings a path of this device's folder to the version every device agrees on.
public enum SyncAction: Hashable, Sendable {
    /// A file's content is needed: from a file already here with the same digest, else from a device that holds it.
    case fetch(FileEntry)
    case makeDirectory(FileEntry)
    case makeSymlink(FileEntry)
    /// The path goes (the version agreed on is a deletion).
    case remove(FileEntry)
    /// Only the permission bits or the time differ.
    case setMetadata(FileEntry)
    /// The disk already holds this version: only the index learns it.
    case record(FileEntry)
    /// This device's version lost to a concurrent one with other content: it is kept as a conflict copy before the
    /// winner's own step (which follows in the same plan).
    case setAside(local: FileEntry, global: FileEntry)
    /// The disk is not what the index says (a change not scanned yet): scan the path before anything is done to it.
    case rescan(String)

    public var path: String {
        switch self {
        case .fetch(let entry), .makeDirectory(let entry), .makeSymlink(let entry), .remove(let entry),
            .setMetadata(let entry), .record(let entry):
            return entry.path
        case .setAside(let local, _): return local.path
        case .rescan(let path): return path
        }
    }
}

/// Decides, for one path, from this device's entry, every other device's entry and what is on disk now, what brings
/// the path to the global version. Pure: the agent and the simulation run the same decisions.
public enum Planner {
    /// The global version of `path` and the steps towards it (none when this device holds it already).
    ///
    /// A change made here that is kept here only (`localOnly`, a receive-only folder) is no candidate: the others'
    /// version is the global one. It stays as long as the others have not changed the path since it was made
    /// (its version follows theirs) — unless `revertLocal` (a mirror's copy), when theirs comes back at once, what
    /// was changed here kept as a conflict copy.
    public static func plan(local: LocalEntry?, remotes: [FileEntry], disk: DiskStamp?, revertLocal: Bool = false)
        -> (global: FileEntry?, actions: [SyncAction])
    {
        let keptHere = local?.entry.localOnly == true
        let candidates = remotes + (local.map { keptHere ? [] : [$0.entry] } ?? [])
        guard let global = GlobalVersion.winner(candidates) else { return (nil, []) }
        if let local, staysHere(local.entry, over: global.version, revertLocal: revertLocal) {
            let expected = local.entry.deleted ? nil : local.stamp
            return (global, matches(disk, expected) ? [] : [.rescan(global.path)])
        }
        let path = global.path
        // What the index says is on disk: a live entry's stamp (nil once its content was set aside); nothing for a
        // deletion or a path this device never recorded.
        let expected = local.flatMap { $0.entry.deleted ? nil : $0.stamp }
        guard matches(disk, expected) else { return (global, [.rescan(path)]) }
        guard let local, local.entry.version == global.version else {
            return (global, steps(local: local, global: global))
        }
        return (global, [])
    }

    /// Whether a change kept here only (`localOnly`) stays over the others' `version`: it was made after it (and
    /// the folder does not bring the others' version back at once).
    public static func staysHere(_ local: FileEntry, over version: VersionVector, revertLocal: Bool) -> Bool {
        local.localOnly && !revertLocal && local.version.dominates(version)
    }

    private static func steps(local: LocalEntry?, global: FileEntry) -> [SyncAction] {
        let onDisk = local.map { !$0.entry.deleted && $0.stamp != nil } ?? false
        if global.deleted {
            guard onDisk, let local else { return [.record(global)] }
            // A change kept here only (a receive-only folder) that the deletion never saw: the others' deletion
            // holds here too, and what was changed here is kept, as a copy (it is no candidate, so it never wins
            // over the deletion as a change made on another device would).
            if local.entry.localOnly, local.entry.kind != .directory, !global.version.dominates(local.entry.version) {
                return [.setAside(local: local.entry, global: global), .remove(global)]
            }
            return [.remove(global)]
        }
        if onDisk, let local, local.entry.sameContent(as: global) {
            return local.entry.sameMetadata(as: global) ? [.record(global)] : [.setMetadata(global)]
        }
        var actions: [SyncAction] = []
        if onDisk, let local, !global.version.dominates(local.entry.version) {
            // A change here that the winner never saw, with other content: kept, as a copy.
            actions.append(.setAside(local: local.entry, global: global))
        }
        switch global.kind {
        case .file: actions.append(.fetch(global))
        case .directory: actions.append(.makeDirectory(global))
        case .symlink: actions.append(.makeSymlink(global))
        }
        return actions
    }

    /// Whether the disk holds what the index recorded (both nothing, or the same stamp).
    public static func matches(_ disk: DiskStamp?, _ expected: DiskStamp?) -> Bool {
        switch (disk, expected) {
        case (nil, nil): return true
        case (let now?, let recorded?): return recorded.same(as: now)
        default: return false
        }
    }
}
