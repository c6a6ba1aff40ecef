import Synchronization
import FoundationEssentials
import Glibc
import ShareDisk
import ShareEngine
import ShareProtocol
import ShareSync
import ShareSyncStore
import ShareThreads
import ShareTLS

/// One shared folder on this device while the agent runs: its index (a SQLite file of its own), its files, and what
/// its worker has to do next. Every use of the folder's logic (`SyncFolder`) happens under this object's lock —
/// the worker's scans and plans, a link storing a peer's entries, a pull putting a file in place — so they never
/// interleave.
final class SharedFolder: Sendable {
    let id: String
    let me: ShortID
    /// The folder, opened: the same directory until it is found again elsewhere at its path (a disk mounted again).
    private let opened: Mutex<Directory>
    var root: Directory { opened.withLock { $0 } }

    struct State {
        var settings: SharedFolderSettings
        let sync: SyncFolder
        let store: SQLiteFolderStore
        let disk: DiskFolder
        /// Paths whose plan may have changed (nil: all of them).
        var dirty: Set<String>? = nil
        /// Folders beneath which the disk changed, to scan (nil: the whole folder).
        var toScan: Set<String>? = nil
        var scanWanted = true
        /// Paths to scan one by one (their disk was not what the index said).
        var rescan: Set<String> = []
        /// The names files this device made without a name had until they were linked (`#` and the inode, as the
        /// watch reports their writes): never files of the folder, so not looked at (the watch's report of the
        /// name each was linked at is).
        var unnamed: Set<String> = []
        /// Entries recorded and not yet announced to the links.
        var unannounced = false
        /// Content being pulled: path → version; and the bytes of those files.
        var inFlight: [String: VersionVector] = [:]
        var inFlightBytes: UInt64 = 0
        /// Files whose last pull failed (refused for want of space, not writable…), by path, and why: listed until
        /// a pull of the path succeeds or the path needs none.
        var failedPulls: [String: String] = [:]
        /// Files whose content must come from another device and that no pull has taken yet, by path.
        var queue = PullQueue()
        /// Of those, the ones no connected device holds at that version (left until the next plan or link).
        var unheld: Set<String> = []
        /// Small files whose patch did not give their content: asked for whole next time.
        var wholeNext: Set<String> = []
        /// When entries were last announced (recorded entries wake the worker at most ten times a second).
        var announced = ContinuousClock.now
        var problems: [String: String] = [:]
        var neededFiles = 0
        var neededBytes: UInt64 = 0
        var lastScan: Date?
        var lastScanSeconds: Double?
        /// What the status last read from the whole index (`FolderService.summary`).
        var summary: FolderSummary?
        /// The files the patterns were last read from (`.shareignore` and what it includes), each with its stamp
        /// then (nil: not there); nil before the first read. And the lines of them that could not be used.
        var patternFiles: [(path: String, stamp: DiskStamp?)]?
        var patternProblems: [String] = []
        /// A whole scan asked for (`share sync rescan`), and how many whole scans were done.
        var fullWanted = false
        var fullScans = 0
        var scanning = false
        var bytesReceived: UInt64 = 0
        var bytesFromLocal: UInt64 = 0
        /// Why the folder is stopped (its marker gone), when it is.
        var stopped: String?
        /// When each device was last seen, linked, holding what this device holds; and when that was last written
        /// to the folder's index (where it outlives a restart).
        var lastInStep: [ShortID: Date] = [:]
        var inStepWritten: [ShortID: Date] = [:]
        /// The conflict copies the person was told of (all there when the folder was opened), and the index's
        /// count of conflict copies recorded then.
        var notifiedConflicts: Set<String>?
        var notifiedGeneration = -1
        var wake = false
        var quitting = false
        /// Bytes received in the last seconds, for a rate.
        var recent: [(Date, UInt64)] = []
        /// Files pulled into place in the last seconds, for a rate of files (many small files go at the pace of
        /// their number, not of their bytes).
        var recentFiles: [(Date, Int)] = []

        /// `files` were pulled into place now.
        mutating func placed(files: Int) {
            guard files > 0 else { return }
            let now = Date()
            recentFiles.append((now, files))
            recentFiles.removeAll { $0.0 < now.addingTimeInterval(-10) }
        }
        /// Bytes of the large files being pulled that came already (counted as they arrive, so a long file's
        /// progress shows in what is to come and the rate; given back when its pull ends).
        var arriving: UInt64 = 0
        /// The last pulls that brought files here, the latest last.
        var pulls: [FolderStatus.Pull] = []
    }
    let state: Guarded<State>
    /// Told after each use of the folder's logic (`withFolder`): its status may read differently.
    private let changed: @Sendable () -> Void

    init(
        settings: SharedFolderSettings, root: Directory, database: Database, me: ShortID,
        changed: @escaping @Sendable () -> Void = {}
    ) throws {
        id = settings.id
        self.changed = changed
        opened = Mutex(root)
        self.me = me
        let store = try SQLiteFolderStore(database: database, folder: settings.id)
        let disk = DiskFolder(root: root)
        disk.versionDays = max(0, settings.keepVersions ?? FolderVersions.defaultDays)
        let sync = SyncFolder(
            me: me, store: store, disk: disk,
            clock: {
                var now = timespec()
                clock_gettime(CLOCK_REALTIME, &now)
                return (UInt64(now.tv_sec), Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec))
            },
            label: { ShortIDs.label($0) })
        sync.includes = { !SyncNames.isInternal($0) }
        sync.mode = Self.mode(settings)
        sync.maxConflicts = settings.maxConflicts.map { $0 < 0 ? nil : $0 } ?? 10
        var opening = State(settings: settings, sync: sync, store: store, disk: disk)
        opening.lastInStep = store.inStepTimes()
        opening.inStepWritten = opening.lastInStep
        state = Guarded(opening)
    }

    /// What tells one conflict copy from another: its path and its content (a later conflict in the same second may
    /// take the name of a copy that was let go).
    static func conflictKey(_ copy: FileEntry) -> String {
        copy.path + "\u{0}" + copy.digest.map { String($0, radix: 16) }.joined()
    }

    var settings: SharedFolderSettings { state.withLock { $0.settings } }

    /// Reads `.shareignore` (and the files it includes) again when one of them changed since they were last read;
    /// whether they did (the folder is then scanned and planned again whole: what was ignored may not be any more).
    /// At most 1 MiB of them is read in all.
    func refreshPatterns() -> Bool {
        let known = state.withLock { $0.patternFiles }
        if let known,
            known.allSatisfy({ file in
                switch (file.stamp, patternFile(file.path).stamp) {
                case (nil, nil): true
                case (let before?, let now?): before.same(as: now)
                default: false
                }
            })
        {
            return false
        }
        var files: [(path: String, stamp: DiskStamp?)] = []
        // One MiB for them all: a synced file another device wrote may name others, each as large.
        var budget = 1 << 20
        func read(_ path: String) -> String? {
            let (stamp, text) = patternFile(path, upTo: budget)
            budget -= text?.utf8.count ?? 0
            files.append((path, stamp))
            return text
        }
        let patterns = IgnorePatterns(text: read(SyncNames.ignore) ?? "", read: read)
        state.withLock { state in
            state.patternFiles = files
            state.sync.patterns = patterns
            state.patternProblems = patterns.problems
        }
        // Nothing to read the first time: nothing changed.
        return known != nil || files.contains { $0.stamp != nil }
    }

    /// A file of patterns by its folder-relative path, reached without following a link: its stamp (nil: not a
    /// file there) and, when asked for some bytes, its text (its first `limit` bytes).
    private func patternFile(_ path: String, upTo limit: Int = 0) -> (stamp: DiskStamp?, text: String?) {
        let parts = path.split(separator: "/").map(String.init)
        guard let name = parts.last,
            let directory = parts.count == 1 ? root : try? root.directory(components: Array(parts.dropLast())),
            let stamp = directory.info(name).flatMap(DiskFolder.stamp), stamp.kind == .file
        else { return (nil, nil) }
        guard limit > 0, let file = try? directory.openFile(name, .readLeavingAccessTime) else { return (stamp, nil) }
        defer { file.close() }
        var bytes = [UInt8](repeating: 0, count: min(Int(stamp.size), limit))
        let n = bytes.withUnsafeMutableBytes { (try? file.read(into: $0, at: 0)) ?? 0 }
        return (stamp, String(decoding: bytes.prefix(n), as: UTF8.self))
    }

    /// Why the folder cannot be synced now, nil when it can: its path must lead to a folder holding the marker
    /// (`.sharefolder`). A folder found at its path again, other than the one opened (a disk mounted again), is
    /// taken from then on.
    func absence() -> String? {
        let path = settings.path
        guard let here = try? Directory.open(path) else {
            return
                "\(path) is gone (moved, removed, or its disk not mounted); nothing is synced or deleted until it is back"
        }
        guard here.info(SyncNames.marker)?.kind == .directory else {
            return
                "\(path) has no \(SyncNames.marker) (its disk not mounted, or another folder there?); nothing is synced or deleted until it is back"
        }
        if let now = here.ownInfo, let was = root.ownInfo, now.inode != was.inode || now.device != was.device {
            opened.withLock { $0 = here }
            state.withLock { $0.disk.root = here }
        }
        return nil
    }

    /// How the folder's logic treats it: a mirror's copy (a receive-only folder made for `share mirror`) takes the
    /// source's versions back at once, keeping what was changed here as conflict copies.
    static func mode(_ settings: SharedFolderSettings) -> SyncFolder.Mode {
        switch settings.kind {
        case .sendReceive: return .sendReceive
        case .sendOnly: return .sendOnly
        case .receiveOnly: return .receiveOnly(revertLocal: settings.mirror == true)
        }
    }

    /// Runs `body` with the folder's logic, under its lock (then tells that the folder may have changed).
    func withFolder<T>(_ body: (inout State) throws -> T) rethrows -> T {
        defer { changed() }
        return try state.withLock { try body(&$0) }
    }

    /// Runs `body` under the folder's lock to read how it stands (not told as a change).
    func reading<T>(_ body: (inout State) throws -> T) rethrows -> T {
        try state.withLock { try body(&$0) }
    }

    /// `path`'s disk is not what the index says: the worker scans it, then plans it again.
    func rescan(_ path: String) {
        rescan([path])
    }

    /// These paths are looked at again (each alone) at the worker's next round.
    func rescan(_ paths: Set<String>) {
        state.withLock { state in
            let made = state.unnamed.isEmpty ? [] : paths.intersection(state.unnamed)
            state.unnamed.subtract(made)
            state.rescan.formUnion(made.isEmpty ? paths : paths.subtracting(made))
            state.wake = true
        }
    }

    /// Entries were recorded outside the worker (a pull put a file in place): announced at the worker's next round.
    func recorded(_ entries: [FileEntry]) {
        guard !entries.isEmpty else { return }
        state.withLock { state in
            state.unannounced = true
            if ContinuousClock.now - state.announced > .milliseconds(100) { state.wake = true }
        }
    }

    /// Why `path` could not be brought to the agreed version (shown by `share sync`).
    func problem(_ path: String, _ reason: String) {
        state.withLock { $0.problems[path] = reason }
    }

    /// Something changed: the worker looks again (`paths` to plan, nil for all; `scan`: folders to scan).
    func touch(paths: Set<String>?, scan folders: Set<String>? = []) {
        state.withLock { state in
            if let paths, state.dirty != nil { state.dirty!.formUnion(paths) } else { state.dirty = nil }
            if let folders {
                if !folders.isEmpty {
                    if state.toScan != nil { state.toScan!.formUnion(folders) }
                    state.scanWanted = true
                }
            } else {
                state.toScan = nil
                state.scanWanted = true
            }
            state.wake = true
        }
    }
}

/// Short device IDs (the first 64 bits of a device ID, as version vectors name devices) and their printed form.
enum ShortIDs {
    static func of(_ id: DeviceID) -> ShortID {
        id.bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The first seven characters of the device ID's printed form (base32 of its first 35 bits), as Syncthing shows
    /// a device in a conflict copy's name.
    static func label(_ short: ShortID) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        return String((0..<7).map { alphabet[Int((short >> UInt64(59 - 5 * $0)) & 31)] })
    }
}
