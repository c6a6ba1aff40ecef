import FoundationEssentials
import ShareText
import ShareDisk
import ShareSync

extension FolderService {
    /// Watches every shared folder (inotify through ShareDisk's `TreeWatch`) and hands each folder's worker where it
    /// changed once a burst of changes settles (`settle`, `settleGap`, `settleLongest`): a save of many files is
    /// one scan.
    func watcher() {
        guard let watch = try? TreeWatch() else {
            Self.log.warning("folders are not watched (inotify): changes are found by the rescans only")
            return
        }
        watch.skipAtRoot = [SyncNames.partials, SyncNames.versions, SyncNames.marker]
        var watched: [String: String] = [:]
        var gathered: [String: [String: Bool]] = [:]
        // Files that changed, by folder id: each is scanned alone (a pull that wrote a thousand files across a
        // hundred folders costs a thousand looks, not a listing of those hundred folders).
        var files: [String: Set<String>] = [:]
        var whole: Set<String> = []
        var due: ContinuousClock.Instant?
        var burst: ContinuousClock.Instant?
        var warned = false
        while !stopping {
            let open = folders
            for folder in open {
                let path = folder.settings.path
                if watched[folder.id] != path {
                    watch.add(folder.id, root: path)
                    watched[folder.id] = path
                    // What changed before the watches were in place is found by a scan.
                    folder.touch(paths: [], scan: nil)
                }
            }
            for id in watched.keys where !open.contains(where: { $0.id == id }) {
                watch.remove(id)
                watched[id] = nil
            }
            if watch.full, !warned {
                warned = true
                Self.log.warning("the inotify watch limit is reached; some changes are found by the rescans only")
            }
            let wait = due.map { max(0, ($0 - ContinuousClock.now).seconds) } ?? 0.5
            for change in watch.next(timeout: min(0.5, wait)) {
                if change.whole {
                    whole.insert(change.id)
                } else if let name = change.file,
                    // A name not in NFC is renamed to its NFC form by the listing of its folder (DiskFolder.list),
                    // and one that is not UTF-8 is listed there as left out (or no longer, once it is gone).
                    name.utf8.elementsEqual(name.precomposed.utf8), !name.unicodeScalars.contains("\u{FFFD}")
                {
                    files[change.id, default: []].insert(change.folder.isEmpty ? name : change.folder + "/" + name)
                } else {
                    gathered[change.id, default: [:]][change.folder] =
                        (gathered[change.id]?[change.folder] ?? false) || change.beneath
                }
                let now = ContinuousClock.now
                let began = burst ?? now
                burst = began
                due = min(
                    began + .seconds(Self.settleLongest),
                    max(began + .seconds(Self.settle), now + .seconds(Self.settleGap)))
            }
            guard let when = due, ContinuousClock.now >= when else { continue }
            due = nil
            burst = nil
            for folder in open {
                if whole.contains(folder.id) {
                    folder.touch(paths: [], scan: nil)
                } else {
                    if let changes = gathered[folder.id] {
                        run.withLock { run in
                            run.watchChanges[folder.id] = (run.watchChanges[folder.id] ?? [:])
                                .merging(changes) { $0 || $1 }
                        }
                        folder.touch(paths: [], scan: Set(changes.keys))
                    }
                    if let changed = files[folder.id] { folder.rescan(changed) }
                }
            }
            gathered = [:]
            files = [:]
            whole = []
        }
    }
}
