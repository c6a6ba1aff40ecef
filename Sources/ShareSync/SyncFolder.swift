/// One shared folder on this device: its index (`FolderStore`), its files (`FolderDisk`), and the steps that keep
/// them in agreement with the other devices' announcements. Scanning records local changes as new versions;
/// planning picks each path's global version (`Planner`); executing does every step that needs no other device —
/// folders, links, removals, metadata, a conflict copy, a file whose content is already here under another name (a
/// rename, applied where the content is) — and returns the files whose content must come from a device that holds
/// it, which `place` then puts in place. Before anything is done to a path, the disk is checked against the index:
/// a change not yet scanned is scanned first, never overwritten. Not thread-safe: one caller at a time.
public final class SyncFolder {
    /// A conflict copy made here: which path, the copy's path, and both versions' devices and times.
    public struct Conflict: Sendable, Equatable {
        public var path: String
        public var copy: String
        public var loser: ShortID
        public var loserModified: Int64
        public var winner: ShortID
        public var winnerModified: Int64
        /// Both versions (never one following the other).
        public var loserVersion: VersionVector
        public var winnerVersion: VersionVector
        /// Whether the copy was made for a folder that had to come back where this version stood (rather than for
        /// a concurrent version of the same path).
        public var forFolder = false
    }

    /// What executing a plan did and left to do.
    public struct Outcome: Sendable {
        /// Entries recorded in this device's index (to announce).
        public var recorded: [FileEntry] = []
        /// Files whose content must come from another device.
        public var fetches: [FileEntry] = []
        /// Paths whose disk was not what the index said: to scan, then plan again.
        public var rescans: Set<String> = []
        /// Steps the disk refused, with why (tried again at the next plan).
        public var failed: [String: String] = [:]
        public init() {}
    }

    public let me: ShortID
    public let store: FolderStore
    public let disk: FolderDisk
    /// Seconds since 1970 (version counters) and nanoseconds since 1970 (times recorded).
    private let clock: () -> (seconds: UInt64, nanoseconds: Int64)
    /// A device's short name in a conflict copy's name (the first characters of its ID).
    private let label: (ShortID) -> String
    /// Conflict copies made here since this object was made.
    public private(set) var conflicts: [Conflict] = []

    /// A change another device made that was applied to this device's disk: made, changed or removed.
    public struct AppliedChange: Sendable, Equatable {
        public var path: String
        public var kind: FileEntry.Kind
        public var deleted: Bool
        /// Whether this device held a live entry at the path before (a change, not something new).
        public var existed: Bool
        /// The device whose change it was.
        public var by: ShortID
        /// When it was applied here, in nanoseconds since 1970.
        public var at: Int64
        /// A rename applied here: the path the file had (its content moved, nothing crossed).
        public var from: String?
        /// This device's concurrent version of the path, set aside for this one: the conflict copy it was kept
        /// as (nil: none made, or kept among the versions).
        public var keptAs: String?
    }
    /// The last changes from other devices applied here (at most `appliedKept`, the latest last).
    public var applied: [AppliedChange] { Array(appliedLog.suffix(Self.appliedKept)) }
    public static let appliedKept = 200
    /// Trimmed to `appliedKept` when it holds twice that: a first sync of many files does not shift it each time.
    private var appliedLog: [AppliedChange] = []
    /// Paths whose version here was set aside for another device's concurrent one, and the conflict copy it went
    /// to (nil: none): the version that then comes is listed as a change of what was here, not as something new.
    private var setAsideHere: [String: String?] = [:]
    /// Whether a path may be synced at all (ignore patterns; internal names); `false` leaves it alone everywhere.
    public var includes: (String) -> Bool = { _ in true }
    /// The folder's ignore patterns: an ignored path is neither scanned nor taken from the others, and what was
    /// recorded of it stays as it was (never a deletion).
    public var patterns = IgnorePatterns.none

    /// Whether `path` takes part in syncing: not the folder's own, not ignored (`kind`: what it is, when known; a
    /// path of unknown kind is taken as a folder, so that a folder-only pattern never lets a deletion through).
    public func syncs(_ path: String, kind: FileEntry.Kind? = nil) -> Bool {
        includes(path) && !patterns.ignores(path, folder: kind.map { $0 == .directory } ?? true)
    }
    /// Deletions found and not yet recorded that are more than this share (0–1) of the folder's entries, and at least
    /// ten, are held (none recorded) until the person lets them go (a disk half unmounted, a folder emptied by
    /// mistake); nil: no limit. What one scan finds gone joins what earlier scans held: the files of one removal can
    /// be found by several scans (a watch settles in windows).
    public var deletionShare: Double? = 0.5
    /// The paths of the deletions held, and of those the person let go (recorded by whichever scans find them gone).
    private var held: Set<String> = []
    private var allowed: Set<String> = []
    /// How many deletions are held.
    public var heldDeletions: Int { held.count }

    /// The person's word that the deletions held may go: their paths, to look at again.
    public func allowHeldDeletions() -> Set<String> {
        defer {
            allowed.formUnion(held)
            held = []
        }
        return held
    }
    /// How many conflict copies of one file are kept (the oldest goes when another is made); 0: none made (the
    /// losing version goes to the versions instead); nil: no limit.
    public var maxConflicts: Int? = 10

    /// How this device treats the folder.
    public enum Mode: Sendable, Equatable {
        /// Changes go both ways.
        case sendReceive
        /// This device's files are the truth: changes made elsewhere are recorded, never applied (`override`
        /// pushes this device's state again).
        case sendOnly
        /// Changes made here are kept here only and listed (`localOnly`), never announced; the others' versions
        /// are applied (`revert` brings them back over what was changed here). `revertLocal`: at once (a mirror's
        /// copy: what was changed here is kept as a conflict copy and the source's version comes back).
        case receiveOnly(revertLocal: Bool)
    }
    public var mode = Mode.sendReceive

    private var receivesOnly: Bool { if case .receiveOnly = mode { true } else { false } }

    /// What the last scan of the whole folder found on disk, for the plan that follows it (`plan(_:afterFullScan:)`):
    /// each path's stamp is then not looked up again.
    private var fullListing: [String: DiskStamp]?
    /// While steps run or fetched files are placed: the folders above paths already found to be folders (a step
    /// that may remove or replace a folder forgets them).
    private var knownFolders: Set<String>?
    /// While fetched files are placed: whether the folder's marker was there when the placing began (looked at
    /// once for the files placed together, not once for each).
    private var presentWhilePlacing: Bool?

    /// A step may have removed or replaced a folder: the folders found so far are looked at again.
    private func forgetKnownFolders() {
        if knownFolders != nil { knownFolders = [] }
    }

    public init(
        me: ShortID, store: FolderStore, disk: FolderDisk, clock: @escaping () -> (seconds: UInt64, nanoseconds: Int64),
        label: @escaping (ShortID) -> String
    ) {
        self.me = me
        self.store = store
        self.disk = disk
        self.clock = clock
        self.label = label
    }

    // MARK: Scanning

    /// Records what changed on disk (beneath `folder`, or everywhere; only `folder`'s own entries unless
    /// `recursive`): the entries recorded, to announce.
    @discardableResult
    /// `forPlan`: what it found is kept for the plan that follows (`plan(_:afterFullScan:)`).
    public func scan(under folder: String? = nil, recursive: Bool = true, forPlan: Bool = false) -> [FileEntry] {
        guard disk.isPresent else { return [] }
        let listing = disk.list(under: folder, recursive: recursive)
        fullListing = forPlan && folder == nil && recursive ? listing : nil
        let observed = listing.filter { syncs($0.key, kind: $0.value.kind) }
        let prefix = folder.map { $0 + "/" } ?? ""
        // What a folder that could not be read holds is not in the listing, and not gone.
        let unread = disk.unlisted
        return record(observed: observed, recorded: store.stamps(under: folder)) { path in
            guard syncs(path), path.hasPrefix(prefix) else { return false }
            if !unread.isEmpty, unread.contains(where: { $0.isEmpty || path.hasPrefix($0 + "/") }) { return false }
            return recursive || !path.dropFirst(prefix.count).includes("/")
        }
    }

    /// Files found holding other content than their index entries name while their stamps say unchanged (a change
    /// that left size, time and inode as they were: a clock set back, a write within one timestamp tick): the
    /// next scan of each reads it again and records what it holds.
    public func distrust(_ paths: [String]) {
        store.restamp(
            paths.compactMap { path in
                store.local(path).flatMap { local in
                    local.stamp.map { LocalEntry(entry: local.entry, stamp: $0.distrusted) }
                }
            })
    }

    /// Records what changed at exactly these paths. `readAhead`: files' contents read before (outside the folder's
    /// lock), each with the stamp it had then; one whose stamp is still that is not read again.
    @discardableResult
    public func scan(paths: Set<String>, readAhead: [String: (DiskStamp, Scanner.Content)] = [:]) -> [FileEntry] {
        guard disk.isPresent else { return [] }
        var observed: [String: DiskStamp] = [:]
        disk.keepingFoldersOpen {
            for path in paths where includes(path) {
                if let stamp = disk.stamp(path) {
                    if syncs(path, kind: stamp.kind) { observed[path] = stamp }
                }
            }
        }
        var recorded: [String: DiskStamp?] = [:]
        for path in paths {
            if let local = store.local(path) { recorded[path] = local.entry.deleted ? nil : local.stamp }
        }
        // A path in a folder that could not be opened is not gone.
        let unread = disk.unlisted
        return record(observed: observed, recorded: recorded, readAhead: readAhead) { path in
            paths.contains(path) && syncs(path)
                && (unread.isEmpty || !unread.contains { $0.isEmpty || path.hasPrefix($0 + "/") })
        }
    }

    private func record(
        observed: [String: DiskStamp], recorded: [String: DiskStamp?],
        readAhead: [String: (DiskStamp, Scanner.Content)] = [:], inScope: (String) -> Bool
    ) -> [FileEntry] {
        let (seconds, nanoseconds) = clock()
        // The folders of the files read stay open while the scan reads them (one open per folder, not per file).
        var result = disk.keepingFoldersOpen {
            Scanner.scan(
                store: store, recorded: recorded, observed: observed, inScope: inScope,
                content: { path, stamp in
                    if let (seen, content) = readAhead[path], seen.same(as: stamp) { return content }
                    return disk.content(path, stamp)
                }, me: me, now: seconds, time: nanoseconds)
        }
        store.restamp(result.restamped)
        if receivesOnly {
            for index in result.changed.indices { result.changed[index].entry.localOnly = true }
        }
        // This scan decides for the paths it looked at: a held or allowed path found again is no longer either, one
        // found gone is held again unless let go. Deletions held by other scans count with these.
        let gone = Set(result.changed.lazy.filter(\.entry.deleted).map(\.entry.path))
        held = held.filter { !inScope($0) }.union(gone.subtracting(allowed))
        allowed = allowed.filter { !inScope($0) }
        if held.count >= 10, let share = deletionShare, Double(held.count) > share * Double(max(1, store.liveCount())) {
            result.changed.removeAll { $0.entry.deleted && held.contains($0.entry.path) }
        } else {
            held = held.filter { !gone.contains($0) }
        }
        return result.changed.isEmpty ? [] : store.recordLocal(result.changed)
    }

    // MARK: Planning

    /// The steps that bring `paths` (nil: every path any index names) to their global versions, in an order that
    /// works: conflict copies first, then folders (parents first), files and links, and removals (children first).
    /// `afterFullScan`: the whole folder was scanned just before (nothing else touched the disk since), so what that
    /// scan found stands for the disk, and of every path only those some other device holds at another version can
    /// need a step (100,000 paths in step are not looked at one by one).
    public func plan(_ paths: Set<String>? = nil, afterFullScan: Bool = false) -> [SyncAction] {
        let listing = afterFullScan ? fullListing : nil
        fullListing = nil
        guard disk.isPresent else { return [] }
        let revertLocal = mode == .receiveOnly(revertLocal: true)
        var actions: [SyncAction] = []
        disk.keepingFoldersOpen {
            for path in (paths ?? (listing != nil ? store.unsettledPaths() : store.allPaths())) where includes(path) {
                let remotes = Array(store.remotes(path).values)
                let local = store.local(path)
                guard syncs(path, kind: local?.entry.kind ?? remotes.first?.kind) else { continue }
                let planned =
                    Planner.plan(
                        local: local, remotes: remotes, disk: listing.map { $0[path] } ?? disk.stamp(path),
                        revertLocal: revertLocal
                    )
                    .actions
                // Send-only: nothing made elsewhere is applied; a path whose file here is the same as the others'
                // (the same content and metadata) only takes their version (Syncthing's rule), so it is not listed
                // as changed elsewhere.
                actions += mode != .sendOnly ? planned : planned.filter { if case .record = $0 { true } else { false } }
            }
        }
        return actions.map { (rank($0), $0) }.sorted { $0.0 < $1.0 }.map(\.1)
    }

    private func rank(_ action: SyncAction) -> (Int, Int, String) {
        let depth = action.path.split(separator: "/").count
        switch action {
        case .rescan: return (0, depth, action.path)
        case .setAside: return (1, depth, action.path)
        case .makeDirectory: return (2, depth, action.path)
        case .fetch, .makeSymlink, .setMetadata, .record: return (3, depth, action.path)
        case .remove: return (4, -depth, action.path)
        }
    }

    // MARK: Over the others, or back to them

    /// The changes kept here only (a receive-only folder that is one no more) become ordinary ones: recorded
    /// again, no longer local only, so they are announced and the others take them (or keep them as conflict copies
    /// where they changed the same paths meanwhile). Returns what was recorded.
    public func sendLocalChanges() -> [FileEntry] {
        let kept = store.allLocal().filter(\.entry.localOnly)
        return store.recordLocal(
            kept.map { local in
                var ordinary = local
                ordinary.entry.localOnly = false
                return ordinary
            })
    }

    /// Paths whose change here is kept here only (a receive-only folder), conflict copies aside (they are listed as
    /// conflicts).
    public func changedHere() -> [FileEntry] {
        store.allLocal().map(\.entry).filter {
            // A file made here and gone again, which no other device has, differs from nothing.
            $0.localOnly && !ConflictName.isConflictCopy($0.path) && !($0.deleted && store.remotes($0.path).isEmpty)
        }
    }

    /// Receive-only: what was changed here goes, the others' versions come back (by the next plan): a file or link
    /// changed or added here is removed (a folder only when empty), and the path records nothing at a version the
    /// others' follows, so the next plan fetches theirs. Returns the paths reverted.
    @discardableResult
    public func revert() -> [String] {
        var reverted: [String] = []
        for entry in changedHere().sorted(by: {
            $0.path.split(separator: "/").count > $1.path.split(separator: "/").count
        }) {
            let path = entry.path
            if let now = disk.stamp(path), now.kind != .directory || disk.list(under: path, recursive: false).isEmpty {
                if now.kind == .file { try? disk.keepVersion(path) }
                try? disk.remove(path)
            }
            if let global = GlobalVersion.winner(Array(store.remotes(path).values)) {
                // Nothing here, at a version every other one follows: the next plan fetches theirs.
                var nothing = global.tombstone(by: me, now: 0, at: 0)
                nothing.version = VersionVector()
                nothing.localOnly = false
                nothing.sequence = 0
                store.recordLocal([LocalEntry(entry: nothing, stamp: nil)])
            } else {
                let (seconds, nanoseconds) = clock()
                var gone = entry.tombstone(by: me, now: seconds, at: nanoseconds)
                gone.localOnly = true
                store.recordLocal([LocalEntry(entry: gone, stamp: nil)])
            }
            reverted.append(path)
        }
        return reverted
    }

    /// Paths where the others agree on another version than this device's.
    public func changedElsewhere() -> [String] {
        store.allPaths().filter { path in
            let local = store.local(path)?.entry
            let global = GlobalVersion.winner(Array(store.remotes(path).values) + (local.map { [$0] } ?? []))
            return global.map { $0.version != local?.version } ?? false
        }.sorted()
    }

    /// Send-only: this device's state is pushed again everywhere: every path where the others agree on another
    /// version gets a new version of this device's that follows theirs — this device's content, or a deletion where
    /// it has none. Returns what was recorded (to announce).
    @discardableResult
    public func override() -> [FileEntry] {
        let (seconds, nanoseconds) = clock()
        var changes: [LocalEntry] = []
        for path in changedElsewhere() {
            let remotes = Array(store.remotes(path).values)
            let theirs = GlobalVersion.winner(remotes)?.version ?? .empty
            if let local = store.local(path), !local.entry.deleted {
                var mine = local.entry
                mine.version = mine.version.merged(with: theirs).updated(by: me, now: seconds)
                mine.modifiedBy = me
                changes.append(LocalEntry(entry: mine, stamp: local.stamp))
            } else if let global = GlobalVersion.winner(remotes), !global.deleted {
                var gone = global.tombstone(by: me, now: seconds, at: nanoseconds)
                gone.version = (store.local(path)?.entry.version ?? .empty).merged(with: theirs)
                    .updated(by: me, now: seconds)
                changes.append(LocalEntry(entry: gone, stamp: nil))
            }
        }
        return store.recordLocal(changes)
    }

    // MARK: Executing

    /// Does every step of `actions` that needs no other device; see `Outcome`.
    public func execute(_ actions: [SyncAction]) -> Outcome {
        guard disk.isPresent else { return Outcome() }
        // The folders reached are kept open while the steps run (each step that makes, moves or removes a folder
        // lets go of them).
        knownFolders = []
        defer { knownFolders = nil }
        return disk.keepingFoldersOpen { executeSteps(actions) }
    }

    private func executeSteps(_ actions: [SyncAction]) -> Outcome {
        var outcome = Outcome()
        // Paths whose version agreed on is a deletion: their content may serve a rename instead of going.
        var removals: [String: FileEntry] = [:]
        for case .remove(let entry) in actions { removals[entry.path] = entry }
        var done: Set<String> = []
        for action in actions {
            let path = action.path
            if case .rescan = action {
                outcome.rescans.insert(path)
                continue
            }
            if done.contains(path) || outcome.rescans.contains(path) || outcome.failed[path] != nil { continue }
            // The disk must still be what the index says: a change not yet scanned is scanned, never overwritten.
            switch action {
            case .fetch:
                // Checked where the content is put in place (`place`) or copied from here (`fetchLocally`): a
                // first sync's thousands of fetches are not looked at twice.
                break
            default:
                guard diskAsRecorded(path) else {
                    outcome.rescans.insert(path)
                    continue
                }
            }
            switch action {
            case .setAside, .makeSymlink, .remove: forgetKnownFolders()
            default: break
            }
            do {
                switch action {
                case .rescan: break
                case .setAside(let loser, let winner):
                    outcome.recorded += try setAside(loser, winner: winner)
                case .makeDirectory(let entry):
                    outcome.recorded += try ensureParents(path)
                    try clearForReplacement(path, keeping: .directory)
                    if disk.stamp(path)?.kind == .directory {
                        try disk.setMetadata(path, kind: .directory, mode: entry.mode, modified: 0)
                    } else {
                        try disk.makeDirectory(path, mode: entry.mode)
                    }
                    outcome.recorded += recordApplied(entry)
                case .makeSymlink(let entry):
                    outcome.recorded += try ensureParents(path)
                    try clearForReplacement(path, keeping: nil)
                    try disk.makeSymlink(path, target: entry.target)
                    outcome.recorded += recordApplied(entry)
                case .setMetadata(let entry):
                    try disk.setMetadata(path, kind: entry.kind, mode: entry.mode, modified: entry.modified)
                    outcome.recorded += recordApplied(entry)
                case .record(let entry):
                    outcome.recorded += recordApplied(entry, visible: false)
                case .remove(let entry):
                    let there = disk.stamp(path)
                    if let now = there, now.kind == .directory, liveBeneath(path) {
                        // A folder deleted elsewhere while a file in it was made or changed: the file is kept, and
                        // so is its folder, as a new version that follows the deletion.
                        outcome.recorded += revive(path, after: entry)
                        break
                    }
                    if let now = there {
                        if now.kind == .directory { try removeDeletableIgnored(beneath: path) }
                        if now.kind == .file { try disk.keepVersion(path) }
                        try disk.remove(path)
                    }
                    outcome.recorded += recordApplied(entry, visible: there != nil)
                case .fetch(let entry):
                    outcome.recorded += try ensureParents(path)
                    if let (recorded, moved) = try fetchLocally(entry, removals: removals, rescans: &outcome.rescans) {
                        outcome.recorded += recorded
                        if let moved { done.insert(moved) }
                    } else {
                        outcome.fetches.append(entry)
                    }
                }
            } catch {
                outcome.failed[path] = "\(error)"
            }
        }
        return outcome
    }

    /// A folder removed elsewhere holds only what this device ignores as deletable (`(?d)`): those go too, so the
    /// folder can. Anything else ignored in it keeps it (its removal fails, and is listed).
    private func removeDeletableIgnored(beneath path: String) throws {
        let inside = disk.list(under: path, recursive: true)
        guard !inside.isEmpty,
            inside.allSatisfy({ patterns.isDeletable($0.key, folder: $0.value.kind == .directory) })
        else { return }
        for child in inside.keys.sorted(by: { $0.split(separator: "/").count > $1.split(separator: "/").count }) {
            try disk.remove(child)
        }
    }

    /// What became of fetched content.
    public enum PlaceOutcome: Sendable, Equatable {
        /// In place; these entries were recorded.
        case placed([FileEntry])
        /// The path changed here since the plan: it must be scanned first (the content waits for the next plan).
        case changedHere
        /// The version agreed on moved on while the content came: not put anywhere.
        case notWanted
    }

    /// Thrown by a placement's `put` told the path was free when something took it meanwhile (nothing was
    /// replaced): the path is scanned, as a change made here.
    public struct PathTaken: Error {
        public init() {}
    }

    /// Runs `body` (files put in place one after another) with the folders it reaches kept open.
    public func placing<T>(_ body: () throws -> T) rethrows -> T {
        knownFolders = []
        presentWhilePlacing = disk.isPresent
        defer {
            knownFolders = nil
            presentWhilePlacing = nil
        }
        return try disk.keepingFoldersOpen(body)
    }

    /// Content fetched from another device for `entry`: checked against the index once more (a change here since
    /// the plan is scanned instead), then put in place by `put` (which moves the verified bytes over the path, with
    /// the entry's mode and time) and recorded.
    public func place(_ entry: FileEntry, put: () throws -> Void) throws -> PlaceOutcome {
        try place(
            entry,
            putting: { _ in
                try put()
                return nil
            })
    }

    /// As above; `put` is told whether nothing was at the path when it was checked (it may then make the file
    /// only where the path is still free, throwing `PathTaken` otherwise), and answers the stamp of the file it
    /// made when it knows it (nil: the path is looked at). `exclusive`: told so, `put` always makes the file only
    /// where the path is free; a path this device holds nothing at is then not looked at first (what took it is
    /// found by `put`, and scanned, alike).
    public func place(
        _ entry: FileEntry, exclusive: Bool = false, putting put: (_ free: Bool) throws -> DiskStamp?
    ) throws -> PlaceOutcome {
        guard presentWhilePlacing ?? disk.isPresent else {
            throw FolderDiskError(entry.path, "the folder is not there (its marker is gone)")
        }
        let local = store.local(entry.path)
        let expected = local.flatMap { $0.entry.deleted ? nil : $0.stamp }
        let now = exclusive && expected == nil ? nil : disk.stamp(entry.path)
        guard Planner.matches(now, expected) else { return .changedHere }
        // Still wanted: the global version may have moved on while the content came. (A change kept here only is
        // no candidate: it loses to the others' version.)
        let keptHere = local?.entry.localOnly == true
        // A change kept here only that saw this version stays (as the planner keeps it): a pull asked for before
        // it does not undo it when it arrives after.
        if let local,
            Planner.staysHere(local.entry, over: entry.version, revertLocal: mode == .receiveOnly(revertLocal: true))
        {
            return .notWanted
        }
        let remotes = Array(store.remotes(entry.path).values)
        guard let global = GlobalVersion.winner(remotes + (local.map { keptHere ? [] : [$0.entry] } ?? [])),
            global.version == entry.version, !global.deleted
        else { return .notWanted }
        var recorded = try ensureParents(entry.path)
        var free = false
        if let local, !local.entry.deleted, local.stamp != nil,
            keptHere || !entry.version.dominates(local.entry.version)
        {
            // A concurrent version of other content here: kept as a copy first.
            recorded += try setAside(local.entry, winner: entry)
            forgetKnownFolders()
            try clearForReplacement(entry.path, keeping: .file)
            if disk.stamp(entry.path)?.kind == .file { try disk.keepVersion(entry.path) }
        } else if let now {
            // What is there is what the index says (checked above): a file is kept as a version, anything else
            // makes room.
            try clearForReplacement(entry.path, keeping: .file)
            if now.kind == .file { try disk.keepVersion(entry.path) }
        } else {
            free = true
        }
        let made: DiskStamp?
        do {
            made = try put(free)
        } catch is PathTaken {
            return .changedHere
        }
        return .placed(recorded + recordApplied(entry, made: made))
    }

    /// Makes the folders above `path` that are missing. One the others agree exists is made as it is; one deleted
    /// elsewhere (while something beneath it was made) comes back as a new version that follows the deletion.
    private func ensureParents(_ path: String) throws -> [FileEntry] {
        var recorded: [FileEntry] = []
        var ancestor = ""
        for part in path.split(separator: "/").dropLast() {
            ancestor += ancestor.isEmpty ? String(part) : "/" + part
            if knownFolders?.contains(ancestor) == true { continue }
            if let now = disk.stamp(ancestor) {
                if now.kind == .directory {
                    knownFolders?.insert(ancestor)
                    continue
                }
                // A file or link where a folder must be: the folder's contents were made elsewhere while this version
                // replaced it. The device holding this version keeps it as a conflict copy, and the folder comes
                // back as a new version that follows both (the others wait for it: only this device has the file).
                guard let local = store.local(ancestor), !local.entry.deleted, let stamp = local.stamp,
                    stamp.same(as: now)
                else { throw FolderDiskError(ancestor, "not a folder") }
                let folder = FileEntry(path: ancestor, kind: .directory, modifiedBy: me)
                let before = conflicts.count
                recorded += try setAside(local.entry, winner: folder)
                for index in conflicts.indices.dropFirst(before) { conflicts[index].forFolder = true }
                try disk.makeDirectory(ancestor, mode: 0o755)
                recorded += revive(ancestor, after: store.local(ancestor)?.entry)
                continue
            }
            let local = store.local(ancestor)
            let global = GlobalVersion.winner(Array(store.remotes(ancestor).values) + (local.map { [$0.entry] } ?? []))
            if let global, !global.deleted, global.kind == .directory {
                try disk.makeDirectory(ancestor, mode: global.mode)
                recorded += recordApplied(global)
            } else {
                try disk.makeDirectory(ancestor, mode: 0o755)
                recorded += revive(ancestor, after: global)
            }
        }
        return recorded
    }

    /// Whether any index holds a live entry beneath `folder`.
    private func liveBeneath(_ folder: String) -> Bool {
        store.paths(under: folder).contains { path in
            let local = store.local(path).map { [$0.entry] } ?? []
            return GlobalVersion.winner(Array(store.remotes(path).values) + local).map { !$0.deleted } ?? false
        }
    }

    /// Records the folder at `path` (on disk now) as a new version of this device's that follows `after` (a deletion
    /// it outlives) and what this device held of it.
    private func revive(_ path: String, after: FileEntry?) -> [FileEntry] {
        guard let stamp = disk.stamp(path), stamp.kind == .directory else { return [] }
        let base = (after?.version ?? .empty).merged(with: store.local(path)?.entry.version ?? .empty)
        let entry = FileEntry(
            path: path, kind: .directory, mode: FileEntry.permissions(stamp.mode),
            version: base.updated(by: me, now: clock().seconds), modifiedBy: me)
        return store.recordLocal([LocalEntry(entry: entry, stamp: stamp)])
    }

    /// Makes room at `path` for a new version of kind `keeping` (nil: anything): a link or a file this device's
    /// index holds as dominated goes, an empty folder goes; a folder with anything in it stays (and the step fails,
    /// to be tried again once its contents are gone).
    private func clearForReplacement(_ path: String, keeping kind: FileEntry.Kind?) throws {
        guard let now = disk.stamp(path) else { return }
        if let kind, now.kind == kind, kind != .symlink { return }
        if now.kind == .directory, !disk.list(under: path, recursive: false).isEmpty {
            throw FolderDiskError(path, "a folder with files in it is in the way")
        }
        if now.kind == .file { try disk.keepVersion(path) }
        if now.kind == .directory { forgetKnownFolders() }
        try disk.remove(path)
    }

    /// The content of `entry` from a file already here with the same digest: moved when that file's own path is
    /// going (a rename, applied where the content is), else copied. Nil when no such file is here.
    private func fetchLocally(_ entry: FileEntry, removals: [String: FileEntry], rescans: inout Set<String>) throws
        -> ([FileEntry], String?)?
    {
        guard let source = store.localFile(withDigest: entry.digest, size: entry.size), source.entry.path != entry.path,
            let recorded = source.stamp, let now = disk.stamp(source.entry.path), recorded.same(as: now)
        else { return nil }
        guard diskAsRecorded(entry.path) else {
            rescans.insert(entry.path)
            return ([], nil)
        }
        try clearForReplacement(entry.path, keeping: nil)
        if let gone = removals[source.entry.path] {
            try disk.move(source.entry.path, to: entry.path)
            try disk.setMetadata(entry.path, kind: .file, mode: entry.mode, modified: entry.modified)
            // One device's deletion of the old path and its new path: a rename, listed as one change. (Another
            // device's deletion that happens to free the content is listed as what it is.)
            let renamed = gone.modifiedBy == entry.modifiedBy
            return (
                recordApplied(gone, visible: !renamed)
                    + recordApplied(entry, from: renamed ? source.entry.path : nil), source.entry.path
            )
        }
        try disk.copyFile(source.entry.path, to: entry.path, mode: entry.mode, modified: entry.modified)
        return (recordApplied(entry), nil)
    }

    /// Whether the disk at `path` is what this device's index recorded there (nothing, for a path it holds
    /// deleted or never held).
    private func diskAsRecorded(_ path: String) -> Bool {
        let expected = store.local(path).flatMap { $0.entry.deleted ? nil : $0.stamp }
        return Planner.matches(disk.stamp(path), expected)
    }

    /// Keeps this device's losing version of a path as a conflict copy: the content moves to the copy (a new file of
    /// this device's, which syncs like any other), and the path records that this device's version left it (a
    /// deletion that follows the losing version, and loses in turn to the winner, which then comes). A conflict
    /// copy that loses is kept as another copy of the same original, never a copy of a copy.
    private func setAside(_ loser: FileEntry, winner: FileEntry) throws -> [FileEntry] {
        let path = loser.path
        guard let stamp = disk.stamp(path) else { return [] }
        var recorded: [FileEntry] = []
        if stamp.kind != .directory, maxConflicts == 0 {
            // No conflict copies: the losing version is kept among the versions.
            if stamp.kind == .file { try disk.keepVersion(path) }
            try disk.remove(path)
            noteSetAside(path, as: nil)
        } else if stamp.kind != .directory {
            let original = ConflictName.original(of: path) ?? path
            recorded += try makeRoomForConflict(of: original)
            let name = ConflictName.make(for: original, modified: loser.modified, device: label(loser.modifiedBy))
            var copy = name
            var n = 1
            while copy == path || disk.stamp(copy) != nil {
                // The same losing version set aside already (here before, or by another device that held it too,
                // its copy come or still being recorded): its copy holds that content, so it is not copied twice.
                if copy != path, let there = disk.stamp(copy), holds(copy, there, loser) {
                    try disk.remove(path)
                    noteSetAside(path, as: copy)
                    return recorded + leave(loser)
                }
                n += 1
                // Another copy of the same second and device: numbered after the device, so it still names its
                // original.
                copy = ConflictName.make(
                    for: original, modified: loser.modified, device: label(loser.modifiedBy), number: n)
            }
            try disk.move(path, to: copy)
            noteSetAside(path, as: copy)
            conflicts.append(
                Conflict(
                    path: path, copy: copy, loser: loser.modifiedBy, loserModified: loser.modified,
                    winner: winner.modifiedBy, winnerModified: winner.modified, loserVersion: loser.version,
                    winnerVersion: winner.version))
            recorded += scan(paths: [copy])
        } else {
            try disk.remove(path)
        }
        return recorded + leave(loser)
    }

    private func noteSetAside(_ path: String, as copy: String?) {
        // Bounded: a winner that never comes (its pull failed for good) leaves its path here.
        if setAsideHere.count >= 4 * Self.appliedKept { setAsideHere.removeAll() }
        setAsideHere[path] = .some(copy)
    }

    /// Whether the file or link at `path` (on disk as `stamp`) holds `entry`'s content: as this device's index
    /// recorded it there, or as read now.
    private func holds(_ path: String, _ stamp: DiskStamp, _ entry: FileEntry) -> Bool {
        guard stamp.kind == entry.kind, entry.kind != .directory else { return false }
        if let existing = store.local(path), !existing.entry.deleted,
            existing.stamp.map({ $0.same(as: stamp) }) ?? false
        {
            return existing.entry.sameContent(as: entry)
        }
        guard let read = disk.content(path, stamp) else { return false }
        return entry.kind == .file
            ? read.digest == entry.digest && stamp.size == entry.size : read.target == entry.target
    }

    /// Removes the oldest conflict copies of `original` until one more fits under `maxConflicts` (their deletions
    /// recorded, so they go everywhere).
    private func makeRoomForConflict(of original: String) throws -> [FileEntry] {
        guard let maxConflicts, maxConflicts > 0 else { return [] }
        let slash = original.lastIndex(of: "/")
        let folder = slash.map { String(original[..<$0]) }
        let copies = disk.list(under: folder, recursive: false).keys
            .filter { ConflictName.isCopy($0, of: original) }
            .sorted { ConflictName.age($0) < ConflictName.age($1) }
        guard copies.count >= maxConflicts else { return [] }
        let oldest = Array(copies.prefix(copies.count - maxConflicts + 1))
        for copy in oldest { try disk.remove(copy) }
        return scan(paths: Set(oldest))
    }

    /// Records that this device's version of a path left it (moved to a conflict copy): a deletion that follows it
    /// (in a receive-only folder, one kept here only).
    private func leave(_ loser: FileEntry) -> [FileEntry] {
        let (seconds, nanoseconds) = clock()
        var gone = loser.tombstone(by: me, now: seconds, at: nanoseconds)
        gone.localOnly = receivesOnly
        return store.recordLocal([LocalEntry(entry: gone, stamp: nil)])
    }

    /// Records `entry` (the global version) as this device's, with the disk's stamp of it now.
    /// When this device held a version the global one never saw (a deletion here that lost to a concurrent edit,
    /// say), the version recorded is both merged, and a step of this device's: what this device did stays known, so
    /// no device can take its own older version back over it; and the merge is this device's alone (another device
    /// merging other versions to the same counters, and keeping another state, never holds the same version).
    /// `visible`: the step changed the disk (listed among the changes `applied`); a step that only records what the
    /// disk already holds is not.
    /// `from`: a rename, applied by moving the file that was there.
    private func recordApplied(
        _ entry: FileEntry, made: DiskStamp? = nil, visible: Bool = true, from: String? = nil
    ) -> [FileEntry] {
        var recorded = entry
        recorded.sequence = 0
        recorded.localOnly = false
        let local = store.local(entry.path)?.entry
        if let local, !local.localOnly, !entry.version.dominates(local.version) {
            recorded.version = entry.version.merged(with: local.version).updated(by: me, now: clock().seconds)
        }
        // A stamp of another kind than the entry's (what is on disk changed under the step) is no stamp of it: the
        // path is then scanned again, never taken as holding this entry.
        let stamp = entry.deleted ? nil : (made ?? disk.stamp(entry.path)).flatMap { $0.kind == entry.kind ? $0 : nil }
        let aside = setAsideHere.isEmpty ? nil : setAsideHere.removeValue(forKey: entry.path)
        if visible {
            if appliedLog.count >= 2 * Self.appliedKept { appliedLog.removeFirst(appliedLog.count - Self.appliedKept) }
            appliedLog.append(
                AppliedChange(
                    path: entry.path, kind: entry.kind, deleted: entry.deleted,
                    existed: aside != nil || (local.map { !$0.deleted } ?? false), by: entry.modifiedBy,
                    at: clock().nanoseconds, from: from, keptAs: aside ?? nil))
        }
        return store.recordLocal([LocalEntry(entry: recorded, stamp: stamp)])
    }
}
