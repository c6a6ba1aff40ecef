import Foundation
import Glibc
import Testing

@testable import ShareDisk

/// A scratch folder removed at the end, with a folder beside it that must never be touched.
final class Scratch {
    let root: URL
    let inside: URL
    let outside: URL

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("share-disk-\(UUID().uuidString)")
        inside = root.appendingPathComponent("inside")
        outside = root.appendingPathComponent("outside")
        try FileManager.default.createDirectory(at: inside, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        try Data("secret".utf8).write(to: outside.appendingPathComponent("secret"))
    }

    deinit { try? FileManager.default.removeItem(at: root) }

    /// Everything in the outside folder, with contents: it must stay as it was.
    var outsideState: [String: Data] {
        var result: [String: Data] = [:]
        for name in (try? FileManager.default.subpathsOfDirectory(atPath: outside.path)) ?? [] {
            result[name] = FileManager.default.contents(atPath: outside.appendingPathComponent(name).path) ?? Data()
        }
        return result
    }
}

@Suite struct DirectoryTests {
    @Test(arguments: [true, false])
    func aLinkAnywhereOnThePathIsNeverFollowed(openat2: Bool) throws {
        let scratch = try Scratch()
        let before = scratch.outsideState
        try FileManager.default.createSymbolicLink(
            at: scratch.inside.appendingPathComponent("out"), withDestinationURL: scratch.outside)
        try FileManager.default.createDirectory(
            at: scratch.inside.appendingPathComponent("a/b"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            at: scratch.inside.appendingPathComponent("a/b/up"), withDestinationURL: scratch.outside)
        // A link pointing inside is refused too: nothing beneath is ever reached through a link.
        try FileManager.default.createSymbolicLink(
            atPath: scratch.inside.appendingPathComponent("a/loop").path, withDestinationPath: "b")
        let root = try Directory.open(scratch.inside.path)
        for path in ["out", "a/b/up", "a/loop", "a/loop/up", "out/new"] {
            for create in [false, true] {
                #expect(throws: DiskError.self) {
                    _ = try root.directory(
                        components: try Directory.components(path), create: create, mode: 0o700, openat2: openat2)
                }
            }
        }
        #expect(throws: DiskError.self) { _ = try root.openFile("out", .read) }
        let b = try root.directory("a/b")
        #expect(throws: DiskError.self) { _ = try b.openFile("up", .createOrUpdate) }
        #expect(scratch.outsideState == before)
    }

    @Test(arguments: [true, false])
    func aFolderSwappedForALinkBetweenTwoCallsStopsTheSecond(openat2: Bool) throws {
        let scratch = try Scratch()
        let before = scratch.outsideState
        let root = try Directory.open(scratch.inside.path)
        _ = try root.directory(components: ["x", "y"], create: true, mode: 0o700, openat2: openat2)
        // Between two entries, "x" becomes a link leading out (the chained-link attack did this with a race).
        try FileManager.default.removeItem(at: scratch.inside.appendingPathComponent("x"))
        try FileManager.default.createSymbolicLink(
            at: scratch.inside.appendingPathComponent("x"), withDestinationURL: scratch.outside)
        let error = #expect(throws: DiskError.self) {
            _ = try root.directory(components: ["x", "y"], create: true, mode: 0o700, openat2: openat2)
        }
        #expect(error?.kind == .link)
        #expect(scratch.outsideState == before)
    }

    @Test func namesThatAreNotOneComponentAreRefused() throws {
        let scratch = try Scratch()
        let root = try Directory.open(scratch.inside.path)
        for name in ["", ".", "..", "a/b", "/etc", String(repeating: "x", count: 256), "a\u{0}b"] {
            #expect(throws: DiskError.self) { _ = try root.openFile(name, .createOrUpdate) }
        }
        for path in ["../outside", "a/../../outside", "/etc"] {
            #expect(throws: DiskError.self) { _ = try root.directory(path, create: true) }
        }
    }

    @Test func createIsExclusiveAndRenameNeverReplacesUnlessAsked() throws {
        let scratch = try Scratch()
        let root = try Directory.open(scratch.inside.path)
        let file = try root.openFile("a.txt", .create, mode: 0o640)
        try file.write([1, 2, 3][...], at: 0)
        file.close()
        #expect(root.info("a.txt")?.mode == 0o640)
        #expect(throws: DiskError.self) { _ = try root.openFile("a.txt", .create) }
        try root.writeAtomically("b.txt", [9])
        let exists = #expect(throws: DiskError.self) { try root.rename("a.txt", to: "b.txt", in: root) }
        #expect(exists?.kind == .exists)
        try root.rename("a.txt", to: "b.txt", in: root, replace: true)
        #expect(try root.readFile("b.txt") == [1, 2, 3])
        #expect(root.freeName(for: "b.txt") == "b (2).txt")
        #expect(root.freeName(for: "c.txt") == "c.txt")
    }

    @Test func aFileMadeInAStagingFolderTakesItsNameWithItsModeAndTime() throws {
        let scratch = try Scratch()
        let root = try Directory.open(scratch.inside.path)
        let staging = try root.directory(".staging", create: true)
        let target = try root.directory("docs", create: true)
        try target.writeAtomically("old.txt", [1])
        let modified: Int64 = 1_600_000_000_123_456_789
        try target.writeAtomically(
            "old.txt", [4, 5, 6], mode: 0o751, modifiedNanoseconds: modified, staging: staging)
        #expect(try target.readFile("old.txt") == [4, 5, 6])
        let info = try #require(target.info("old.txt"))
        #expect(info.mode == 0o751)
        #expect(info.modified * 1_000_000_000 + Int64(info.modifiedNanoseconds) == modified)
        // Nothing is left behind, in the staging folder or beside the file.
        #expect(staging.entries().isEmpty)
        #expect(target.entries() == ["old.txt"])
        // A name that cannot be taken (a folder with files in it is there) leaves no temporary file either.
        let inTheWay = try target.directory("full", create: true)
        try inTheWay.writeAtomically("x", [1])
        #expect(throws: DiskError.self) {
            try target.writeAtomically("full", [7], mode: 0o644, modifiedNanoseconds: nil, staging: staging)
        }
        #expect(staging.entries().isEmpty)
    }

    @Test func aNewFileAppearsWholeAtAFreeNameAndNeverReplacesOne() throws {
        let scratch = try Scratch()
        let root = try Directory.open(scratch.inside.path)
        let target = try root.directory("docs", create: true)
        let modified: Int64 = 1_600_000_000_123_456_789
        let umask = Glibc.umask(0o077)
        defer { _ = Glibc.umask(umask) }
        // This machine's file systems make unnamed files: a file system that cannot answers false.
        let made = try #require(try target.writeNew("new.txt", [4, 5, 6], mode: 0o751, modifiedNanoseconds: modified))
        #expect(try target.readFile("new.txt") == [4, 5, 6])
        let info = try #require(target.info("new.txt"))
        #expect(info.mode == 0o751)
        // What it answers is what a look at the name sees.
        #expect(made == info)
        #expect(info.modified * 1_000_000_000 + Int64(info.modifiedNanoseconds) == modified)
        #expect(target.entries() == ["new.txt"])
        // A name taken (a file, a folder) is refused and what holds it is left as it was.
        let taken = #expect(throws: DiskError.self) {
            _ = try target.writeNew("new.txt", [7], mode: 0o644, modifiedNanoseconds: nil)
        }
        #expect(taken?.kind == .exists)
        #expect(try target.readFile("new.txt") == [4, 5, 6])
        _ = try target.directory("sub", create: true)
        #expect(throws: DiskError.self) { _ = try target.writeNew("sub", [7], mode: 0o644, modifiedNanoseconds: nil) }
        #expect(Set(target.entries()) == ["new.txt", "sub"])
        #expect(throws: DiskError.self) {
            _ = try target.writeNew("../escape", [7], mode: 0o644, modifiedNanoseconds: nil)
        }
    }

    @Test func aFileReadLeavingItsAccessTimeKeepsIt() throws {
        let scratch = try Scratch()
        let root = try Directory.open(scratch.inside.path)
        let file = try root.openFile("read.txt", .create, mode: 0o644)
        try file.write([1, 2, 3][...], at: 0)
        file.close()
        // An access time a day before the modification time: any read through a plain open (relatime or
        // strictatime) writes a new one.
        func age() throws {
            var times = [
                timespec(tv_sec: 1_600_000_000, tv_nsec: 0), timespec(tv_sec: 1_600_086_400, tv_nsec: 0),
            ]
            #expect(utimensat(root.fd, "read.txt", &times, AT_SYMLINK_NOFOLLOW) == 0)
        }
        func accessed() -> Int {
            var st = stat()
            fstatat(root.fd, "read.txt", &st, AT_SYMLINK_NOFOLLOW)
            return st.st_atim.tv_sec
        }
        func read(_ access: Directory.Access) throws {
            let opened = try root.openFile("read.txt", access)
            defer { opened.close() }
            #expect(try opened.readAll(limit: 16) == [1, 2, 3])
        }
        try age()
        try read(.readLeavingAccessTime)
        #expect(accessed() == 1_600_000_000)
        // The same read through a plain open does change it (unless this file system never writes access times).
        try age()
        try read(.read)
        let mounted = (try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8)) ?? ""
        if !mounted.contains("noatime") { #expect(accessed() != 1_600_000_000) }
    }

    @Test func removingATreeRemovesLinksWithoutFollowingThem() throws {
        let scratch = try Scratch()
        let before = scratch.outsideState
        let root = try Directory.open(scratch.inside.path)
        let deep = try root.directory("t/u/v", create: true)
        try deep.symlink("escape", target: scratch.outside.path)
        try deep.writeAtomically("f", [1])
        deep.setMode(0o000)
        #expect(try root.removeTree("t"))
        #expect(root.info("t") == nil)
        #expect(scratch.outsideState == before)
    }

    @Test func aLockIsHeldByOneSessionAtATime() throws {
        let scratch = try Scratch()
        let first = try Directory.open(scratch.inside.path)
        let second = try Directory.open(scratch.inside.path)
        let held = try #require(try first.tryLock("item.lock"))
        #expect(try second.tryLock("item.lock") == nil)
        held.release()
        #expect(try second.tryLock("item.lock") != nil)
    }

    @Test func theFoldersOfAFolderAreItsFoldersOnly() throws {
        let scratch = try Scratch()
        let inside = scratch.inside
        for name in ["a", "b c", ".hidden"] {
            try FileManager.default.createDirectory(
                at: inside.appendingPathComponent(name), withIntermediateDirectories: false)
        }
        try Data("x".utf8).write(to: inside.appendingPathComponent("file"))
        try FileManager.default.createSymbolicLink(
            at: inside.appendingPathComponent("link to a"), withDestinationURL: inside.appendingPathComponent("a"))
        try FileManager.default.createSymbolicLink(
            at: inside.appendingPathComponent("link out"), withDestinationURL: scratch.outside)
        #expect(mkfifo(inside.appendingPathComponent("pipe").path, 0o600) == 0)
        let directory = try Directory.open(inside.path)
        #expect(Set(directory.folderEntries()) == ["a", "b c", ".hidden"])
        #expect(directory.folderEntries().count == 3)
        #expect(Set(directory.entries()) == ["a", "b c", ".hidden", "file", "link to a", "link out", "pipe"])
    }
}
