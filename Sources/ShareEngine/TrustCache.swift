import Synchronization
import FoundationEssentials
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
        var stamp: PosixFiles.Stamp?
        var warned = false
    }
    private let loaded: Mutex<Loaded>

    package init(file: URL) throws {
        self.file = file
        path = file.path
        loaded = Mutex(Loaded(current: try TrustStore.load(file), stamp: PosixFiles.stamp(path)))
    }

    package var store: TrustStore {
        loaded.withLock { loaded in
            let now = PosixFiles.stamp(path)
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
}
