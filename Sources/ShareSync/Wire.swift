import ShareProtocol

/// The names a synced folder keeps for itself at its root: never synced, never written by another device.
public enum SyncNames {
    /// Partial files of what is being received.
    public static let partials = ".share-partial"
    /// Versions of files replaced or removed by other devices' changes.
    public static let versions = ".share-versions"
    /// The marker whose presence says the folder is there (an unmounted disk has none).
    public static let marker = ".sharefolder"
    /// This device's own ignore patterns.
    public static let ignore = ".shareignore"

    static let reserved: Set<String> = [partials, versions, marker, ignore]

    /// Whether `path` is one of them, or inside one.
    public static func isInternal(_ path: String) -> Bool {
        // Asked of every path a scan or plan looks at: each of these names begins with a dot.
        guard path.utf8.first == UInt8(ascii: ".") else { return false }
        let first = path.split(separator: "/", maxSplits: 1).first.map(String.init) ?? path
        return reserved.contains(first)
    }

    /// Whether `path` is a path inside a folder: `/`-separated parts, none empty, `.` or `..`, no NUL, each at most
    /// 255 bytes, at most 4096 in all.
    public static func isValidPath(_ path: String) -> Bool {
        guard !path.isEmpty, path.utf8.count <= Limits.maxPathBytes else { return false }
        // One pass over the bytes (asked of every entry that crosses): each part's length, and whether it is all dots.
        var length = 0
        var dots = 0
        for byte in path.utf8 {
            switch byte {
            case 0: return false
            case UInt8(ascii: "/"):
                guard Self.isValidPart(length: length, dots: dots) else { return false }
                length = 0
                dots = 0
            default:
                length += 1
                if byte == UInt8(ascii: ".") { dots += 1 }
            }
        }
        return Self.isValidPart(length: length, dots: dots)
    }

    /// A part of a path: not empty, not `.` or `..`, at most 255 bytes.
    private static func isValidPart(length: Int, dots: Int) -> Bool {
        length > 0 && length <= 255 && !(length <= 2 && dots == length)
    }
}

extension FileEntry {
    /// The entry as it crosses.
    public var record: IndexRecord {
        IndexRecord(
            path: path, kind: kind.rawValue, deleted: deleted, size: size, modified: modified, mode: mode,
            digest: digest, target: target, sequence: sequence, modifiedBy: modifiedBy,
            version: version.counters.map { ($0.device, $0.value) })
    }

    /// An entry a peer sent, checked: a valid path that is not one the folder keeps for itself, a file's digest of
    /// `ContentDigest.size` bytes, no content on a deletion, a version with at least one counter and none above
    /// `Limits.maxVersionCounter`.
    public init(record: IndexRecord) throws(ProtocolError) {
        guard let kind = Kind(rawValue: record.kind), SyncNames.isValidPath(record.path),
            !SyncNames.isInternal(record.path), !record.version.isEmpty,
            record.version.allSatisfy({ $0.1 <= Limits.maxVersionCounter }),
            record.deleted || kind != .file || record.digest.count == ContentDigest.size,
            !record.deleted || (record.digest.isEmpty && record.target.isEmpty),
            kind == .symlink || record.target.isEmpty, kind == .file || record.digest.isEmpty,
            record.size <= Limits.maxItemSize
        else { throw ProtocolError(.badMessage, "an index entry that breaks its rules (\(record.path.prefix(80)))") }
        self.init(
            path: record.path, kind: kind, size: record.size, modified: record.modified,
            mode: FileEntry.permissions(record.mode), digest: record.digest, target: record.target,
            deleted: record.deleted,
            version: VersionVector(record.version.map { VersionVector.Counter(device: $0.0, value: $0.1) }),
            sequence: record.sequence, modifiedBy: record.modifiedBy)
    }
}

/// A file's content digest as every device computes it: the digest of its 1 MiB chunks' BLAKE3 digests, in order
/// (a one-level hash list) — exactly the whole-item digest of a transfer of it in 1 MiB chunks, so a pulled file is
/// checked against its index entry at no extra cost.
public enum ContentDigest {
    public static let size = 32
    public static let chunkSize = 1 << 20
}
