import Foundation
import Glibc
import ShareDisk
import ShareEngine
import ShareNet
import ShareThreads

/// Watches the folders of the agent's mirror jobs (inotify, one watch per folder beneath each) and queues a job
/// again about a second after its folder last began to change, so a burst of changes (an editor's save, a copy of
/// many files) goes as one update. Every `rescan` seconds each job is queued anyway, as a safety net for what inotify
/// does not report (an overflow of its queue, more folders than its watch limit, a network file system): its
/// attempt scans the folder and sends nothing when nothing changed.
package final class MirrorWatcher: AgentPart, Sendable {
    package let partName = "mirror watcher"
    private let outbox: Outbox
    /// Where each job's folder changed, for its next update to read only that.
    let changes: MirrorChanges
    /// How long after the first change of a burst the update goes.
    static let settle: Double = 1
    /// Seconds between safety-net rescans.
    let rescan: Double

    private struct State {
        var stopping = false
        var running = false
    }
    private let state = Guarded(State())
    private static let log = Log.logger("share.mirror")

    init(outbox: Outbox, changes: MirrorChanges) {
        self.outbox = outbox
        self.changes = changes
        rescan = ProcessInfo.processInfo.environment["SHARE_MIRROR_RESCAN_SECONDS"].flatMap(Double.init) ?? 300
    }

    package func start(failed: @escaping @Sendable (Error) -> Void) throws {
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else {
            throw PartFailure(part: partName, reason: "inotify: \(String(cString: strerror(errno)))")
        }
        state.withLock {
            $0.stopping = false
            $0.running = true
        }
        Threads.start(name: "share-mirror") { [self] in
            loop(fd)
            close(fd)
            let asked = state.withLock { state in
                state.running = false
                return state.stopping
            }
            if !asked { failed(PartFailure(part: partName, reason: "its thread ended")) }
        }
    }

    package func stop() {
        state.withLock { $0.stopping = true }
        state.wait { !$0.running }
    }

    /// What is watched: each watch's job and folder, and each job's folder and watches.
    private struct Watches {
        var byDescriptor: [Int32: (job: String, path: String)] = [:]
        var jobs: [String: (folder: String, descriptors: Set<Int32>)] = [:]
        var warnedFull = false
    }

    private static let mask = UInt32(
        IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF
            | IN_MOVE_SELF)

    private func loop(_ fd: Int32) {
        var watches = Watches()
        var due: [String: ContinuousClock.Instant] = [:]
        var nextRescan = ContinuousClock.now + .seconds(rescan)
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while !state.withLock({ $0.stopping }) {
            reconcile(fd, &watches, due: &due)
            let now = ContinuousClock.now
            let nearest = due.values.min().map { max(0, ($0 - now).seconds) } ?? 0.5
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&poller, 1, Int32(min(0.5, nearest) * 1000))
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                guard n > 0 else { break }
                handle(buffer[0..<n], fd: fd, &watches, due: &due)
            }
            let after = ContinuousClock.now
            for (job, when) in due where when <= after {
                due[job] = nil
                outbox.poke(job)
            }
            if after >= nextRescan {
                nextRescan = after + .seconds(rescan)
                for job in watches.jobs.keys {
                    changes.markAll(job)
                    outbox.poke(job)
                }
            }
        }
        for descriptor in watches.byDescriptor.keys { inotify_rm_watch(fd, descriptor) }
    }

    /// Watches the folders of mirror jobs that started, forgets those of jobs that ended.
    private func reconcile(_ fd: Int32, _ watches: inout Watches, due: inout [String: ContinuousClock.Instant]) {
        let active = outbox.all.filter { $0.mirror != nil && !$0.state.isFinal }
        let ids = Set(active.map(\.id))
        for (job, entry) in watches.jobs where !ids.contains(job) {
            for descriptor in entry.descriptors {
                inotify_rm_watch(fd, descriptor)
                watches.byDescriptor[descriptor] = nil
            }
            watches.jobs[job] = nil
            due[job] = nil
        }
        for job in active where watches.jobs[job.id] == nil {
            let folder = job.mirror!.folder
            watches.jobs[job.id] = (folder, [])
            addTree(fd, job: job.id, path: folder, &watches)
            // What changed before the watches were in place is found by a scan.
            changes.markAll(job.id)
            outbox.poke(job.id)
        }
    }

    /// Watches `path` and every folder beneath it.
    private func addTree(_ fd: Int32, job: String, path: String, _ watches: inout Watches) {
        var pending = [path]
        while let directory = pending.popLast() {
            let descriptor = inotify_add_watch(fd, directory, Self.mask)
            guard descriptor >= 0 else {
                if errno == ENOSPC, !watches.warnedFull {
                    watches.warnedFull = true
                    Self.log.warning(
                        "the inotify watch limit is reached; changes beneath some folders are found by the rescan only",
                        metadata: ["folder": "\(directory)"])
                }
                continue
            }
            watches.byDescriptor[descriptor] = (job, directory)
            watches.jobs[job]?.descriptors.insert(descriptor)
            guard let folder = try? Directory.open(directory) else { continue }
            for name in folder.entries() where folder.info(name)?.kind == .directory {
                pending.append(directory + "/" + name)
            }
        }
    }

    private func handle(
        _ bytes: ArraySlice<UInt8>, fd: Int32, _ watches: inout Watches, due: inout [String: ContinuousClock.Instant]
    ) {
        let settled = ContinuousClock.now + .seconds(Self.settle)
        var offset = bytes.startIndex
        while bytes.endIndex - offset >= 16 {
            let (descriptor, mask, length) = bytes[offset..<(offset + 16)].withUnsafeBytes { raw in
                (
                    raw.loadUnaligned(fromByteOffset: 0, as: Int32.self),
                    raw.loadUnaligned(fromByteOffset: 4, as: UInt32.self),
                    Int(raw.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
                )
            }
            let nameBytes = bytes[(offset + 16)..<min(bytes.endIndex, offset + 16 + length)]
            let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
            offset += 16 + length
            if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                // Events were lost: every folder is scanned.
                for job in watches.jobs.keys {
                    changes.markAll(job)
                    if due[job] == nil { due[job] = settled }
                }
                continue
            }
            guard let (job, path) = watches.byDescriptor[descriptor] else { continue }
            if mask & UInt32(IN_IGNORED) != 0 {
                watches.byDescriptor[descriptor] = nil
                watches.jobs[job]?.descriptors.remove(descriptor)
                continue
            }
            if mask & UInt32(IN_ISDIR) != 0, mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0, !name.isEmpty {
                addTree(fd, job: job, path: path + "/" + name, &watches)
            }
            // Where it changed, relative to the job's folder: the folder's entries, or, for a folder made, moved
            // or removed, everything beneath it; the job's folder itself moved or removed: everything.
            if let root = watches.jobs[job]?.folder {
                let relative = path == root ? "" : String(path.dropFirst(root.count + 1))
                if mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF) != 0, path == root {
                    changes.markAll(job)
                } else if mask & UInt32(IN_ISDIR) != 0, !name.isEmpty {
                    changes.mark(job, relative.isEmpty ? name : relative + "/" + name, beneath: true)
                } else {
                    changes.mark(job, relative, beneath: false)
                }
            }
            if due[job] == nil { due[job] = settled }
        }
    }
}
