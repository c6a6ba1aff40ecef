/// The version of a path every device agrees on, from what each announced: of the versions no other one follows
/// (the newest along every line of changes), one is picked by the same rule everywhere, so every device that has
/// heard the same announcements picks the same winner.
///
/// Between concurrent versions (each with a change the other never saw): a file, folder or link beats a deletion
/// (a delete concurrent with an edit keeps the edit); a folder beats a file or link (a folder is never set aside as a
/// conflict copy); then the later modification time; then the device that made the change with the larger short ID;
/// then the version vector itself, compared counter by counter. The loser is not lost: the device that holds it
/// keeps it as a conflict copy (`Planner`).
public enum GlobalVersion {
    /// The winner among `entries` (nil when there is none).
    public static func winner<S: Sequence>(_ entries: S) -> FileEntry? where S.Element == FileEntry {
        var newest: [FileEntry] = []
        for candidate in entries {
            var dominated = false
            newest.removeAll { kept in
                switch candidate.version.compare(kept.version) {
                case .greater: return true
                case .lesser:
                    dominated = true
                    return false
                case .equal, .concurrent: return false
                }
            }
            if !dominated { newest.append(candidate) }
        }
        return newest.max { wins($1, over: $0) }
    }

    /// Whether `a` wins over `b` when neither follows the other.
    public static func wins(_ a: FileEntry, over b: FileEntry) -> Bool {
        if a.deleted != b.deleted { return !a.deleted }
        if !a.deleted, (a.kind == .directory) != (b.kind == .directory) { return a.kind == .directory }
        if a.modified != b.modified { return a.modified > b.modified }
        if a.modifiedBy != b.modifiedBy { return a.modifiedBy > b.modifiedBy }
        return lexicographicallyGreater(a.version, b.version)
    }

    private static func lexicographicallyGreater(_ a: VersionVector, _ b: VersionVector) -> Bool {
        for (x, y) in zip(a.counters, b.counters) where x != y {
            return x.device != y.device ? x.device < y.device : x.value > y.value
        }
        return a.counters.count > b.counters.count
    }
}
