import Foundation
import ShareTLS
import ShareNet

/// The trust store as a long-running process sees it: reloaded when the file changes, so `share trust add` takes
/// effect without a restart. A file that turns corrupt keeps the last good contents in force (and says so once).
package final class TrustCache: @unchecked Sendable {  // guarded by `lock`
    private let file: URL
    private let lock = NSLock()
    private var current: TrustStore
    private var stamp: Date?
    private var warned = false

    package init(file: URL) throws {
        self.file = file
        current = try TrustStore.load(file)
        stamp = Self.modificationDate(file)
    }

    package var store: TrustStore {
        lock.lock()
        defer { lock.unlock() }
        let now = Self.modificationDate(file)
        if now != stamp {
            do {
                current = try TrustStore.load(file)
                stamp = now
                warned = false
            } catch {
                if !warned {
                    Log.logger("share.trust").error(
                        "keeping the previous trust list", metadata: ["error": "\(error)"])
                }
                warned = true
            }
        }
        return current
    }

    package func isTrusted(_ id: DeviceID) -> Bool { store.device(id) != nil }

    private static func modificationDate(_ file: URL) -> Date? {
        (try? FileManager.default.attributesOfItem(atPath: file.path))?[.modificationDate] as? Date
    }
}
