import Foundation
import ShareDisk
import ShareEngine
import ShareSync
import ShareThreads

extension FolderService {
    /// A folder's worker: scans what changed, plans and does what needs no other device, announces what it
    /// recorded, and hands what must come from another device to the pulls. Woken by the watcher, the links and
    /// the pulls; a full rescan (and a full plan) at least every `rescanInterval`.
    func work(_ folder: SharedFolder) {
        var nextFull = ContinuousClock.now
        // Paths planned but not yet brought to the agreed version (content to come, a step refused): planned again.
        var pending: Set<String> = []
        var retryAt = ContinuousClock.now
        while !stopping {
            let full = ContinuousClock.now >= nextFull
            let taken = folder.state.withLock(
                when: { $0.wake || $0.quitting || full || (!pending.isEmpty && ContinuousClock.now >= retryAt) },
                seconds: 1
            ) {
                state, _ -> (scan: [String: Bool]?, wanted: Bool, rescan: Set<String>, dirty: Set<String>?, quit: Bool)?
                in
                guard !state.quitting else { return ([:], false, [], [], true) }
                guard state.wake || full || (!pending.isEmpty && ContinuousClock.now >= retryAt) else { return nil }
                state.wake = false
                defer {
                    state.toScan = []
                    state.scanWanted = false
                    state.rescan = []
                    state.dirty = []
                }
                let scan = state.toScan.map { Dictionary(uniqueKeysWithValues: $0.map { ($0, true) }) }
                return (scan, state.scanWanted, state.rescan, state.dirty, false)
            }
            guard let taken else { continue }
            if taken.quit { return }
            let watched = run.withLock { $0.watchChanges.removeValue(forKey: folder.id) }
            if full { nextFull = .now + .seconds(Self.rescanInterval) }
            round(
                folder, full: full, scan: taken.wanted ? taken.scan : [:], watched: watched ?? [:],
                rescan: taken.rescan, dirty: full ? nil : taken.dirty, pending: &pending)
            if !pending.isEmpty { retryAt = .now + .seconds(5) }
        }
    }

    /// One round of a folder's work.
    private func round(
        _ folder: SharedFolder, full: Bool, scan: [String: Bool]?, watched: [String: Bool], rescan: Set<String>,
        dirty: Set<String>?, pending: inout Set<String>
    ) {
        let started = ContinuousClock.now
        let (announce, outcome, fetches) = folder.withFolder { state -> (Bool, SyncFolder.Outcome, [FileEntry]) in
            var recorded: [FileEntry] = []
            state.scanning = true
            defer { state.scanning = false }
            if full || scan == nil {
                recorded += state.sync.scan()
                state.lastScan = Date()
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
                paths = dirty.union(pending).union(recorded.map(\.path))
            }
            let actions = state.kind == .sendOnly ? [] : state.sync.plan(paths)
            var outcome = state.sync.execute(actions)
            if !outcome.rescans.isEmpty {
                recorded += state.sync.scan(paths: outcome.rescans)
                outcome = SyncFolder.Outcome(
                    merging: outcome, with: state.sync.execute(state.sync.plan(outcome.rescans)))
            }
            recorded += outcome.recorded
            let fetches = outcome.fetches.filter { state.inFlight[$0.path] != $0.version }
            state.problems = state.problems.filter { outcome.failed[$0.key] == nil && paths?.contains($0.key) == false }
            for (path, reason) in outcome.failed { state.problems[path] = reason }
            state.neededFiles = outcome.fetches.count
            state.neededBytes = outcome.fetches.reduce(0) { $0 + $1.size }
            if outcome.fetches.isEmpty, outcome.failed.isEmpty, state.inFlight.isEmpty {
                for peer in state.settings.devices { state.lastInStep[peer] = Date() }
            }
            let announce = !recorded.isEmpty || state.unannounced
            state.unannounced = false
            return (announce, outcome, fetches)
        }
        pending = Set(outcome.fetches.map(\.path)).union(outcome.failed.keys)
        if announce { self.announce(folder.id) }
        if !fetches.isEmpty { pull(fetches, into: folder) }
        let seconds = (ContinuousClock.now - started).seconds
        if seconds > 2 {
            Self.log.debug(
                "a slow round", metadata: ["folder": "\(folder.settings.label)", "seconds": "\(seconds)"])
        }
    }
}

extension SharedFolder.State {
    var kind: SharedFolderSettings.Kind { settings.kind }
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
