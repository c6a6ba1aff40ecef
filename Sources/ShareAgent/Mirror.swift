import CoreTransferable
import Foundation
import Glibc
import ShareDisk
import ShareEngine
import ShareNet
import ShareProtocol
import ShareThreads
import ShareTrust

/// A file of a mirrored folder as the sender last saw it: what tells a change (as rsync's quick check and
/// Syncthing's scanner do) and a rename (the same inode, size and time under another name).
struct MirrorStamp: Codable, Equatable, Sendable {
    var size: UInt64
    var modified: Int64
    var nanoseconds: Int
    var inode: UInt64
}

/// The sending side of `share mirror`: what changed in the folder since the last update the device acknowledged,
/// as the items of one attempt of its outbox job. The files delivered are remembered beside the job
/// (`STATE/outbox/<id>.mirror.json`), so an agent restarted or a device that was away catches up with what it
/// missed, and nothing is sent twice.
struct MirrorPlan {
    /// Files per attempt: a large first update goes in batches (an offer holds at most 10,000 items).
    static let batch = 1000

    let job: OutboxJob
    let folder: URL
    let manifestFile: URL
    /// What the device holds, as last acknowledged.
    var delivered: [String: MirrorStamp]
    /// The folder now.
    let now: [String: MirrorStamp]
    /// Files to send (path, and where it was before a rename), and paths removed.
    var changed: [(path: String, was: String?)] = []
    var removed: [String] = []
    var more = false

    /// `changes`: where the folder changed since the last update (nil: scan it whole).
    init(job: OutboxJob, mirror: MirrorJob, outbox: URL, changes: Set<MirrorChanges.Change>? = nil) throws {
        self.job = job
        folder = URL(fileURLWithPath: mirror.folder, isDirectory: true)
        manifestFile = outbox.appendingPathComponent("\(job.id).mirror.json")
        let file = manifestFile
        delivered =
            Self.acknowledged.withLock { $0[file.path] }
            ?? (try? Data(contentsOf: manifestFile)).flatMap {
                try? JSONDecoder().decode([String: MirrorStamp].self, from: $0)
            }
            ?? [:]
        var info = stat()
        guard stat(mirror.folder, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw ShareFailure(
                .noInput, "the mirrored folder \(mirror.folder) is gone; cancel the job (share cancel \(job.id))")
        }
        // The paths that may differ from what the device holds: those in the folders read again, or all of them.
        var touched: Set<String>?
        if let changes, !delivered.isEmpty {
            // Only the folders that changed are read again; the rest is as the device acknowledged it.
            var now = delivered
            var paths: Set<String> = []
            for change in changes {
                let prefix = change.folder.isEmpty ? "" : change.folder + "/"
                for path in now.keys where path.hasPrefix(prefix) {
                    let rest = path.dropFirst(prefix.count)
                    if change.beneath || !rest.contains("/") {
                        now[path] = nil
                        paths.insert(path)
                    }
                }
                let found = Self.scan(
                    change.folder.isEmpty ? mirror.folder : mirror.folder + "/" + change.folder, beneath: change.beneath
                )
                for (path, stamp) in found {
                    now[prefix + path] = stamp
                    paths.insert(prefix + path)
                }
            }
            self.now = now
            touched = paths
        } else {
            now = Self.scan(mirror.folder)
        }
        let candidates = touched.map(Array.init) ?? Array(Set(delivered.keys).union(now.keys))
        let gone = candidates.filter { now[$0] == nil && delivered[$0] != nil }.sorted()
        var byStamp: [MirrorStamp: String] = [:]
        for path in gone { byStamp[delivered[path]!] = path }
        for path in candidates.sorted() {
            guard let stamp = now[path], delivered[path] != stamp else { continue }
            if changed.count == Self.batch {
                more = true
                break
            }
            changed.append((path, byStamp[stamp]))
        }
        // Removals go after the files (a renamed file's bytes are taken from its old name first), and only with
        // the last batch.
        removed = more ? [] : gone
    }

    var isEmpty: Bool { changed.isEmpty && removed.isEmpty }

    /// The items of this attempt: each changed file as itself, then the list of removed paths.
    func items() throws -> [OutgoingItem] {
        var files = SendItems()
        try files.add(paths: changed.map { folder.appendingPathComponent($0.path) })
        var items = try files.items(for: AccessPolicy.visibilityBeforeTheReceiverIsKnown)
        guard items.count == changed.count else {
            throw ShareFailure(.failure, "the mirrored folder changed while its update was made; it is made again")
        }
        let name = (folder.path as NSString).lastPathComponent
        for index in items.indices {
            items[index].mirror = MirrorEntry(folder: name, path: changed[index].path, was: changed[index].was)
            items[index].label = "\(name)/\(changed[index].path)"
        }
        if !removed.isEmpty {
            let list = try JSONEncoder().encode(removed)
            var item = OutgoingItem(
                id: "mirror-removals-" + String(job.id.prefix(12)), label: "\(removed.count) removed from \(name)",
                representations: [
                    OutgoingRepresentation(
                        offered: OfferedRepresentation(
                            contentType: "public.json", kind: .data, size: UInt64(list.count))
                    ) { .data(list) }
                ])
            item.mirror = MirrorEntry(folder: name, path: nil)
            items.append(item)
        }
        return items
    }

    /// Remembers what the device acknowledged: the files it holds now as they were scanned, the removals applied.
    func commit(_ report: SendReport, items: [OutgoingItem]) {
        let acknowledged = Set(report.delivered.map(\.ack.item))
        var holds = delivered
        for item in items where acknowledged.contains(item.id) {
            guard let mirror = item.mirror else { continue }
            if let path = mirror.path {
                holds[path] = now[path]
            } else {
                for path in removed { holds[path] = nil }
            }
        }
        Self.acknowledged.withLock { $0[manifestFile.path] = holds }
        guard let data = try? JSONEncoder().encode(holds) else { return }
        try? AtomicFile.write(data, to: manifestFile, mode: 0o600, durable: false)
    }

    /// What each mirror job's device acknowledged, by manifest file, once read: an update of a large folder does not
    /// read it again.
    static let acknowledged = Guarded([String: [String: MirrorStamp]]())

    /// Every regular file in `root` (and beneath it, with `beneath`; links, devices and the like are not mirrored),
    /// by path relative to it.
    static func scan(_ root: String, beneath: Bool = true) -> [String: MirrorStamp] {
        var result: [String: MirrorStamp] = [:]
        guard let top = try? Directory.open(root) else { return result }
        // Through folder handles: a link is never followed, whatever replaces a folder while it is read.
        var pending: [(Directory, String)] = [(top, "")]
        while let (directory, relative) = pending.popLast() {
            for name in directory.entries() {
                guard let info = directory.info(name) else { continue }
                let path = relative.isEmpty ? name : relative + "/" + name
                switch info.kind {
                case .file:
                    result[path] = MirrorStamp(
                        size: info.size, modified: info.modified, nanoseconds: info.modifiedNanoseconds,
                        inode: info.inode)
                case .directory where beneath:
                    if let folder = try? directory.directory(name) { pending.append((folder, path)) }
                default:
                    continue
                }
            }
        }
        return result
    }
}

extension MirrorStamp: Hashable {}

/// What the mirror watcher saw change in each job's folder since its last update: folders whose entries changed
/// (and, for a folder made, moved in or removed, everything beneath it). Nil for a job: unknown (the agent just
/// started, inotify lost events, or the periodic rescan), and the next update scans the whole folder. An update
/// takes what was seen; one that fails gives it back.
final class MirrorChanges: Sendable {
    struct Change: Hashable, Sendable {
        var folder: String
        var beneath: Bool
    }
    private let state = Guarded([String: Set<Change>?]())

    /// `folder` (relative to the job's folder; "" for itself) changed.
    func mark(_ job: String, _ folder: String, beneath: Bool) {
        state.withLock { jobs in
            guard let known = jobs[job] else { return }
            // Unknown stays unknown: the whole folder is scanned anyway.
            guard var changes = known else { return }
            changes.insert(Change(folder: folder, beneath: beneath))
            jobs[job] = .some(changes)
        }
    }

    /// Nothing is known of the job's folder: the next update scans it whole.
    func markAll(_ job: String) { state.withLock { $0[job] = .some(nil) } }

    /// What an update of the job sends: nil means everything; from now on, changes are counted afresh.
    func take(_ job: String) -> Set<Change>? {
        state.withLock { jobs in
            let taken = jobs[job] ?? nil
            jobs[job] = .some([])
            return taken
        }
    }

    /// An update that failed: what it took is seen again.
    func giveBack(_ job: String, _ taken: Set<Change>?) {
        state.withLock { jobs in
            guard let taken, let current = jobs[job] ?? nil else {
                jobs[job] = .some(nil)
                return
            }
            jobs[job] = .some(current.union(taken))
        }
    }
}
