import Foundation
import ShareEngine
import ShareSync
import ShareTLS

extension FolderService {
    /// Every folder and how it stands, for `share sync`, the status and the page.
    package func statuses() -> [FolderStatus] {
        let (linked, linkErrors) = run.withLock { ($0.links, $0.linkErrors) }
        var result: [FolderStatus] = []
        for settings in book.folders {
            guard let folder = folder(settings.id) else {
                result.append(
                    FolderStatus(
                        settings: settings, state: "stopped: \(settings.path) cannot be opened", files: 0, bytes: 0,
                        neededFiles: 0, neededBytes: 0, rate: nil, bytesReceived: 0, bytesFromLocal: 0, peers: [],
                        conflicts: [], problems: [], lastScan: nil))
                continue
            }
            let peers = devices(of: settings)
            result.append(
                folder.withFolder { state in
                    let totals = state.store.totals()
                    let peerStatus = peers.map { peer -> FolderStatus.Peer in
                        let connected = linked[peer.id]?.shares(settings.id) ?? false
                        let inStep = state.store.differences(with: ShortIDs.of(peer.id)) == 0
                        if inStep { state.lastInStep[peer.id.description] = Date() }
                        return FolderStatus.Peer(
                            id: peer.id.description, name: peer.name, connected: connected, inStep: inStep,
                            lastInStep: state.lastInStep[peer.id.description],
                            reason: connected ? nil : linkErrors[peer.id])
                    }
                    let conflicts = state.store.conflictCopies().compactMap { copy -> FolderStatus.Conflict? in
                        guard let original = ConflictName.original(of: copy.path) else { return nil }
                        let (time, device) = Self.parts(ofConflict: copy.path)
                        let winner = state.store.local(original)?.entry
                        return FolderStatus.Conflict(
                            path: original, copy: copy.path, loser: device, loserTime: time,
                            winner: winner.flatMap { $0.deleted ? nil : ShortIDs.label($0.modifiedBy) },
                            winnerTime: winner.flatMap {
                                $0.deleted || $0.modified == 0
                                    ? nil : Date(timeIntervalSince1970: Double($0.modified) / 1e9)
                            })
                    }
                    let rate: Double? = {
                        let recent = state.recent.filter { $0.0 > Date().addingTimeInterval(-5) }
                        guard !recent.isEmpty else { return nil }
                        return Double(recent.reduce(0) { $0 + $1.1 }) / 5
                    }()
                    var problems = state.problems.sorted { $0.key < $1.key }.prefix(100).map {
                        FolderStatus.Problem(path: $0.key, reason: $0.value)
                    }
                    switch settings.kind {
                    case .receiveOnly:
                        problems += state.sync.changedHere().prefix(100).map {
                            FolderStatus.Problem(
                                path: $0.path,
                                reason: ($0.deleted ? "deleted here" : "changed here")
                                    + " (kept here only; share sync revert \(settings.id) brings the others' back)")
                        }
                    case .sendOnly:
                        problems += state.sync.changedElsewhere().prefix(100).map {
                            FolderStatus.Problem(
                                path: $0,
                                reason:
                                    "changed elsewhere (not applied; share sync override \(settings.id) pushes this device's)"
                            )
                        }
                    case .sendReceive:
                        break
                    }
                    let waiting = peers.filter { !(linked[$0.id]?.shares(settings.id) ?? false) }.map(\.name)
                    let words: String
                    if let stopped = state.stopped {
                        words = "stopped: \(stopped)"
                    } else if state.scanning {
                        words = "scanning"
                    } else if state.neededFiles > 0 || !state.inFlight.isEmpty {
                        words =
                            waiting.count == peers.count && !peers.isEmpty
                            ? "waiting for \(waiting.joined(separator: ", "))" : "syncing"
                    } else if !problems.isEmpty {
                        words = "out of sync"
                    } else {
                        words = "up to date"
                    }
                    return FolderStatus(
                        settings: settings, state: words, files: totals.files, bytes: totals.bytes,
                        neededFiles: state.neededFiles, neededBytes: state.neededBytes, rate: rate,
                        bytesReceived: state.bytesReceived, bytesFromLocal: state.bytesFromLocal, peers: peerStatus,
                        conflicts: conflicts, problems: Array(problems.prefix(100)), lastScan: state.lastScan)
                })
        }
        return result
    }

    /// The time and device a conflict copy's name gives (`…sync-conflict-YYYYMMDD-HHMMSS-DEVICE…`).
    static func parts(ofConflict path: String) -> (Date?, String) {
        guard let range = path.range(of: ConflictName.marker, options: .backwards) else { return (nil, "?") }
        let rest = path[range.upperBound...]
        let fields = rest.split(separator: "-", maxSplits: 2)
        guard fields.count == 3 else { return (nil, "?") }
        let device = String(fields[2].prefix { $0 != "." })
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMddHHmmss"
        return (formatter.date(from: String(fields[0] + fields[1])), device)
    }

    package var offers: [FolderOffer] { book.offers }
}
