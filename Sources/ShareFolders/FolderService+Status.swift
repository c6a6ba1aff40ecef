import FoundationEssentials
import ShareText
import Glibc
import ShareEngine
import ShareSync
import ShareSyncStore
import ShareThreads
import ShareTLS
import ShareProtocol

extension FolderService {
    /// Every folder and how it stands once every one is settled (up to date, and in step with every device it is
    /// shared with), or when `seconds` have passed or `abandoned` says the asker went away (looked at every second):
    /// then as it stands. Read again after each change, at most every ten times what a reading takes (and every
    /// 10 ms), so a wait costs little however large the folders are. What a reading takes is the time it held the
    /// folders: a reading that waited for a busy folder's lock (a scan, a batch of entries applied) would otherwise
    /// put the next one ten times that wait later, and the answer half a second after the folders settled.
    package func statuses(settlingWithin seconds: Double, until abandoned: () -> Bool = { false }) -> [FolderStatus] {
        let deadline = ContinuousClock.now + .milliseconds(Int64(max(0, min(seconds, 86_400)) * 1000))
        while true {
            let seen = changes.withLock { $0 }
            let began = ContinuousClock.now
            let (found, cost) = statusesAndCost(fresh: true)
            if FolderStatus.settled(found) || began >= deadline || stopping || abandoned() { return found }
            let next = min(deadline, began + max(.milliseconds(10), cost * 10))
            changes.wait(seconds: min(1, Self.seconds(deadline - .now))) { $0 != seen }
            Threads.sleep(seconds: Self.seconds(next - .now))
        }
    }

    private static func seconds(_ duration: Duration) -> Double {
        let (whole, atto) = duration.components
        return Double(whole) + Double(atto) / 1e18
    }

    /// Notes which devices of `folder` linked now (and `ending`, whose link is ending) hold what this device
    /// holds. When a device was last in step is kept with the folder's index: written when first seen, when its
    /// link ends, and at most once a minute while it stays in step.
    func noteInStep(_ folder: SharedFolder, ending: DeviceID? = nil) {
        guard folder.settings.paused != true else { return }
        let linked = run.withLock { run in Set(run.links.filter { $0.value.shares(folder.id) }.keys) }
        let peers = devices(of: folder.settings).map(\.id).filter { linked.contains($0) || $0 == ending }
        guard !peers.isEmpty else { return }
        folder.reading { state in
            for peer in peers {
                let short = ShortIDs.of(peer)
                guard state.store.remoteState(short) != nil, state.store.differences(with: short) == 0 else { continue }
                Self.noteInStep(&state, peer: short, ending: peer == ending)
            }
        }
    }

    /// `peer`, linked, holds what this device holds now.
    static func noteInStep(_ state: inout SharedFolder.State, peer: ShortID, ending: Bool) {
        let now = Date()
        state.lastInStep[peer] = now
        guard ending || state.inStepWritten[peer].map({ now.timeIntervalSince($0) >= 60 }) ?? true else { return }
        state.inStepWritten[peer] = now
        state.store.noteInStep(peer, at: now)
    }

    /// Every folder and how it stands, for `share sync`, the status and the page (`fresh`: what is read from the
    /// whole index is read again whenever the index moved on; otherwise at most twenty times a second).
    package func statuses(fresh: Bool = false) -> [FolderStatus] {
        statusesAndCost(fresh: fresh).statuses
    }

    /// As above, with how long the reading held the folders' locks (not counting waits for them).
    package func statusesAndCost(fresh: Bool) -> (statuses: [FolderStatus], cost: Duration) {
        let (linked, linkErrors, openErrors) = run.withLock { ($0.links, $0.linkErrors, $0.openErrors) }
        var cost = Duration.zero
        var result: [FolderStatus] = []
        for settings in book.folders {
            guard let folder = folder(settings.id) else {
                result.append(
                    FolderStatus(
                        settings: settings,
                        state: "stopped: \(openErrors[settings.id] ?? "\(settings.path) cannot be opened")",
                        files: 0, bytes: 0,
                        neededFiles: 0, neededBytes: 0, rate: nil, bytesReceived: 0, bytesFromLocal: 0, peers: [],
                        conflicts: [], problems: [], lastScan: nil))
                continue
            }
            let peers = devices(of: settings)
            result.append(
                folder.reading { state in
                    let locked = ContinuousClock.now
                    defer { cost += .now - locked }
                    let summary = Self.summary(of: &state, peers: peers.map { ShortIDs.of($0.id) }, fresh: fresh)
                    let totals = summary.totals
                    let peerStatus = peers.map { peer -> FolderStatus.Peer in
                        let connected =
                            settings.paused == true
                            ? linked[peer.id] != nil : linked[peer.id]?.shares(settings.id) ?? false
                        // Linked, but the folder is not among those it shares: not in step with it, whatever its
                        // index said when it still did.
                        // (A folder paused here is the one not shared on the link: the peer is not said to decline it.)
                        let notSharing = settings.paused != true && (linked[peer.id]?.declines(settings.id) ?? false)
                        // A device whose index never arrived is not in step, however little this one holds.
                        let inStep =
                            !notSharing && state.store.remoteState(ShortIDs.of(peer.id)) != nil
                            && summary.differences[ShortIDs.of(peer.id)] == 0
                        if inStep, connected, settings.paused != true {
                            Self.noteInStep(&state, peer: ShortIDs.of(peer.id), ending: false)
                        }
                        var status = FolderStatus.Peer(
                            id: peer.id.description, name: peer.name, connected: connected, inStep: inStep,
                            lastInStep: state.lastInStep[ShortIDs.of(peer.id)],
                            reason: connected || notSharing ? nil : linkErrors[peer.id])
                        if notSharing {
                            status.notSharing = true
                            status.notSharingWhy = linked[peer.id]?.withholds(settings.id).flatMap {
                                FolderWithheld.known.contains($0) ? $0 : nil
                            }
                        }
                        if !inStep, !notSharing, state.store.remoteState(ShortIDs.of(peer.id)) != nil {
                            status.differing = summary.differences[ShortIDs.of(peer.id)]
                        }
                        return status
                    }
                    let conflicts = summary.conflicts.map { conflict in
                        var named = conflict
                        named.loserName = deviceName(label: conflict.loser)
                        named.winnerName = conflict.winner.flatMap(deviceName(label:))
                        return named
                    }
                    let rate = Self.rate(state.recent.map { ($0.0, Double($0.1)) })
                    let fileRate = Self.rate(state.recentFiles.map { ($0.0, Double($0.1)) })
                    var problems = state.problems.sorted { $0.key < $1.key }.prefix(100).map {
                        FolderStatus.Problem(path: $0.key, reason: $0.value)
                    }
                    problems += summary.kept
                    // Listed until the file lands, also while it is asked for again (the last attempt's reason).
                    problems += state.failedPulls.sorted { $0.key < $1.key }.prefix(100).map {
                        FolderStatus.Problem(path: $0.key, reason: "not pulled: \($0.value)")
                    }
                    problems += state.disk.leftOut.sorted { $0.key < $1.key }.prefix(100).map {
                        FolderStatus.Problem(path: $0.key, reason: $0.value)
                    }
                    // Each named with what it said of the folder, when it does not share it back ("desk (declined
                    // it)": waited for in vain until its person changes that).
                    let waiting = peerStatus.filter { !$0.connected }.map(\.nameAndWhy)
                    let words: String
                    let held = state.sync.heldDeletions
                    problems += state.patternProblems.map { FolderStatus.Problem(path: SyncNames.ignore, reason: $0) }
                    if let failure = state.store.writeFailure {
                        problems.insert(
                            FolderStatus.Problem(
                                path: "", reason: Self.indexWriteProblem(failure, state: device.paths.state.path)),
                            at: 0)
                    }
                    if settings.paused == true {
                        words = "paused"
                    } else if let stopped = state.stopped {
                        words = "stopped: \(stopped)"
                    } else if held > 0 {
                        words =
                            "holding \(held) deletions: more than half of it went at once (an unmounted disk?); "
                            + "share sync allow-deletes \(settings.id) lets them go, or put the files back"
                    } else if state.scanning {
                        words = "scanning"
                    } else if !peers.isEmpty, peers.allSatisfy({ state.store.remoteState(ShortIDs.of($0.id)) == nil }) {
                        // Nothing was ever heard from any of its devices: a folder just accepted is not "up to date".
                        words = "waiting for \(peerStatus.map(\.nameAndWhy).joined(separator: ", "))"
                    } else if state.neededFiles > 0 || !state.inFlight.isEmpty {
                        words =
                            waiting.count == peers.count && !peers.isEmpty
                            ? "waiting for \(waiting.joined(separator: ", "))" : "syncing"
                    } else if !problems.isEmpty {
                        words = "out of sync"
                    } else {
                        words = "up to date"
                    }
                    var status = FolderStatus(
                        settings: settings, state: words, files: totals.files, bytes: totals.bytes,
                        neededFiles: state.neededFiles, neededBytes: state.neededBytes, rate: rate,
                        bytesReceived: state.bytesReceived, bytesFromLocal: state.bytesFromLocal, peers: peerStatus,
                        conflicts: conflicts, problems: Array(problems.prefix(100)), lastScan: state.lastScan,
                        lastScanSeconds: state.lastScanSeconds, recentPulls: state.pulls.isEmpty ? nil : state.pulls,
                        recentChanges: changes(state.sync.applied))
                    status.fileRate = fileRate
                    return status
                })
        }
        return (result, cost)
    }

    /// What the status says while this device's index of a folder cannot be written: what changed here is not
    /// recorded (nor sent), and is looked at again until it is.
    static func indexWriteProblem(_ failure: DatabaseError, state: String) -> String {
        "this device cannot record what changed here in its index of the folder ("
            + (failure.full ? "the disk that holds \(state) is full" : failure.description)
            + "): nothing changed here reaches the other devices until it can; "
            + (failure.full ? "free some space there" : "see the agent's log") + ", and the folder is looked at again"
    }

    /// So much a second, from what came in the last five seconds (`amounts`, each when it came): over the time
    /// since the first of them when that is shorter (a transfer that began two seconds ago is not said to go at
    /// two fifths of its pace), at least a second. Nil when nothing came.
    static func rate(_ amounts: [(Date, Double)], now: Date = Date()) -> Double? {
        let recent = amounts.filter { $0.0 > now.addingTimeInterval(-5) }
        guard let first = recent.map(\.0).min() else { return nil }
        return recent.reduce(0) { $0 + $1.1 } / min(5, max(1, now.timeIntervalSince(first)))
    }

    /// What a status reads from the whole index (totals, how far each device is from this one, conflict copies,
    /// what a receive-only or send-only folder keeps apart): read again only when this device's index or what it
    /// holds of the others' moved on, so a status asked for often costs little on a large folder.
    static func summary(of state: inout SharedFolder.State, peers: [ShortID], fresh: Bool = false) -> FolderSummary {
        let store = state.store
        let kind: UInt64 =
            switch state.settings.kind {
            case .sendReceive: 0
            case .sendOnly: 1
            case .receiveOnly: 2
            }
        var key: [UInt64] = [store.indexID, store.sequence, kind]
        for peer in peers {
            let held = store.remoteState(peer)
            key += [peer, held?.indexID ?? 0, held?.have ?? 0]
        }
        // Read again when the index moved on, at most twenty times a second, and never more often than every ten
        // times what the last reading took: counting a whole index is in proportion to it (tens of milliseconds at
        // 100,000 files), and a status asked for in a loop while thousands of files arrive would otherwise hold the
        // folder more than the arrivals do, more so the more it holds.
        if let summary = state.summary,
            summary.key == key
                || (!fresh && ContinuousClock.now - summary.read < max(.milliseconds(50), summary.cost * 10))
        {
            return summary
        }
        let began = ContinuousClock.now
        let id = state.settings.id
        var kept: [FolderStatus.Problem] = []
        switch state.settings.kind {
        case .receiveOnly:
            kept = state.sync.changedHere().prefix(100).map {
                FolderStatus.Problem(
                    path: $0.path,
                    reason: ($0.deleted ? "deleted here" : "changed here")
                        + " (kept here only; share sync revert \(id) brings the others' back)")
            }
        case .sendOnly:
            kept = state.sync.changedElsewhere().prefix(100).map {
                FolderStatus.Problem(
                    path: $0,
                    reason: "changed elsewhere (not applied; share sync override \(id) pushes this device's)")
            }
        case .sendReceive:
            break
        }
        let conflicts =
            state.summary.flatMap { $0.conflictGeneration == store.conflictGeneration ? $0.conflicts : nil }
            ?? store.conflictCopies().compactMap { copy -> FolderStatus.Conflict? in
                guard let original = store.original(ofConflict: copy.path) else { return nil }
                let (time, device) = Self.parts(ofConflict: copy.path)
                let winner = store.local(original)?.entry
                var conflict = FolderStatus.Conflict(
                    path: original, copy: copy.path, loser: device, loserTime: time,
                    winner: winner.flatMap { $0.deleted ? nil : ShortIDs.label($0.modifiedBy) },
                    winnerTime: winner.flatMap {
                        $0.deleted || $0.modified == 0 ? nil : Date(timeIntervalSince1970: Double($0.modified) / 1e9)
                    })
                if let winner, !winner.deleted, winner.kind == .directory { conflict.winnerIsFolder = true }
                return conflict
            }
        let summary = FolderSummary(
            key: key, read: .now, conflictGeneration: store.conflictGeneration, totals: store.totals(),
            differences: Dictionary(
                uniqueKeysWithValues: peers.map { ($0, store.differences(with: $0)) }),
            conflicts: conflicts, kept: kept, cost: .now - began)
        state.summary = summary
        return summary
    }

    /// The changes from other devices applied here, as the status lists them (nil: none).
    func changes(_ applied: [SyncFolder.AppliedChange]) -> [FolderStatus.Change]? {
        guard !applied.isEmpty else { return nil }
        var names: [ShortID: String] = [:]
        return applied.map { change in
            let label = ShortIDs.label(change.by)
            let name = names[change.by] ?? deviceName(label: label) ?? label
            names[change.by] = name
            let kind =
                switch change.kind {
                case .file: "file"
                case .directory: "folder"
                case .symlink: "link"
                }
            let action =
                change.deleted ? "deleted" : change.from != nil ? "renamed" : change.existed ? "changed" : "added"
            return FolderStatus.Change(
                at: Date(timeIntervalSince1970: Double(change.at) / 1e9), path: change.path, action: action,
                kind: kind, by: name, from: change.from, keptAs: change.keptAs)
        }
    }

    /// The name of the device a label stands for (the first seven characters of its ID, as a conflict copy's name
    /// carries it): this device's, or the name a trusted device is known by here; nil for one not known.
    func deviceName(label: String) -> String? {
        guard label.count == 7 else { return nil }
        if ShortIDs.label(me) == label { return device.name }
        return trust.store.find(label)?.name
    }

    /// The time and device a conflict copy's name gives (`…sync-conflict-YYYYMMDD-HHMMSS-DEVICE…`).
    static func parts(ofConflict path: String) -> (Date?, String) {
        guard let range = path.lastRange(of: ConflictName.marker) else { return (nil, "?") }
        let rest = path[range.upperBound...]
        let fields = rest.split(separator: "-", maxSplits: 2)
        guard fields.count == 3 else { return (nil, "?") }
        let device = String(fields[2].prefix { $0 != "." })
        let time = TimeText.seconds(compact: fields[0] + fields[1], utc: true)
        return (time.map { Date(timeIntervalSince1970: $0) }, device)
    }

    package var offers: [FolderOffer] { book.offers }

    /// The offers declined here whose folder is not here: `share sync accept` takes one after all.
    package var declinedOffers: [FolderOffer] {
        let book = book.snapshot
        return book.declinedOffers.filter { offer in !book.folders.contains { $0.id == offer.id } }
    }
}

/// A folder's status as read from its whole index, and the index's position it was read at.
struct FolderSummary {
    var key: [UInt64]
    var read: ContinuousClock.Instant
    var conflictGeneration: Int
    var totals: (files: Int, bytes: UInt64)
    var differences: [ShortID: Int]
    var conflicts: [FolderStatus.Conflict]
    var kept: [FolderStatus.Problem]
    /// How long reading it took.
    var cost: Duration
}
