import Synchronization
import FoundationEssentials
import Glibc
import ShareTLS
import ShareNet
import ShareTrust
import ShareProtocol
import CoreTransferable
import UniformTypeIdentifiers

/// The trust store as a long-running process sees it: reloaded when the file changes, so `share trust add` takes
/// effect without a restart. A file that turns corrupt keeps the last good contents in force (and says so once).
package final class TrustCache: Sendable {
    private let file: URL
    private let path: String
    private struct Loaded {
        var current: TrustStore
        var stamp: Stamp?
        var warned = false
    }
    private let loaded: Mutex<Loaded>

    package init(file: URL) throws {
        self.file = file
        path = file.path
        loaded = Mutex(Loaded(current: try TrustStore.load(file), stamp: Self.stamp(path)))
    }

    package var store: TrustStore {
        loaded.withLock { loaded in
            let now = Self.stamp(path)
            if now != loaded.stamp {
                do {
                    loaded.current = try TrustStore.load(file)
                    loaded.stamp = now
                    loaded.warned = false
                } catch {
                    if !loaded.warned {
                        Log.logger("share.trust").error(
                            "keeping the previous trust list", metadata: ["error": "\(error)"])
                    }
                    loaded.warned = true
                }
            }
            return loaded.current
        }
    }

    package func isTrusted(_ id: DeviceID) -> Bool { store.device(id) != nil }

    /// What tells one version of the file from the next: a save replaces it (another inode) or rewrites it (another
    /// size or change time). One `stat`, asked on every policy question: no attribute dictionary, no user lookups.
    private struct Stamp: Equatable {
        var inode: UInt64
        var size: Int64
        var modified: timespec
        var changed: timespec

        static func == (a: Stamp, b: Stamp) -> Bool {
            a.inode == b.inode && a.size == b.size && a.modified.tv_sec == b.modified.tv_sec
                && a.modified.tv_nsec == b.modified.tv_nsec && a.changed.tv_sec == b.changed.tv_sec
                && a.changed.tv_nsec == b.changed.tv_nsec
        }
    }

    private static func stamp(_ path: String) -> Stamp? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Stamp(
            inode: UInt64(info.st_ino), size: Int64(info.st_size), modified: info.st_mtim, changed: info.st_ctim)
    }
}
