import FoundationEssentials
import ShareText
import Glibc
import ShareDisk
import ShareEngine
import ShareNet
import ShareSync
import ShareThreads
import ShareTrust

extension FolderService {
    /// A paused folder's worker waits for its resume, its removal or the agent's end, looking at nothing meanwhile.
    private func waitWhilePaused(_ folder: SharedFolder) {
        while !stopping, folder.withFolder({ $0.settings.paused == true && !$0.quitting }) {
            _ = folder.state.wait(seconds: 1) { $0.settings.paused != true || $0.quitting }
        }
    }

    /// A folder's worker: scans what changed, plans and does what needs no other device, announces what it
    /// recorded, and hands what must come from another device to the pulls. Woken by the watcher, the links and
    /// the pulls; a full rescan (and a full plan) at least every `rescanInterval`.
    func work(_ folder: SharedFolder) {
        waitWhilePaused(folder)
        folder.withFolder { Self.removeLeftPlacements(in: $0.disk.root) }
        recordInParts(folder)
        var nextFull = ContinuousClock.now
        // Paths whose step failed (a folder in the way, a disk error): planned again after a while.
        var pending: Set<String> = []
        var retryAt = ContinuousClock.now
        // Versions older than the folder keeps them go once an hour (the first time at the first full round).
        var nextClean = ContinuousClock.now
        // Whether the folder worked since it last gave back what work took (two quiet seconds after).
        var worked = false
        var lastWork = ContinuousClock.now
        // Devices in step are noted every few seconds (when each was last in step outlives a restart).
        var nextNote = ContinuousClock.now
        // Rounds in a row whose index writes failed.
        var unwritable = 0
        while !stopping {
            let due = ContinuousClock.now >= nextFull
            // Entries recorded by pulls and not yet announced go out within a tenth of a second.
            let quiet = folder.state.withLock { $0.unannounced } ? 0.1 : 1
            let taken = folder.state.withLock(
                when: {
                    $0.wake || $0.quitting || due || $0.fullWanted
                        || (!pending.isEmpty && ContinuousClock.now >= retryAt)
                },
                seconds: quiet
            ) {
                state, _ -> (
                    scan: [String: Bool]?, wanted: Bool, rescan: Set<String>, dirty: Set<String>?, full: Bool,
                    quit: Bool
                )? in
                guard !state.quitting else { return ([:], false, [], [], false, true) }
                guard state.wake || due || state.fullWanted || (!pending.isEmpty && ContinuousClock.now >= retryAt)
                else { return nil }
                state.wake = false
                let full = due || state.fullWanted
                defer {
                    state.toScan = []
                    state.scanWanted = false
                    state.rescan = []
                    state.dirty = []
                    state.fullWanted = false
                }
                let scan = state.toScan.map { Dictionary(uniqueKeysWithValues: $0.map { ($0, true) }) }
                return (scan, state.scanWanted, state.rescan, state.dirty, full, false)
            }
            guard let taken else {
                // A quiet moment: what pulls recorded meanwhile is announced.
                if folder.state.withLock({ $0.unannounced }) { announceOnly(folder) }
                notifyConflicts(folder)
                if ContinuousClock.now >= nextNote {
                    nextNote = .now + .seconds(5)
                    noteInStep(folder)
                }
                if worked, ContinuousClock.now - lastWork > .seconds(2) {
                    // Quiet after a burst (this device pulled, or served the others' pulls and took their
                    // indexes): the index's cached pages and log, and the freed memory, go back to the system.
                    worked = false
                    folder.withFolder { $0.store.relax() }
                    Syscalls.releaseFreeMemory()
                }
                continue
            }
            worked = true
            lastWork = .now
            if taken.quit { return }
            if folder.settings.paused == true {
                waitWhilePaused(folder)
                folder.withFolder { $0.fullWanted = true }
                continue
            }
            var full = taken.full
            // A folder not there is stopped: nothing scanned (so nothing taken for deleted), planned or pulled.
            if let reason = folder.absence() {
                let was = folder.withFolder { state -> String? in
                    defer { state.stopped = reason }
                    return state.stopped
                }
                if was == nil {
                    Self.log.warning(
                        "a shared folder stopped",
                        metadata: ["folder": "\(folder.settings.label)", "reason": "\(reason)"])
                }
                _ = folder.state.wait(seconds: 2) { $0.quitting }
                folder.withFolder { $0.wake = true }
                continue
            }
            if folder.withFolder({ $0.stopped }) != nil {
                folder.withFolder { $0.stopped = nil }
                Self.log.info("a shared folder is back", metadata: ["folder": "\(folder.settings.label)"])
                full = true
            }
            if full, ContinuousClock.now >= nextClean {
                nextClean = ContinuousClock.now + .seconds(3600)
                let removed = folder.withFolder { $0.disk.versions.clean() }
                if removed > 0 {
                    Self.log.info(
                        "old versions removed", metadata: ["folder": "\(folder.settings.label)", "count": "\(removed)"])
                }
            }
            // New ignore patterns: everything is looked at again (what was ignored may not be any more).
            if folder.refreshPatterns() { full = true }
            let watched = run.withLock { $0.watchChanges.removeValue(forKey: folder.id) }
            if full { nextFull = .now + .seconds(Self.rescanInterval) }
            let retry = !pending.isEmpty && ContinuousClock.now >= retryAt
            let planned = round(
                folder, full: full, scan: taken.wanted ? taken.scan : [:], watched: watched ?? [:],
                rescan: taken.rescan, dirty: full ? nil : taken.dirty, retry: retry ? pending : [])
            if let planned { pending = planned.failed.union(retry ? [] : pending.subtracting(planned.paths ?? [])) }
            if !pending.isEmpty, retry || planned != nil { retryAt = .now + .seconds(5) }
            // The index could not be written (its disk full): what this round found is not recorded, so the whole
            // folder is looked at again after 5 s, then 10, 20 … at most the usual interval, until it can be.
            if let failure = folder.withFolder({ $0.store.writeFailure }) {
                if unwritable == 0 {
                    Self.log.warning(
                        "a shared folder's index cannot be written: what changed here is not recorded until it can be",
                        metadata: ["folder": "\(folder.settings.label)", "reason": "\(failure)"])
                }
                nextFull = min(
                    nextFull, .now + .seconds(min(Self.rescanInterval, 5 * Double(1 << min(unwritable, 10)))))
                unwritable += 1
            } else if unwritable > 0 {
                unwritable = 0
                Self.log.info(
                    "a shared folder's index is written again", metadata: ["folder": "\(folder.settings.label)"])
            }
            notifyConflicts(folder)
        }
    }

    /// A folder whose index holds nothing yet (just shared, never scanned): what it holds is recorded a part at a
    /// time, in path order (a folder before what it holds), each part announced at once, so the other devices take
    /// the index and start pulling while the rest is read; the folder's lock is given back between parts (its links
    /// open meanwhile). The first full round then finds every stamp recorded and reads nothing again.
    private func recordInParts(_ folder: SharedFolder) {
        // The folder's ignore patterns hold from the first part on (the first round finds them read).
        _ = folder.refreshPatterns()
        let (paths, synced) = folder.withFolder { state -> ([String], [String: DiskStamp]) in
            guard state.store.sequence == 0, state.disk.isPresent else { return ([], [:]) }
            let listed = state.disk.list(under: nil, recursive: true)
            // What the scan will read (an ignored file is never read), as listed.
            let synced = listed.filter { $0.value.kind == .file && state.sync.syncs($0.key, kind: .file) }
            return (listed.keys.sorted(), synced)
        }
        guard paths.count > Self.scanPart else { return }
        folder.withFolder { $0.scanning = true }
        defer { folder.withFolder { $0.scanning = false } }
        var start = 0
        while start < paths.count, !stopping, !folder.withFolder({ $0.quitting }) {
            let slice = paths[start..<min(start + Self.scanPart, paths.count)]
            start += Self.scanPart
            // The part's files are read and hashed before the folder's lock is taken: the links send what the
            // last part recorded meanwhile.
            let read = DiskFolder.readAhead(
                slice.lazy.compactMap { path in synced[path].map { (path, $0) } }, in: folder.root)
            let recorded = folder.withFolder { $0.sync.scan(paths: Set(slice), readAhead: read).count }
            if recorded > 0 { announceOnly(folder, force: true) }
        }
    }

    /// Files a placement made in the folder's partials and never renamed into place (the agent was stopped between
    /// the two): `.NAME.tmp-PID-N`, of another process than this one.
    static func removeLeftPlacements(in root: Directory) {
        guard let staging = try? root.directory(components: [SyncNames.partials]) else { return }
        let mine = ".tmp-\(getpid())-"
        for name in staging.entries() where name.hasPrefix(".") && name.includes(".tmp-") && !name.includes(mine) {
            _ = try? staging.remove(name)
        }
    }

    /// Conflict copies new in the folder since it was opened (made here, or come from another device) reach the
    /// person: a log line each and one desktop notification (freedesktop notifications on the session bus).
    func notifyConflicts(_ folder: SharedFolder) {
        let (label, fresh) = folder.withFolder { state -> (String, [(copy: FileEntry, original: String)]) in
            let generation = state.store.conflictGeneration
            guard generation != state.notifiedGeneration else { return ("", []) }
            state.notifiedGeneration = generation
            let copies = state.store.conflictCopies()
            defer { state.notifiedConflicts = Set(copies.map(SharedFolder.conflictKey)) }
            guard let known = state.notifiedConflicts else { return ("", []) }
            return (
                state.settings.label,
                copies.filter { !known.contains(SharedFolder.conflictKey($0)) }.map {
                    ($0, state.store.original(ofConflict: $0.path) ?? $0.path)
                }
            )
        }
        guard !fresh.isEmpty else { return }
        var lines: [String] = []
        for (copy, original) in fresh {
            let (time, device) = Self.parts(ofConflict: copy.path)
            let when = time.map { Self.noticeTime($0) } ?? "?"
            Self.log.notice(
                "a conflict: both versions kept",
                metadata: ["folder": "\(label)", "path": "\(original)", "copy": "\(copy.path)", "device": "\(device)"])
            lines.append(
                "\(original): \(deviceName(label: device) ?? device)'s version of \(when) kept as \(copy.path)")
        }
        notify(
            fresh.count == 1
                ? "share: a conflict in \(label)" : "share: \(fresh.count) conflicts in \(label)",
            (lines.prefix(3) + (lines.count > 3 ? ["…"] : [])).joined(separator: "\n")
                + "\nshare sync shows both versions")
    }

    /// A time as the notices say it (`2026-11-27 14:05`, local time).
    static func noticeTime(_ date: Date) -> String {
        TimeText.string(secondsSince1970: date.timeIntervalSince1970, format: "%Y-%m-%d %H:%M")
    }

    /// What a round planned (nil paths: everything) and which of those steps failed.
    struct Planned {
        var paths: Set<String>?
        var failed: Set<String>
    }

    /// One round of a folder's work: scans what changed, plans the paths that may have changed (every path after a
    /// full scan), does what needs no other device, queues what must be pulled, announces what was recorded, and
    /// starts pulls. Nil when there was nothing to scan or plan (only an announcement).
    private func round(
        _ folder: SharedFolder, full: Bool, scan: [String: Bool]?, watched: [String: Bool], rescan: Set<String>,
        dirty: Set<String>?, retry: Set<String>
    ) -> Planned? {
        let started = ContinuousClock.now
        let nothing =
            !full && scan?.isEmpty == true && watched.isEmpty && rescan.isEmpty && dirty?.isEmpty == true
            && retry.isEmpty
        if nothing {
            announceOnly(folder)
            schedulePulls(folder)
            return nil
        }
        let peers = devices(of: folder.settings).map { ShortIDs.of($0.id) }
        let (announce, planned) = folder.withFolder { state -> (Bool, Planned) in
            // What a status reads of the whole index stays counted from the first round on (each entry recorded
            // or received moves the counts): the first status after a large sync does not count every entry.
            defer {
                _ = state.store.totals()
                for peer in peers { _ = state.store.differences(with: peer) }
            }
            var recorded: [FileEntry] = []
            state.scanning = true
            defer { state.scanning = false }
            let scannedWhole = full || scan == nil
            if scannedWhole {
                let began = ContinuousClock.now
                recorded += state.sync.scan(forPlan: true)
                state.lastScan = Date()
                state.lastScanSeconds = (ContinuousClock.now - began).seconds
                state.fullScans += 1
            } else {
                // The watcher says where and how deep; a folder asked for otherwise is scanned whole.
                var targets = watched
                for path in (scan ?? [:]).keys where targets[path] == nil { targets[path] = true }
                for (path, beneath) in targets {
                    recorded += state.sync.scan(under: path.isEmpty ? nil : path, recursive: beneath)
                }
            }
            if !rescan.isEmpty { recorded += state.sync.scan(paths: rescan) }
            var paths: Set<String>? = nil
            if !full, let dirty {
                // A path looked at again plans again only when the look recorded a change (what a pull put in
                // place is seen by the watch too, as it was recorded).
                paths = dirty.union(retry).union(recorded.map(\.path))
            }
            let actions = state.sync.plan(paths, afterFullScan: scannedWhole)
            var outcome = state.sync.execute(actions)
            if !outcome.rescans.isEmpty {
                recorded += state.sync.scan(paths: outcome.rescans)
                outcome = SyncFolder.Outcome(
                    merging: outcome, with: state.sync.execute(state.sync.plan(outcome.rescans)))
                paths?.formUnion(outcome.rescans)
            }
            recorded += outcome.recorded
            // The queue of pulls: what these paths need now replaces what they needed before.
            if let paths {
                for path in paths {
                    state.queue[path] = nil
                    state.unheld.remove(path)
                }
            } else {
                state.queue.removeAll()
                state.unheld = []
            }
            for entry in outcome.fetches where state.inFlight[entry.path] != entry.version {
                state.queue[entry.path] = entry
            }
            // A failed pull is listed while its path still needs one.
            if !state.failedPulls.isEmpty {
                let fetched = Set(outcome.fetches.map(\.path))
                state.failedPulls = state.failedPulls.filter {
                    paths?.contains($0.key) == false || fetched.contains($0.key)
                }
            }
            if let paths {
                state.problems = state.problems.filter { !paths.contains($0.key) }
            } else {
                state.problems = [:]
            }
            for (path, reason) in outcome.failed { state.problems[path] = reason }
            state.countNeeded()
            let announce = !recorded.isEmpty || state.unannounced
            return (announce, Planned(paths: paths, failed: Set(outcome.failed.keys)))
        }
        if announce { announceOnly(folder, force: true) }
        schedulePulls(folder)
        // A round over the whole folder takes memory in proportion to it: given back to the system after.
        if planned.paths == nil { Syscalls.releaseFreeMemory() }
        let seconds = (ContinuousClock.now - started).seconds
        if seconds > 2 {
            Self.log.debug(
                "a slow round", metadata: ["folder": "\(folder.settings.label)", "seconds": "\(seconds)"])
        }
        return planned
    }

    /// Sends the folder's links what was recorded (pulls record without the worker).
    func announceOnly(_ folder: SharedFolder, force: Bool = false) {
        let due = folder.withFolder { state -> Bool in
            guard state.unannounced || force else { return false }
            state.unannounced = false
            state.announced = .now
            return true
        }
        if due { announce(folder.id) }
    }
}

extension SharedFolder.State {
    var kind: SharedFolderSettings.Kind { settings.kind }

    /// Names of files made without a name (see `unnamed`); those the watch never reports (a folder made and
    /// written before its watch was in place) are let go past a bound.
    mutating func madeUnnamed(_ names: [String]) {
        guard !names.isEmpty else { return }
        if unnamed.count + names.count > Self.unnamedKept { unnamed = [] }
        unnamed.formUnion(names)
    }

    static let unnamedKept = 20_000

    /// What is still to come, for the status: queued and in flight.
    mutating func countNeeded() {
        neededFiles = queue.count + inFlight.count
        neededBytes = queue.bytes.heldAdding(inFlightBytes - min(arriving, inFlightBytes))
    }

}

extension SyncFolder.Outcome {
    /// Both outcomes' findings together.
    init(merging a: SyncFolder.Outcome, with b: SyncFolder.Outcome) {
        self.init()
        recorded = a.recorded + b.recorded
        fetches = a.fetches + b.fetches
        rescans = b.rescans
        failed = a.failed.merging(b.failed) { $1 }
    }
}

extension FolderService {
    /// Scans the whole of folder `id` now (`share sync rescan`) and answers its status once that scan is done
    /// (bounded: ten minutes).
    package func rescan(_ id: String) throws -> FolderStatus {
        guard let folder = folder(id) else {
            throw ShareFailure(.usage, "no shared folder \(id) (share sync lists them)")
        }
        guard folder.settings.paused != true else {
            throw ShareFailure(.usage, "\(folder.settings.label) is paused here: share sync resume \(id) first")
        }
        let before = folder.state.withLock { state -> Int in
            state.fullWanted = true
            return state.fullScans
        }
        let done = folder.state.withLock(when: { $0.fullScans > before || $0.quitting }, seconds: 600) { state, met in
            met && state.fullScans > before
        }
        guard done else {
            throw ShareFailure(.unavailable, "the scan of \(folder.settings.label) did not end in 10 minutes")
        }
        guard let status = statuses().first(where: { $0.settings.id == id }) else {
            throw ShareFailure(.usage, "the folder \(id) was removed meanwhile")
        }
        return status
    }
}
