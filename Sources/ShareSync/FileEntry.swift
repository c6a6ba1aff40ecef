/// One path of a shared folder as a device announces it: what it is, its content's digest, its metadata, whether
/// it was deleted (a tombstone), and the version that says which changes it has seen. The same on every device
/// that holds this version, apart from `sequence`, which is the announcing device's own.
public struct FileEntry: Hashable, Sendable {
    public enum Kind: UInt8, Sendable, CaseIterable {
        case file = 0
        case directory = 1
        case symlink = 2
    }

    /// Relative to the folder's root, `/`-separated, Unicode NFC.
    public var path: String
    public var kind: Kind
    /// Bytes, for a file.
    public var size: UInt64
    /// Modification time, nanoseconds since 1970 (a file's; 0 for folders and links, whose times are not kept).
    public var modified: Int64
    /// Permission bits (the executable bit is what crosses between systems).
    public var mode: UInt32
    /// A file's content digest (`ContentDigest`); empty for folders, links and tombstones.
    public var digest: [UInt8]
    /// A link's target, exactly as the link holds it (never resolved).
    public var target: String
    public var deleted: Bool
    public var version: VersionVector
    /// The announcing device's counter when it last recorded this entry: what a peer asks for "since".
    public var sequence: UInt64
    /// The device that made the change this version records.
    public var modifiedBy: ShortID
    /// A change made here in a receive-only folder: kept and listed on this device, never announced, and losing to
    /// whatever the others agree on (never on the wire).
    public var localOnly = false

    public init(
        path: String, kind: Kind, size: UInt64 = 0, modified: Int64 = 0, mode: UInt32 = 0o644, digest: [UInt8] = [],
        target: String = "", deleted: Bool = false, version: VersionVector = .empty, sequence: UInt64 = 0,
        modifiedBy: ShortID = 0
    ) {
        self.path = path
        self.kind = kind
        self.size = size
        self.modified = modified
        self.mode = mode
        self.digest = digest
        self.target = target
        self.deleted = deleted
        self.version = version
        self.sequence = sequence
        self.modifiedBy = modifiedBy
    }

    /// Whether the two hold the same thing (not counting times and modes): both deleted, or the same kind with the
    /// same content (a file's digest, a link's target).
    public func sameContent(as other: FileEntry) -> Bool {
        if deleted || other.deleted { return deleted == other.deleted }
        guard kind == other.kind else { return false }
        switch kind {
        case .file: return digest == other.digest && size == other.size
        case .symlink: return target == other.target
        case .directory: return true
        }
    }

    /// Whether the metadata that crosses also agrees: a file's permission bits and time; a folder's permission bits.
    public func sameMetadata(as other: FileEntry) -> Bool {
        guard !deleted, !other.deleted else { return true }
        switch kind {
        case .file: return Self.permissions(mode) == Self.permissions(other.mode) && modified == other.modified
        case .directory: return Self.permissions(mode) == Self.permissions(other.mode)
        case .symlink: return true
        }
    }

    /// The permission bits that are kept (read, write, execute for each class; no set-id or sticky bits).
    public static func permissions(_ mode: UInt32) -> UInt32 { mode & 0o777 }

    /// A tombstone of this entry: deleted at `now`, changed by `device`.
    public func tombstone(by device: ShortID, now: UInt64, at time: Int64) -> FileEntry {
        var gone = self
        gone.deleted = true
        gone.size = 0
        gone.digest = []
        gone.target = ""
        gone.modified = time
        gone.version = version.updated(by: device, now: now)
        gone.modifiedBy = device
        return gone
    }
}

/// What a device's own index keeps beside its entry: how the path looked on disk when the entry was recorded, so a
/// scan tells a change without reading the file (as rsync's quick check and Syncthing's scanner do).
public struct DiskStamp: Hashable, Sendable {
    public var kind: FileEntry.Kind
    public var size: UInt64
    public var modified: Int64
    public var mode: UInt32
    public var inode: UInt64

    public init(kind: FileEntry.Kind, size: UInt64, modified: Int64, mode: UInt32, inode: UInt64) {
        self.kind = kind
        self.size = size
        self.modified = modified
        self.mode = mode
        self.inode = inode
    }

    /// How close to its file's last change a stamp may be taken and still be trusted: a change made within the
    /// file system's timestamp granularity of the last one (a tick on ext4, a second or two on others) may leave
    /// size, time and inode as they were.
    public static let granularity: Int64 = 2_000_000_000
    /// Set in `mode` (outside the file type and permission bits) on a stamp recorded too soon after its file's last
    /// change: the next scan reads the file again instead of trusting it.
    static let racyFlag: UInt32 = 1 << 31

    /// Whether the scan that recorded this stamp came so soon after the file's last change that a later change
    /// could look the same; such a file is read again by every scan until one comes later.
    public var racy: Bool { mode & Self.racyFlag != 0 }

    /// This stamp as recorded by a scan that began at `time` (nanoseconds since 1970): racy when the file changed
    /// less than `granularity` before (or after: a clock set back).
    public func recorded(at time: Int64) -> DiskStamp {
        var stamp = self
        if kind == .file, modified > time - Self.granularity { stamp.mode |= Self.racyFlag }
        return stamp
    }

    /// Whether a scan at `time` may take the file for unchanged when the disk shows this stamp again: not when the
    /// stamp was recorded too soon after the file's last change, nor while the file's time is not yet `granularity`
    /// behind the clock (a clock set back, or a time another device's clock stamped it with, ahead of this one: a
    /// write now could leave size, time and inode as they are).
    public func trusted(at time: Int64) -> Bool {
        !racy && (kind != .file || modified <= time - Self.granularity)
    }

    /// This stamp no longer trusted: the next scan of its path reads the file again (the content was found not to
    /// be what the index names).
    public var distrusted: DiskStamp {
        var stamp = self
        stamp.mode |= Self.racyFlag
        return stamp
    }

    /// Whether the path is as it was when recorded (a folder: its kind and permission bits; a link: its kind and
    /// inode, its target being read on every scan).
    public func same(as other: DiskStamp) -> Bool {
        guard kind == other.kind else { return false }
        switch kind {
        case .file:
            return size == other.size && modified == other.modified && inode == other.inode
                && FileEntry.permissions(mode) == FileEntry.permissions(other.mode)
        case .directory: return FileEntry.permissions(mode) == FileEntry.permissions(other.mode)
        case .symlink: return inode == other.inode
        }
    }
}

/// A device's own entry with the stamp of what it recorded on disk (nil for a tombstone, or an entry recorded
/// without looking at the disk).
public struct LocalEntry: Hashable, Sendable {
    public var entry: FileEntry
    public var stamp: DiskStamp?

    public init(entry: FileEntry, stamp: DiskStamp?) {
        self.entry = entry
        self.stamp = stamp
    }
}
