import FoundationEssentials
import ShareSync

/// A shared folder's index in the device's database (`STATE/folders.db`): this device's own entries with the stamps
/// it recorded, what it holds of every other device's index, and where each of those stands. Each call is one
/// transaction. Used under its folder's lock (the database connection is shared by the device's folders).
public final class SQLiteFolderStore: FolderStore {
    public let database: Database
    public let folder: String
    public private(set) var indexID: UInt64
    public private(set) var sequence: UInt64
    /// How many paths each device's index holds at another version than this device's, kept up to date by every
    /// entry recorded here or received (a device is counted once, by the whole index, when first asked about).
    private var differing: [ShortID: Int] = [:]
    /// This device's live files and their bytes, kept up to date likewise (nil until first asked).
    private var counted: (files: Int, bytes: UInt64)?
    /// Grows whenever an entry whose name marks a conflict copy is recorded (what the status lists may change).
    public private(set) var conflictGeneration = 0
    /// Entries of paths read or written lately, this device's (nil: none) and the others', exactly as the tables hold
    /// them: a plan, a pull, a placement and the counts above look at one path several times in a row. Kept in step
    /// by every write here; emptied when a write fails (its transaction is rolled back), when one grows past
    /// `cacheLimit` paths, and when a burst of work is over (`relax`: an idle agent keeps none of it).
    private var localCache: [String: LocalEntry?] = [:]
    private var remoteCache: [String: [ShortID: FileEntry]] = [:]
    static let cacheLimit = 32768
    /// This device's live files by content (the first 8 bytes of their digest → their paths), read from the table
    /// when a file is first looked for by its content and kept in step by every entry recorded after; nil when not
    /// read (let go with the caches). An index of the table by digest would cost each file recorded a write at a
    /// random place in it: most of what a sync of many files wrote to its database.
    private var byContent: [UInt64: SameContent]?

    /// The paths of one key of `byContent`, and the first of them by path when known (nil: to be found again): a
    /// folder of many files of one content (empty files, copies) is not looked through at each file placed.
    private struct SameContent {
        var paths: Set<String> = []
        var first: String?

        static func precedes(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }

        mutating func insert(_ path: String) {
            guard paths.insert(path).inserted else { return }
            if paths.count == 1 {
                first = path
            } else if let known = first, Self.precedes(path, known) {
                first = path
            }
        }

        mutating func remove(_ path: String) {
            guard paths.remove(path) != nil else { return }
            if first == path { first = nil }
        }

        /// Every path, the first by path first.
        mutating func inOrder() -> [String] {
            if first == nil { first = paths.min(by: Self.precedes) }
            guard let first else { return [] }
            return [first] + paths.filter { $0 != first }.sorted(by: Self.precedes)
        }
    }
    /// Inside `batch`: the sequence the index reached, written when the batch ends.
    private var batching = false
    private var unwrittenSequence: UInt64?

    /// The layout of the tables: 2 keys the others' entries by path first (a plan looks them up by path).
    static let layout = 2

    /// The tables every folder's store shares (created when missing). The others' entries in a database of an
    /// earlier layout are dropped: what was held of them is asked for again (the hellos say nothing is held).
    public static func prepare(_ database: Database) throws {
        var version: Int64 = 0
        try database.query("PRAGMA user_version") { version = $0.integer(0) }
        if version < layout {
            try database.execute("DROP TABLE IF EXISTS remote; DROP TABLE IF EXISTS remote_state")
        }
        try database.execute(
            """
            CREATE TABLE IF NOT EXISTS indexes (folder TEXT PRIMARY KEY, index_id INTEGER NOT NULL,
                sequence INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS local (folder TEXT NOT NULL, path TEXT NOT NULL, kind INTEGER NOT NULL,
                size INTEGER NOT NULL, modified INTEGER NOT NULL, mode INTEGER NOT NULL, digest BLOB, target TEXT,
                deleted INTEGER NOT NULL, version BLOB NOT NULL, sequence INTEGER NOT NULL,
                modified_by INTEGER NOT NULL, stamp BLOB, local_only INTEGER NOT NULL DEFAULT 0,
                PRIMARY KEY (folder, path)) WITHOUT ROWID;
            CREATE INDEX IF NOT EXISTS local_sequence ON local (folder, sequence);
            DROP INDEX IF EXISTS local_digest;
            CREATE TABLE IF NOT EXISTS remote (folder TEXT NOT NULL, device INTEGER NOT NULL, path TEXT NOT NULL,
                kind INTEGER NOT NULL, size INTEGER NOT NULL, modified INTEGER NOT NULL, mode INTEGER NOT NULL,
                digest BLOB, target TEXT, deleted INTEGER NOT NULL, version BLOB NOT NULL, sequence INTEGER NOT NULL,
                modified_by INTEGER NOT NULL, PRIMARY KEY (folder, path, device)) WITHOUT ROWID;
            CREATE INDEX IF NOT EXISTS remote_device ON remote (folder, device, sequence);
            CREATE TABLE IF NOT EXISTS remote_state (folder TEXT NOT NULL, device INTEGER NOT NULL,
                index_id INTEGER NOT NULL, have INTEGER NOT NULL, PRIMARY KEY (folder, device));
            CREATE TABLE IF NOT EXISTS in_step (folder TEXT NOT NULL, device INTEGER NOT NULL, at INTEGER NOT NULL,
                PRIMARY KEY (folder, device));
            PRAGMA user_version = \(layout);
            """)
    }

    /// The store of `folder` (its index made, with a new random identity, when it has none).
    public init(database: Database, folder: String) throws {
        self.database = database
        self.folder = folder
        var found: (UInt64, UInt64)?
        try database.query("SELECT index_id, sequence FROM indexes WHERE folder = ?", [.text(folder)]) {
            found = ($0.unsigned(0), $0.unsigned(1))
        }
        if let found {
            (indexID, sequence) = found
        } else {
            indexID = UInt64.random(in: 1...UInt64(Int64.max))
            sequence = 0
            try database.query(
                "INSERT INTO indexes (folder, index_id, sequence) VALUES (?, ?, 0)",
                [.text(folder), .integer(Int64(bitPattern: indexID))])
        }
    }

    /// Why the last write to the index failed (a full disk: SQLite's "database or disk is full"), until one
    /// succeeds: what a scan found then is not recorded, and the folder says so and looks again.
    public private(set) var writeFailure: DatabaseError?
    /// Writes that failed inside the batch under way.
    private var failedInBatch = 0

    private func wrote(_ error: (any Error)?) {
        if let error {
            writeFailure = error as? DatabaseError ?? DatabaseError(description: "\(error)")
            if batching { failedInBatch += 1 }
        } else if !batching {
            writeFailure = nil
        }
    }

    /// Runs `body` in one transaction: many entries recorded at once cost one commit.
    public func batch(_ body: () -> Void) {
        var ran = false
        do {
            failedInBatch = 0
            try database.transaction {
                ran = true
                batching = true
                defer { batching = false }
                body()
                // Where the index stands is written once, for every entry the batch recorded.
                if let written = unwrittenSequence {
                    unwrittenSequence = nil
                    try writeSequence(written)
                }
            }
            if failedInBatch == 0 { wrote(nil) }
        } catch {
            wrote(error)
            unwrittenSequence = nil
            // What the body wrote may have been rolled back.
            forgetCached()
            // No transaction could begin: each entry is recorded in its own.
            if !ran { body() }
        }
    }

    private func writeSequence(_ sequence: UInt64) throws {
        try database.query(
            "UPDATE indexes SET sequence = ? WHERE folder = ?", [.integer(Int64(bitPattern: sequence)), .text(folder)])
    }

    /// Hands back what a burst of work took: the cached entries, the database's cached pages and its log.
    public func relax() {
        forgetCached()
        database.relax()
    }

    private func forgetCached() {
        localCache.removeAll()
        remoteCache.removeAll()
        byContent = nil
    }

    /// Where `byContent` files a live file of this content (nil: none, or not a file).
    private static func contentKey(_ entry: FileEntry) -> UInt64? {
        guard !entry.deleted, entry.kind == .file else { return nil }
        return contentKey(entry.digest)
    }

    private static func contentKey(_ digest: [UInt8]) -> UInt64? {
        guard digest.count >= 8 else { return nil }
        return digest.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// `byContent` (when read) after the entry at a path went from `before` to `after`.
    private func noteContent(before: FileEntry?, after: FileEntry) {
        guard byContent != nil else { return }
        let (old, new) = (before.flatMap(Self.contentKey), Self.contentKey(after))
        guard old != new else { return }
        if let old {
            byContent![old]?.remove(after.path)
            if byContent![old]?.paths.isEmpty == true { byContent![old] = nil }
        }
        if let new { byContent![new, default: SameContent()].insert(after.path) }
    }

    private func cache(local entry: LocalEntry?, at path: String) {
        if localCache.count >= Self.cacheLimit, localCache[path] == nil { localCache.removeAll(keepingCapacity: true) }
        localCache[path] = .some(entry)
    }

    private func cache(remotes: [ShortID: FileEntry], at path: String) {
        if remoteCache.count >= Self.cacheLimit, remoteCache[path] == nil {
            remoteCache.removeAll(keepingCapacity: true)
        }
        remoteCache[path] = remotes
    }

    /// Everything this device keeps of the folder, gone (the folder is no longer shared).
    public static func remove(_ folder: String, from database: Database) throws {
        try database.transaction {
            for table in ["indexes", "local", "remote", "remote_state", "in_step"] {
                try database.query("DELETE FROM \(table) WHERE folder = ?", [.text(folder)])
            }
        }
    }

    // MARK: Encoding

    private static let entryColumns =
        "path, kind, size, modified, mode, digest, target, deleted, version, sequence, modified_by"

    // The statements run once an entry, written once (each is looked up by its text).
    private static let selectLocal =
        "SELECT \(entryColumns), stamp, local_only FROM local WHERE folder = ? AND path = ?"
    private static let insertLocal = """
        INSERT OR REPLACE INTO local (folder, \(entryColumns), stamp, local_only)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """
    private static let selectRemotes = "SELECT device, \(entryColumns) FROM remote WHERE folder = ? AND path = ?"
    /// Kept only when newer than what is held of that path from that device.
    private static let insertRemote = """
        INSERT INTO remote (folder, device, \(entryColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (folder, path, device) DO UPDATE SET kind = excluded.kind, size = excluded.size,
            modified = excluded.modified, mode = excluded.mode, digest = excluded.digest,
            target = excluded.target, deleted = excluded.deleted, version = excluded.version,
            sequence = excluded.sequence, modified_by = excluded.modified_by
            WHERE excluded.sequence > remote.sequence
        """

    private static func entry(_ row: Database.Row, from column: Int32 = 0) -> FileEntry {
        FileEntry(
            path: row.text(column), kind: FileEntry.Kind(rawValue: UInt8(row.integer(column + 1))) ?? .file,
            size: row.unsigned(column + 2), modified: row.integer(column + 3), mode: UInt32(row.integer(column + 4)),
            digest: row.blob(column + 5), target: row.text(column + 6), deleted: row.integer(column + 7) != 0,
            version: version(row.blob(column + 8)), sequence: row.unsigned(column + 9),
            modifiedBy: row.unsigned(column + 10))
    }

    /// A row of `entryColumns, stamp, local_only`.
    private static func localEntry(_ row: Database.Row) -> LocalEntry {
        var entry = entry(row)
        entry.localOnly = row.integer(12) != 0
        return LocalEntry(entry: entry, stamp: stamp(row, 11))
    }

    private static func values(_ entry: FileEntry) -> [SQLValue] {
        [
            .text(entry.path), .integer(Int64(entry.kind.rawValue)), .integer(Int64(bitPattern: entry.size)),
            .integer(entry.modified), .integer(Int64(entry.mode)), .blob(entry.digest), .text(entry.target),
            .integer(entry.deleted ? 1 : 0), .blob(bytes(entry.version)), .integer(Int64(bitPattern: entry.sequence)),
            .integer(Int64(bitPattern: entry.modifiedBy)),
        ]
    }

    static func bytes(_ version: VersionVector) -> [UInt8] {
        var out: [UInt8] = []
        for counter in version.counters {
            for value in [counter.device, counter.value] {
                for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((value >> UInt64(shift)) & 0xFF)) }
            }
        }
        return out
    }

    static func version(_ bytes: [UInt8]) -> VersionVector {
        var counters: [VersionVector.Counter] = []
        var at = 0
        func u64() -> UInt64 {
            defer { at += 8 }
            return bytes[at..<at + 8].reduce(0) { $0 << 8 | UInt64($1) }
        }
        while at + 16 <= bytes.count { counters.append(VersionVector.Counter(device: u64(), value: u64())) }
        return VersionVector(counters)
    }

    private static func stampBytes(_ stamp: DiskStamp?) -> SQLValue {
        guard let stamp else { return .null }
        var out: [UInt8] = [stamp.kind.rawValue]
        for value in [stamp.size, UInt64(bitPattern: stamp.modified), UInt64(stamp.mode), stamp.inode] {
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((value >> UInt64(shift)) & 0xFF)) }
        }
        return .blob(out)
    }

    private static func stamp(_ row: Database.Row, _ column: Int32) -> DiskStamp? {
        let bytes = row.blob(column)
        guard bytes.count == 33, let kind = FileEntry.Kind(rawValue: bytes[0]) else { return nil }
        func u64(_ at: Int) -> UInt64 { bytes[at..<at + 8].reduce(0) { $0 << 8 | UInt64($1) } }
        return DiskStamp(
            kind: kind, size: u64(1), modified: Int64(bitPattern: u64(9)), mode: UInt32(u64(17)), inode: u64(25))
    }

    // MARK: This device's index

    public func local(_ path: String) -> LocalEntry? {
        if let cached = localCache[path] { return cached }
        var found: LocalEntry?
        do {
            try database.query(
                Self.selectLocal, [.text(folder), .text(path)]
            ) { row in
                found = Self.localEntry(row)
            }
        } catch {
            return nil
        }
        cache(local: found, at: path)
        return found
    }

    public func allLocal() -> [LocalEntry] {
        var all: [LocalEntry] = []
        try? database.query(
            "SELECT \(Self.entryColumns), stamp, local_only FROM local WHERE folder = ?", [.text(folder)]
        ) { row in
            all.append(Self.localEntry(row))
        }
        return all
    }

    public func stamps(under parent: String?) -> [String: DiskStamp?] {
        var all: [String: DiskStamp?] = [:]
        // Beneath `parent`: the paths from "parent/" up to "parent0" ("0" follows "/").
        let range: String = parent == nil ? "" : " AND path >= ? AND path < ?"
        let bounds: [SQLValue] = parent.map { [.text($0 + "/"), .text($0 + "0")] } ?? []
        try? database.query(
            "SELECT path, deleted, stamp, local_only FROM local WHERE folder = ?" + range, [.text(folder)] + bounds
        ) { row in
            all[row.text(0)] = row.integer(1) != 0 ? .some(nil) : .some(Self.stamp(row, 2))
        }
        return all
    }

    /// The live file of this content and size with a recorded stamp, the first by path when several are.
    public func localFile(withDigest digest: [UInt8], size: UInt64) -> LocalEntry? {
        guard let key = Self.contentKey(digest) else { return nil }
        if byContent == nil {
            var read: [UInt64: SameContent] = [:]
            do {
                try database.query(
                    "SELECT path, digest FROM local WHERE folder = ? AND deleted = 0 AND kind = 0", [.text(folder)]
                ) { row in
                    if let key = Self.contentKey(row.blob(1)) { read[key, default: SameContent()].insert(row.text(0)) }
                }
            } catch {
                return nil
            }
            byContent = read
        }
        guard var same = byContent?[key] else { return nil }
        // The first by path is nearly always the one (its content and size, with a stamp); the others are looked
        // at, in order, only when it is not.
        if let first = same.first, let candidate = local(first), Self.holds(candidate, digest, size) {
            return candidate
        }
        defer { byContent?[key] = same }
        for path in same.inOrder() {
            if let candidate = local(path), Self.holds(candidate, digest, size) { return candidate }
        }
        return nil
    }

    /// Whether `candidate` is a live file of this content and size with a recorded stamp.
    private static func holds(_ candidate: LocalEntry, _ digest: [UInt8], _ size: UInt64) -> Bool {
        !candidate.entry.deleted && candidate.entry.kind == .file && candidate.entry.digest == digest
            && candidate.entry.size == size && candidate.stamp != nil
    }

    public func recordLocal(_ entries: [LocalEntry]) -> [FileEntry] {
        guard !entries.isEmpty else { return [] }
        var recorded: [FileEntry] = []
        var next = sequence
        do {
            try database.transaction {
                for item in entries {
                    next += 1
                    var entry = item.entry
                    entry.sequence = next
                    if ConflictName.isConflictCopy(entry.path) { conflictGeneration += 1 }
                    let before =
                        byContent != nil || !differing.isEmpty || counted != nil ? local(entry.path)?.entry : nil
                    noteContent(before: before, after: entry)
                    if !differing.isEmpty || counted != nil {
                        if let totals = counted {
                            func live(_ e: FileEntry?) -> (Int, UInt64) {
                                guard let e, !e.deleted, e.kind == .file else { return (0, 0) }
                                return (1, e.size)
                            }
                            let (oldFiles, oldBytes) = live(before)
                            let (newFiles, newBytes) = live(entry)
                            counted = (totals.files - oldFiles + newFiles, totals.bytes - oldBytes + newBytes)
                        }
                        let theirs = differing.isEmpty ? [:] : remotes(entry.path)
                        for device in differing.keys {
                            differing[device]! +=
                                (Self.differs(entry, theirs[device]) ? 1 : 0)
                                - (Self.differs(before, theirs[device]) ? 1 : 0)
                        }
                    }
                    try database.query(
                        Self.insertLocal,
                        [.text(folder)] + Self.values(entry) + [
                            Self.stampBytes(item.stamp), .integer(entry.localOnly ? 1 : 0),
                        ])
                    cache(local: LocalEntry(entry: entry, stamp: item.stamp), at: entry.path)
                    recorded.append(entry)
                }
                if batching { unwrittenSequence = next } else { try writeSequence(next) }
            }
        } catch {
            wrote(error)
            differing = [:]
            counted = nil
            forgetCached()
            return []
        }
        wrote(nil)
        sequence = next
        return recorded
    }

    /// Whether two devices' entries of one path differ as the status counts it: one holds a live entry the other
    /// lacks, or both hold it at other versions.
    static func differs(_ mine: FileEntry?, _ theirs: FileEntry?) -> Bool {
        differs(mine, theirs.map(Held.init))
    }

    private static func differs(_ mine: FileEntry?, _ theirs: Held?) -> Bool {
        switch (mine, theirs) {
        case (nil, nil): return false
        case (let mine?, nil): return !mine.deleted
        case (nil, let theirs?): return !theirs.deleted
        case (let mine?, let theirs?): return mine.version != theirs.version
        }
    }

    /// Of another device's entry, what tells whether it differs from this device's, and its sequence.
    private struct Held {
        var deleted: Bool
        var version: VersionVector
        var sequence: UInt64

        init(deleted: Bool, version: VersionVector, sequence: UInt64) {
            self.deleted = deleted
            self.version = version
            self.sequence = sequence
        }

        init(_ entry: FileEntry) { self.init(deleted: entry.deleted, version: entry.version, sequence: entry.sequence) }
    }

    /// What is held of `path` from the device keyed `key` (its row only; nil: nothing).
    private func heldEntry(_ path: String, key: SQLValue) -> Held? {
        var found: Held?
        try? database.query(
            "SELECT deleted, version, sequence FROM remote WHERE folder = ? AND path = ? AND device = ?",
            [.text(folder), .text(path), key]
        ) { row in
            found = Held(deleted: row.integer(0) != 0, version: Self.version(row.blob(1)), sequence: row.unsigned(2))
        }
        return found
    }

    public func restamp(_ entries: [LocalEntry]) {
        guard !entries.isEmpty else { return }
        do {
            try database.transaction {
                for item in entries {
                    try database.query(
                        "UPDATE local SET stamp = ? WHERE folder = ? AND path = ?",
                        [Self.stampBytes(item.stamp), .text(folder), .text(item.entry.path)])
                    if case .some(.some(var cached)) = localCache[item.entry.path] {
                        cached.stamp = item.stamp
                        localCache[item.entry.path] = .some(cached)
                    }
                }
            }
            wrote(nil)
        } catch {
            wrote(error)
            forgetCached()
        }
    }

    public func localSince(_ sequence: UInt64, limit: Int) -> [FileEntry] {
        var found: [FileEntry] = []
        try? database.query(
            """
            SELECT \(Self.entryColumns) FROM local WHERE folder = ? AND sequence > ? AND local_only = 0
                ORDER BY sequence LIMIT ?
            """,
            [.text(folder), .integer(Int64(bitPattern: sequence)), .integer(Int64(limit))]
        ) { found.append(Self.entry($0)) }
        return found
    }

    // MARK: The others' indexes

    public func remoteState(_ device: ShortID) -> (indexID: UInt64, have: UInt64)? {
        var found: (UInt64, UInt64)?
        try? database.query(
            "SELECT index_id, have FROM remote_state WHERE folder = ? AND device = ?",
            [.text(folder), .integer(Int64(bitPattern: device))]
        ) { found = ($0.unsigned(0), $0.unsigned(1)) }
        return found
    }

    public func applyRemote(_ device: ShortID, indexID: UInt64, reset: Bool, entries: [FileEntry], have: UInt64) {
        let key: SQLValue = .integer(Int64(bitPattern: device))
        do {
            try applyRemoteEntries(device, key: key, indexID: indexID, reset: reset, entries: entries, have: have)
            wrote(nil)
        } catch {
            wrote(error)
            // Rolled back: what was counted of that device meanwhile is counted again when next asked.
            differing[device] = nil
            forgetCached()
        }
    }

    private func applyRemoteEntries(
        _ device: ShortID, key: SQLValue, indexID: UInt64, reset: Bool, entries: [FileEntry], have: UInt64
    ) throws {
        try database.transaction {
            let held = remoteState(device)
            var have = have
            if reset || held?.indexID != indexID {
                try database.query("DELETE FROM remote WHERE folder = ? AND device = ?", [.text(folder), key])
                differing[device] = nil
                remoteCache.removeAll()
            } else if let held {
                have = max(have, held.have)
            }
            for entry in entries {
                if differing[device] != nil {
                    // What was held of the path from that device: from the paths' cache when there, else only its
                    // row (not cached: an index of 100,000 entries would only push out what plans look up).
                    let before =
                        remoteCache[entry.path].map { $0[device].map(Held.init) } ?? heldEntry(entry.path, key: key)
                    // The entry is kept only when newer than what is held (as the statement below decides).
                    let after = before.map { entry.sequence > $0.sequence ? Held(entry) : $0 } ?? Held(entry)
                    let mine = local(entry.path)?.entry
                    differing[device]! += (Self.differs(mine, after) ? 1 : 0) - (Self.differs(mine, before) ? 1 : 0)
                }
                // Kept only when newer than what is held of that path from that device.
                try database.query(Self.insertRemote, [.text(folder), key] + Self.values(entry))
                // The same rule for what is kept here of that path.
                if var cached = remoteCache[entry.path] {
                    if cached[device].map({ entry.sequence > $0.sequence }) ?? true {
                        var kept = entry
                        kept.localOnly = false
                        cached[device] = kept
                        remoteCache[entry.path] = cached
                    }
                }
            }
            try database.query(
                "INSERT OR REPLACE INTO remote_state (folder, device, index_id, have) VALUES (?, ?, ?, ?)",
                [.text(folder), key, .integer(Int64(bitPattern: indexID)), .integer(Int64(bitPattern: have))])
        }
    }

    /// When each device was last seen holding what this device held (kept through restarts).
    public func inStepTimes() -> [ShortID: Date] {
        var found: [ShortID: Date] = [:]
        try? database.query("SELECT device, at FROM in_step WHERE folder = ?", [.text(folder)]) {
            found[$0.unsigned(0)] = Date(timeIntervalSince1970: Double($0.integer(1)) / 1000)
        }
        return found
    }

    /// `device` was seen holding what this device holds at `time`.
    public func noteInStep(_ device: ShortID, at time: Date) {
        try? database.query(
            "INSERT OR REPLACE INTO in_step (folder, device, at) VALUES (?, ?, ?)",
            [.text(folder), .integer(Int64(bitPattern: device)), .integer(Int64(time.timeIntervalSince1970 * 1000))])
    }

    public func remotes(_ path: String) -> [ShortID: FileEntry] {
        if let cached = remoteCache[path] { return cached }
        var found: [ShortID: FileEntry] = [:]
        do {
            try database.query(
                Self.selectRemotes, [.text(folder), .text(path)]
            ) { row in
                found[row.unsigned(0)] = Self.entry(row, from: 1)
            }
        } catch {
            return [:]
        }
        cache(remotes: found, at: path)
        return found
    }

    public func allPaths() -> Set<String> {
        var paths: Set<String> = []
        try? database.query(
            "SELECT path FROM local WHERE folder = ?1 UNION SELECT path FROM remote WHERE folder = ?1", [.text(folder)]
        ) { paths.insert($0.text(0)) }
        return paths
    }

    public func unsettledPaths() -> Set<String> {
        var paths: Set<String> = []
        try? database.query(
            """
            SELECT DISTINCT r.path FROM remote r LEFT JOIN local l ON l.folder = r.folder AND l.path = r.path
                WHERE r.folder = ?1 AND (l.path IS NULL OR r.version != l.version)
            """, [.text(folder)]
        ) { paths.insert($0.text(0)) }
        return paths
    }

    /// The paths of what is held of `device`'s index.
    public func paths(of device: ShortID) -> Set<String> {
        var paths: Set<String> = []
        try? database.query(
            "SELECT path FROM remote WHERE folder = ? AND device = ?",
            [.text(folder), .integer(Int64(bitPattern: device))]
        ) { paths.insert($0.text(0)) }
        return paths
    }

    public func paths(under parent: String) -> Set<String> {
        var paths: Set<String> = []
        // Paths beneath `parent/`: from "parent/" up to (not including) "parent0" ('0' follows '/').
        let low = parent + "/"
        let high = parent + "0"
        try? database.query(
            """
            SELECT path FROM local WHERE folder = ?1 AND path >= ?2 AND path < ?3
                UNION SELECT path FROM remote WHERE folder = ?1 AND path >= ?2 AND path < ?3
            """, [.text(folder), .text(low), .text(high)]
        ) { paths.insert($0.text(0)) }
        return paths
    }

    /// Paths whose entries changed since the remote sequence marks given (what a plan needs to look at): every path
    /// any device announced after `since` (by device), and this device's own after `localSince`.
    public func paths(changedSince since: [ShortID: UInt64]) -> Set<String> {
        var paths: Set<String> = []
        for (device, sequence) in since {
            try? database.query(
                "SELECT path FROM remote WHERE folder = ? AND device = ? AND sequence > ?",
                [.text(folder), .integer(Int64(bitPattern: device)), .integer(Int64(bitPattern: sequence))]
            ) { paths.insert($0.text(0)) }
        }
        return paths
    }

    // MARK: For the status

    /// Live files this device holds and their bytes.
    public func liveCount() -> Int {
        var count = 0
        try? database.query("SELECT COUNT(*) FROM local WHERE folder = ? AND deleted = 0", [.text(folder)]) {
            count = Int($0.integer(0))
        }
        return count
    }

    public func totals() -> (files: Int, bytes: UInt64) {
        if let counted { return counted }
        var totals = (0, UInt64(0))
        try? database.query(
            "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM local WHERE folder = ? AND deleted = 0 AND kind = 0",
            [.text(folder)]
        ) { totals = (Int($0.integer(0)), $0.unsigned(1)) }
        counted = totals
        return totals
    }

    /// How many paths `device`'s index holds at another version than this device's (or holds and this one does
    /// not, or the reverse): 0 when both are in step.
    public func differences(with device: ShortID) -> Int {
        if let count = differing[device] { return count }
        let count = countDifferences(with: device)
        differing[device] = count
        return count
    }

    /// The same, counted over the whole of both indexes.
    public func countDifferences(with device: ShortID) -> Int {
        var count = 0
        let key: SQLValue = .integer(Int64(bitPattern: device))
        try? database.query(
            """
            SELECT
                (SELECT COUNT(*) FROM local l LEFT JOIN remote r ON r.folder = l.folder AND r.device = ?2
                    AND r.path = l.path WHERE l.folder = ?1 AND (r.path IS NULL AND l.deleted = 0
                    OR r.path IS NOT NULL AND r.version != l.version))
                + (SELECT COUNT(*) FROM remote r INDEXED BY remote_device LEFT JOIN local l ON l.folder = r.folder AND l.path = r.path
                    WHERE r.folder = ?1 AND r.device = ?2 AND l.path IS NULL AND r.deleted = 0)
            """, [.text(folder), key]
        ) { count = Int($0.integer(0)) }
        return count
    }

    /// This device's live entries whose names mark them as conflict copies.
    public func conflictCopies(limit: Int = 1000) -> [FileEntry] {
        var found: [FileEntry] = []
        try? database.query(
            """
            SELECT \(Self.entryColumns) FROM local WHERE folder = ? AND deleted = 0 AND path LIKE '%.sync-conflict-%'
                ORDER BY path LIMIT ?
            """, [.text(folder), .integer(Int64(limit))]
        ) { found.append(Self.entry($0)) }
        return found
    }

    public func forget(_ device: ShortID) {
        differing[device] = nil
        remoteCache.removeAll()
        try? database.transaction {
            for table in ["remote", "remote_state", "in_step"] {
                try database.query(
                    "DELETE FROM \(table) WHERE folder = ? AND device = ?",
                    [.text(folder), .integer(Int64(bitPattern: device))])
            }
        }
    }
}
