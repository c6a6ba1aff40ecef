import Foundation
import ShareDisk
import ShareEngine
import ShareProtocol
import ShareSyncStore
import ShareTLS
import Synchronization
import Testing

@testable import ShareFolders

/// What a holder keeps of the small files it just served: found by folder and digest, bounded in bytes, gone a few
/// seconds after it was kept.
@Suite struct ServedContentsTests {
    /// A clock the test moves.
    final class Clock: Sendable {
        let seconds = Mutex<Double>(100)
        func advance(_ by: Double) { seconds.withLock { $0 += by } }
    }

    func digest(_ n: Int) -> [UInt8] { (0..<32).map { UInt8(truncatingIfNeeded: n &+ $0) } }

    @Test func keptContentsAreFoundByFolderAndDigestOnly() {
        let clock = Clock()
        let served = ServedContents(capacity: 1000, seconds: 5, now: { clock.seconds.withLock { $0 } })
        served.keep([1, 2, 3], digest: digest(1), in: "folder-a")
        #expect(served.contents(digest(1), in: "folder-a") == [1, 2, 3])
        // Another folder's request for the same content reads its own file.
        #expect(served.contents(digest(1), in: "folder-b") == nil)
        #expect(served.contents(digest(2), in: "folder-a") == nil)
    }

    @Test func contentsGoAfterTheirSecondsEvenWhenNothingElseComes() {
        let clock = Clock()
        let served = ServedContents(capacity: 1000, seconds: 5, now: { clock.seconds.withLock { $0 } })
        served.keep([1], digest: digest(1), in: "f")
        clock.advance(3)
        served.keep([2], digest: digest(2), in: "f")
        clock.advance(2.5)
        #expect(served.contents(digest(1), in: "f") == nil)
        #expect(served.contents(digest(2), in: "f") == [2])
        clock.advance(3)
        // The agent's once-a-second call: an idle agent holds nothing (and is told when the last went).
        #expect(served.expire())
        #expect(served.count == 0)
        #expect(!served.expire())
    }

    @Test func theOldestGoWhenTheBytesWouldPassTheCapacity() {
        let clock = Clock()
        let served = ServedContents(capacity: 1000, seconds: 5, now: { clock.seconds.withLock { $0 } })
        for n in 0..<25 { served.keep([UInt8](repeating: UInt8(n), count: 100), digest: digest(n), in: "f") }
        #expect(served.count == 10)
        #expect(served.contents(digest(14), in: "f") == nil)
        #expect(served.contents(digest(15), in: "f") == [UInt8](repeating: 15, count: 100))
        // Nothing larger than a tenth of the capacity is kept.
        served.keep([UInt8](repeating: 0, count: 101), digest: digest(99), in: "f")
        #expect(served.contents(digest(99), in: "f") == nil)
    }

    @Test func contentsKeptAgainAreCountedOnceAndDroppedAtTheirLaterPlace() {
        let clock = Clock()
        let served = ServedContents(capacity: 300, seconds: 5, now: { clock.seconds.withLock { $0 } })
        served.keep([UInt8](repeating: 1, count: 30), digest: digest(1), in: "f")
        clock.advance(4)
        // Two devices' serves both read it (neither found it kept): kept again, later.
        served.keep([UInt8](repeating: 1, count: 30), digest: digest(1), in: "f")
        clock.advance(2)
        #expect(served.contents(digest(1), in: "f") != nil)
        // Room for ten of 30 bytes: the one kept twice counts once.
        for n in 2...10 { served.keep([UInt8](repeating: 2, count: 30), digest: digest(n), in: "f") }
        #expect(served.count == 10)
        #expect(served.contents(digest(1), in: "f") != nil)
        clock.advance(4)
        #expect(served.contents(digest(1), in: "f") == nil)
        #expect(served.count == 9)
    }
}

/// The attack on what a holder keeps: a device the folder is shared with names, at a path that holds other content,
/// the digest of a file just served (and kept) for another device, or a path that is no file of the folder. What a
/// pull is offered comes from the index's entry at each path it names, checked before anything kept is looked at.
@Suite struct ServedContentsAttackTests {
    @Test func aPullNamingKeptContentAtAnotherPathIsOfferedNothing() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("served-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: url) }
        let tree = url.appendingPathComponent("tree")
        // The folder's marker, as a folder shared here has it.
        try FileManager.default.createDirectory(
            at: tree.appendingPathComponent(".sharefolder"), withIntermediateDirectories: true)
        let alpha = Array("the contents of a, served a moment ago\n".utf8)
        try Data(alpha).write(to: tree.appendingPathComponent("a.txt"))
        // Of the same size: only the digest tells them apart.
        try Data("the contents of b, and not a's at all.\n".utf8).write(to: tree.appendingPathComponent("b.txt"))
        let database = try Database(path: url.appendingPathComponent("f.db").path)
        try SQLiteFolderStore.prepare(database)
        let folder = try SharedFolder(
            settings: SharedFolderSettings(id: "aaaaa-bbbbb-ccccc", label: "tree", path: tree.path, devices: []),
            root: try Directory.open(tree.path), database: database, me: 1)
        let entries = folder.withFolder { $0.sync.scan() }
        let a = try #require(entries.first { $0.path == "a.txt" })
        // a.txt went to another device: its checked bytes are kept.
        let served = ServedContents()
        served.keep(alpha, digest: a.digest, in: folder.id)
        #expect(served.contents(a.digest, in: folder.id) == alpha)

        let hostile = ["b.txt", "c.txt", "../tree/a.txt", "/a.txt", ".share-partials/a.txt"].enumerated().map {
            FolderPull.Item(ref: "\($0.offset)", path: $0.element, digest: a.digest.hexString, size: a.size)
        }
        #expect(SyncFileSource.sources(hostile, folder: folder).isEmpty)
        // What the device may have: a.txt, at the content the index names there.
        let fair = FolderPull.Item(ref: "fair", path: "a.txt", digest: a.digest.hexString, size: a.size)
        #expect(SyncFileSource.sources([fair], folder: folder).map(\.offer.id) == ["fair"])
    }
}
