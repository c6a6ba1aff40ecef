/// What a scan found that the index must record.
public struct ScanResult: Sendable {
    /// New versions of paths: created, changed (content or metadata) or deleted here.
    public var changed: [LocalEntry] = []
    /// Paths whose content and metadata are as recorded, found under a new stamp (a new inode, say).
    public var restamped: [LocalEntry] = []
    public init() {}
}

/// Compares what is on disk with this device's index: a path whose stamp is as recorded is unchanged (nothing is
/// read), unless the stamp was recorded too soon after the file changed or the file's time is not yet well past
/// (`DiskStamp.trusted(at:)`); one whose stamp
/// differs is read (`content`) and, if its content or metadata changed, gets a new version raised by this device;
/// a recorded path no longer there gets a tombstone. Pure: the caller lists the disk.
public enum Scanner {
    /// A path's content as read now: a file's digest, or a link's target.
    public struct Content: Sendable {
        public var digest: [UInt8]
        public var target: String
        public init(digest: [UInt8] = [], target: String = "") {
            self.digest = digest
            self.target = target
        }
    }

    /// `observed`: what is on disk, by path, in the part of the folder scanned (`inScope` tells whether a recorded
    /// path lies in it); `recorded`: the index's stamps of that part (at least). `content` reads a file or link (nil: it went away meanwhile, left for the next scan). `me`:
    /// this device; `now`: seconds since 1970 (the version counters' clock); `time`: nanoseconds since 1970 (a
    /// deletion's time).
    public static func scan(
        store: FolderStore, recorded: [String: DiskStamp?], observed: [String: DiskStamp], inScope: (String) -> Bool,
        content: (String, DiskStamp) -> Content?, me: ShortID, now: UInt64, time: Int64
    ) -> ScanResult {
        var result = ScanResult()
        for (path, stamp) in observed.sorted(by: { $0.key < $1.key }) {
            if let known = recorded[path], let known, known.same(as: stamp), known.trusted(at: time) { continue }
            let local = store.local(path)
            guard let read = stamp.kind == .directory ? Content() : content(path, stamp) else { continue }
            var entry = FileEntry(
                path: path, kind: stamp.kind, size: stamp.kind == .file ? stamp.size : 0,
                modified: stamp.kind == .file ? stamp.modified : 0, mode: FileEntry.permissions(stamp.mode),
                digest: stamp.kind == .file ? read.digest : [], target: stamp.kind == .symlink ? read.target : "",
                version: local?.entry.version ?? .empty, modifiedBy: me)
            if let local, !local.entry.deleted, local.entry.sameContent(as: entry),
                local.entry.sameMetadata(as: entry)
            {
                result.restamped.append(LocalEntry(entry: local.entry, stamp: stamp.recorded(at: time)))
                continue
            }
            entry.version = entry.version.updated(by: me, now: now)
            result.changed.append(LocalEntry(entry: entry, stamp: stamp.recorded(at: time)))
        }
        for (path, stamp) in recorded where stamp != nil && observed[path] == nil && inScope(path) {
            guard let local = store.local(path), !local.entry.deleted else { continue }
            result.changed.append(
                LocalEntry(entry: local.entry.tombstone(by: me, now: now, at: time), stamp: nil))
        }
        return result
    }
}
