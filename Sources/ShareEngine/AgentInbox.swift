import CoreTransferable
import FoundationEssentials
import Logging
import ServiceLifecycle
import ShareDisk
import ShareProtocol
import ShareTLS
import Synchronization
import ShareNet
import ShareTrust
import UniformTypeIdentifiers

/// What an agent receives and where it keeps it.
package struct AgentInbox: Sendable {
    /// Items land in `<directory>/<peer name>/`; text and URLs in `<directory>/history.jsonl`.
    package var directory: URL
    package var accept: AcceptList
    package var maxSize: UInt64?

    package init(directory: URL, accept: AcceptList = ReceiveOptions.everything, maxSize: UInt64? = nil) {
        self.directory = directory
        self.accept = accept
        self.maxSize = maxSize
    }

    package var history: TextHistory { TextHistory(file: directory.appendingPathComponent("history.jsonl")) }

    /// One received item: a file or a folder in a device's folder.
    package struct Received: Sendable {
        package var name: String
        package var folder: Bool
        package var size: UInt64
        package var modified: Int64
    }

    /// Sizes already walked, by folder path and the folder's modification time: a received folder is moved into
    /// place whole, so its size is walked once, not each time the page asks for its state (three times a second).
    private static let walked = Mutex<[String: (modified: Int64, size: UInt64)]>([:])

    /// `contentSize` of the received folder `name` in `peer`, walked once per version of it.
    static func folderSize(_ name: String, in peer: Directory, modified: Int64) -> UInt64 {
        let key = peer.path + "/" + name
        if let known = walked.withLock({ $0[key] }), known.modified == modified { return known.size }
        let size = (try? peer.directory(name)).map(contentSize) ?? 0
        walked.withLock { cache in
            if cache.count > 4096 { cache.removeAll() }
            cache[key] = (modified, size)
        }
        return size
    }

    /// The bytes of the files in `folder` and below (links not followed), counting at most 100,000 entries: what a
    /// received folder holds, as a person reads its size.
    static func contentSize(_ folder: Directory) -> UInt64 {
        var total: UInt64 = 0
        var budget = 100_000
        func walk(_ directory: Directory) {
            for name in directory.entries() {
                budget -= 1
                guard budget > 0, let info = directory.info(name) else { return }
                switch info.kind {
                case .file: total &+= info.size
                case .directory: if let inner = try? directory.directory(name) { walk(inner) }
                default: break
                }
            }
        }
        walk(folder)
        return total
    }

    /// What each device sent, by device folder (names sorted; hidden partials left out), as `share inbox` and the
    /// page list it.
    package func listing() -> [(name: String, items: [Received])] {
        guard let root = try? Directory.open(directory.path) else { return [] }
        return root.entries().filter { !$0.hasPrefix(".") && root.info($0)?.kind == .directory }.sorted().compactMap {
            name in
            guard let peer = try? root.directory(name) else { return nil }
            let items = peer.entries().filter { !$0.hasPrefix(".") }.sorted().compactMap { item -> Received? in
                guard let info = peer.info(item), info.kind == .file || info.kind == .directory else { return nil }
                let size =
                    info.kind == .directory ? Self.folderSize(item, in: peer, modified: info.modified) : info.size
                return Received(name: item, folder: info.kind == .directory, size: size, modified: info.modified)
            }
            return (name, items)
        }
    }
}
