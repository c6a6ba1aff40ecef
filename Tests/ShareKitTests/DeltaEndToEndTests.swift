import Foundation
import Testing

extension EndToEnd {
    /// A file or folder sent again after an edit: only what changed crosses (counted on the link, by a proxy), the
    /// result is the new version byte for byte, and an older peer still gets it whole.
    @Suite(.serialized) struct DeltaEndToEndTests {
        static let size = 16 << 20

        /// Sends `path` through a counting proxy; returns the sender's summary and the bytes that crossed to the
        /// receiver.
        func send(
            _ laptop: TestDevice, _ desk: TestDevice, _ path: URL, inbox: URL, extra: [String] = []
        ) throws -> (summary: [String: Any], wire: Int) {
            let (receiver, port) = try desk.startReceive(into: inbox)
            defer { receiver.stop() }
            let proxy = try TCPProxy(upstreamPort: port)
            defer { proxy.stop() }
            let sent = laptop.run(["send", path.path, "--to", "127.0.0.1:\(proxy.port)", "--json"] + extra)
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(receiver.wait(timeout: 60) == 0, "\(receiver.stderr.text)")
            return (try #require(summary(sent.stdout)), proxy.forwarded)
        }

        func edit(_ file: URL, at offset: UInt64, bytes count: Int) throws {
            let handle = try FileHandle(forWritingTo: file)
            defer { try? handle.close() }
            try handle.seek(toOffset: offset)
            handle.write(try randomData(count))
        }

        @Test func aFileSentAgainCrossesAsWhatChanged() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let file = try laptop.folder("src").appendingPathComponent("disk.img")
            try makeFile(file, size: Self.size)
            let first = try send(laptop, desk, file, inbox: inbox)
            #expect(first.wire > Self.size)
            try edit(file, at: 5_000_000, bytes: 256 << 10)
            let second = try send(laptop, desk, file, inbox: inbox)
            let received = inbox.appendingPathComponent("disk (2).img")
            #expect(FileManager.default.contentsEqual(atPath: received.path, andPath: file.path))
            // The earlier version is untouched: the new one was assembled beside it.
            #expect(
                !FileManager.default.contentsEqual(
                    atPath: inbox.appendingPathComponent("disk.img").path, andPath: file.path))
            #expect(second.wire < 600 << 10, "\(second.wire) bytes crossed")
            let fromBasis = try #require(second.summary["bytesFromEarlierVersion"] as? Int)
            #expect(fromBasis > Self.size - (1 << 20))
            // What crossed the link is what the summary says crossed (within the TLS records' overhead), apart
            // from what was made from the copy there.
            let link = try #require(second.summary["linkBytes"] as? Int)
            #expect(link + (64 << 10) >= second.wire && link < Self.size / 8, "\(link) said, \(second.wire) counted")
            // The next version is patched against the latest one.
            try edit(file, at: 100, bytes: 1000)
            let third = try send(laptop, desk, file, inbox: inbox)
            #expect(third.wire < 200 << 10, "\(third.wire) bytes crossed")
            #expect(
                FileManager.default.contentsEqual(
                    atPath: inbox.appendingPathComponent("disk (3).img").path, andPath: file.path))
            // In words: what crossed, and what was made from the copy on the desk.
            try edit(file, at: 9_000_000, bytes: 16)
            let (receiver, port) = try desk.startReceive(into: inbox)
            defer { receiver.stop() }
            let worded = laptop.run(["send", file.path, "--to", "127.0.0.1:\(port)"])
            #expect(worded.status == 0, "\(worded.stderr)")
            #expect(
                worded.stderr.range(
                    of: #"crossed \(.*/s\), .* made from the copy on 127\.0\.0\.1:\d+"#, options: .regularExpression)
                    != nil && !worded.stderr.contains("compressed"), "\(worded.stderr)")
            #expect(receiver.wait(timeout: 60) == 0)
            // The receiving side says the same.
            let said = receiver.stderr.text
            #expect(
                said.range(of: #"received .*: .* crossed, .* made from the copy here"#, options: .regularExpression)
                    != nil, "\(said)")
        }

        /// `--whole-file` sends a hello without delta, as an older share does: the file crosses whole.
        /// A file sent again into a folder on a file system that shares blocks (XFS, made and mounted for the
        /// test): what the new version has of the earlier one costs the disk nothing new, and the receiver says so.
        @Test func aFileSentAgainSharesItsUnchangedBlocksOnDisk() throws {
            let root = FileManager.default.temporaryDirectory.appendingPathComponent("share-xfs-\(UUID().uuidString)")
            let mount = root.appendingPathComponent("mnt")
            try FileManager.default.createDirectory(at: mount, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: root) }
            let image = root.appendingPathComponent("xfs.img")
            #expect(FileManager.default.createFile(atPath: image.path, contents: nil))
            try FileHandle(forWritingTo: image).truncate(atOffset: 512 << 20)
            let made = runTool("/usr/sbin/mkfs.xfs", ["-q", "-m", "reflink=1", image.path], timeout: 120)
            try #require(made.status == 0, "mkfs.xfs: \(made.output)")
            let mounted = runTool("/usr/bin/mount", ["-o", "loop", image.path, mount.path], timeout: 60)
            try #require(mounted.status == 0, "mount: \(mounted.output)")
            defer { _ = runTool("/usr/bin/umount", [mount.path], timeout: 60) }

            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = mount.appendingPathComponent("inbox")
            try FileManager.default.createDirectory(at: inbox, withIntermediateDirectories: true)
            let file = try laptop.folder("src").appendingPathComponent("disk.img")
            let size = 64 << 20
            try makeFile(file, size: size)
            _ = try send(laptop, desk, file, inbox: inbox)
            func used() -> Int {
                sync()
                var stats = statvfs()
                guard statvfs(mount.path, &stats) == 0 else { return -1 }
                return Int(stats.f_blocks - stats.f_bfree) * Int(stats.f_frsize)
            }
            let before = used()
            try edit(file, at: 8 << 20, bytes: 1 << 20)
            try edit(file, at: 40_000_000, bytes: 4096)
            let (receiver, port) = try desk.startReceive(into: inbox)
            defer { receiver.stop() }
            let again = laptop.run(["send", file.path, "--to", "127.0.0.1:\(port)", "--quiet"])
            #expect(again.status == 0, "\(again.stderr)")
            #expect(receiver.wait(timeout: 60) == 0)
            #expect(
                FileManager.default.contentsEqual(
                    atPath: inbox.appendingPathComponent("disk (2).img").path, andPath: file.path))
            let grown = used() - before
            print("a 64 MiB file sent again with 1 MiB and 4 KiB changed took \(grown >> 10) KiB more on XFS")
            #expect(grown >= 0 && grown < 8 << 20, "the new version took \(grown) bytes of the disk, not what changed")
            #expect(
                receiver.stderr.text.range(of: #"MiB sharing its blocks on disk"#, options: .regularExpression) != nil,
                "\(receiver.stderr.text)")
        }

        @Test func aSenderWithoutDeltaSendsTheWholeFile() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let file = try laptop.folder("src").appendingPathComponent("disk.img")
            try makeFile(file, size: 4 << 20)
            _ = try send(laptop, desk, file, inbox: inbox)
            try edit(file, at: 1_000_000, bytes: 4096)
            let again = try send(laptop, desk, file, inbox: inbox, extra: ["--whole-file"])
            #expect(again.wire > 4 << 20)
            #expect(again.summary["bytesFromEarlierVersion"] as? Int == 0)
            #expect(
                FileManager.default.contentsEqual(
                    atPath: inbox.appendingPathComponent("disk (2).img").path, andPath: file.path))
        }

        /// A folder sent again: its changed and new files cross, the deleted ones are gone from the new copy.
        @Test func aFolderSentAgainCrossesAsWhatChanged() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let folder = try laptop.folder("Trip")
            try FileManager.default.createDirectory(
                at: folder.appendingPathComponent("days"), withIntermediateDirectories: true)
            for n in 0..<60 { try makeFile(folder.appendingPathComponent("days/photo\(n).jpg"), size: 100_000 + n) }
            _ = try send(laptop, desk, folder, inbox: inbox)
            try edit(folder.appendingPathComponent("days/photo7.jpg"), at: 5000, bytes: 2000)
            try FileManager.default.removeItem(at: folder.appendingPathComponent("days/photo8.jpg"))
            try makeFile(folder.appendingPathComponent("days/new.jpg"), size: 30_000)
            let again = try send(laptop, desk, folder, inbox: inbox)
            #expect(again.wire < 120 << 10, "\(again.wire) bytes crossed for 32 KB changed")
            let copy = inbox.appendingPathComponent("Trip (2)")
            let listing = try FileManager.default.contentsOfDirectory(atPath: copy.appendingPathComponent("days").path)
            #expect(listing.count == 60)
            #expect(!listing.contains("photo8.jpg"))
            for name in ["photo7.jpg", "new.jpg", "photo30.jpg"] {
                #expect(
                    FileManager.default.contentsEqual(
                        atPath: copy.appendingPathComponent("days/\(name)").path,
                        andPath: folder.appendingPathComponent("days/\(name)").path), "\(name)")
            }
        }
    }
}
