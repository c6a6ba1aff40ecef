import Foundation
import Glibc
import ShareDisk
import ShareSync
import Testing

@testable import ShareFolders

/// A folder's first scan reads its files ahead, as they were listed: what changed after the listing (rewritten,
/// replaced, made a pipe or a folder) is left to the scan, and a pipe is never waited on.
@Suite struct ReadAheadTests {
    @Test func onlyWhatIsStillAsListedIsReadAhead() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("read-ahead-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: url.appendingPathComponent("sub"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: url) }
        let names = ["same", "sub/same", "longer", "replaced", "pipe", "folder", "gone", "empty"]
        for name in names {
            try Data((name == "empty" ? "" : "the content of \(name)\n").utf8).write(
                to: url.appendingPathComponent(name))
        }
        let root = try Directory.open(url.path)
        // Listed as the folder's listing does (a stamp of each name), then changed behind the listing's back.
        var listed: [(path: String, stamp: DiskStamp)] = []
        for name in names {
            let parts = name.split(separator: "/").map(String.init)
            let directory = try root.directory(components: Array(parts.dropLast()))
            listed.append((name, try #require(directory.info(parts.last!).flatMap(DiskFolder.stamp))))
        }
        let handle = try FileHandle(forWritingTo: url.appendingPathComponent("longer"))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("more\n".utf8))
        try handle.close()
        try Data("the content of replaced\n".utf8).write(to: url.appendingPathComponent("replaced.new"))
        #expect(
            rename(url.appendingPathComponent("replaced.new").path, url.appendingPathComponent("replaced").path) == 0)
        try FileManager.default.removeItem(at: url.appendingPathComponent("pipe"))
        #expect(mkfifo(url.appendingPathComponent("pipe").path, 0o600) == 0)
        try FileManager.default.removeItem(at: url.appendingPathComponent("folder"))
        try FileManager.default.createDirectory(
            at: url.appendingPathComponent("folder"), withIntermediateDirectories: false)
        try FileManager.default.removeItem(at: url.appendingPathComponent("gone"))

        let read = DiskFolder.readAhead(listed, in: root)
        #expect(Set(read.keys) == ["same", "sub/same", "empty"])
        for path in read.keys {
            let parts = path.split(separator: "/").map(String.init)
            let directory = try root.directory(components: Array(parts.dropLast()))
            let stamp = try #require(listed.first { $0.path == path }?.stamp)
            let digest = try DiskFolder.digest(directory, parts.last!, size: stamp.size)
            #expect(read[path]?.1.digest == digest)
            #expect(read[path]?.0 == stamp)
        }
    }

    /// A holder serves a small file by reading it and then looking at what it read: one that became a pipe, or was
    /// rewritten, after the index recorded it is left out, and the pipe is never waited on.
    @Test func aSmallFileServedIsWhatTheIndexRecordedOrNothing() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("serve-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: url) }
        let root = try Directory.open(url.path)
        var recorded: [String: DiskStamp] = [:]
        for name in ["same", "pipe", "rewritten"] {
            try Data("the content of \(name)\n".utf8).write(to: url.appendingPathComponent(name))
            // Bound first: required into the dictionary's optional value, the check could not fail.
            let stamp: DiskStamp = try #require(root.info(name).flatMap(DiskFolder.stamp))
            recorded[name] = stamp
        }
        try FileManager.default.removeItem(at: url.appendingPathComponent("pipe"))
        #expect(mkfifo(url.appendingPathComponent("pipe").path, 0o600) == 0)
        try Data("the content of rewritten, longer\n".utf8).write(to: url.appendingPathComponent("rewritten"))
        #expect(SyncFileSource.read("same", in: root, stamp: recorded["same"]!) == Array("the content of same\n".utf8))
        #expect(SyncFileSource.read("pipe", in: root, stamp: recorded["pipe"]!) == nil)
        #expect(SyncFileSource.read("rewritten", in: root, stamp: recorded["rewritten"]!) == nil)
    }
}
