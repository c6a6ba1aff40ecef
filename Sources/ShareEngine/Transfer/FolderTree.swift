import ShareArchive

/// What a delivered folder held when it was extracted: each entry's kind, and a file's size, modification time and
/// inode. A later version of the folder arrives as a delta against only the entries still as they were.
struct FolderTree: Equatable {
    struct Stamp: Equatable {
        var kind: Character
        var size: UInt64
        var modified: Int64
        var inode: UInt64
    }

    private(set) var entries: [String: Stamp] = [:]

    init(_ plan: ArchivePlan) {
        for entry in plan.entries { entries[entry.path] = Self.stamp(entry) }
    }

    private static func stamp(_ entry: ArchivePlan.Entry) -> Stamp {
        var inode: UInt64 = 0
        if case .file(_, let identity) = entry.source { inode = identity.inode }
        switch entry.kind {
        case .file: return Stamp(kind: "f", size: entry.size, modified: entry.modified, inode: inode)
        case .directory: return Stamp(kind: "d", size: 0, modified: 0, inode: 0)
        case .symlink(let target), .hardlink(let target):
            // The target's FNV-1a hash: a link pointed elsewhere since is not as delivered.
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in target.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
            return Stamp(kind: "l", size: hash, modified: 0, inode: 0)
        case .special: return Stamp(kind: "s", size: 0, modified: 0, inode: 0)
        }
    }

    /// Whether `entry`, planned from the folder now, is as it was delivered.
    func holds(_ entry: ArchivePlan.Entry) -> Bool {
        entries[entry.path] == Self.stamp(entry)
    }

    /// One line per entry: `kind TAB size TAB modified TAB inode TAB path`.
    func encoded() -> String {
        var out = ""
        for (path, stamp) in entries {
            out += "\(stamp.kind)\t\(stamp.size)\t\(stamp.modified)\t\(stamp.inode)\t\(path)\n"
        }
        return out
    }

    init?(decoding text: String) {
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: "\t", maxSplits: 4, omittingEmptySubsequences: false)
            guard fields.count == 5, let kind = fields[0].first, let size = UInt64(fields[1]),
                let modified = Int64(fields[2]), let inode = UInt64(fields[3])
            else { return nil }
            entries[String(fields[4])] = Stamp(kind: kind, size: size, modified: modified, inode: inode)
        }
    }
}
