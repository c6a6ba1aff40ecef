import Foundation
import ShareDisk
import Testing

@testable import ShareFolders

/// A folder's versions on a real disk: names, a second version in one second, what is listed, put back and let go.
@Suite struct FolderVersionsTests {
    func folder() throws -> (URL, Directory) {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("versions-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: url.appendingPathComponent("notes"), withIntermediateDirectories: true)
        return (url, try Directory.open(url.path))
    }

    @Test func namesCarryTheTimeBeforeTheExtension() throws {
        let time = Date(timeIntervalSince1970: 1_800_000_000)
        for name in ["plan.txt", "Makefile", ".bashrc", "archive.tar.gz"] {
            let stored = FolderVersions.stored(name, at: time)
            #expect(stored.contains("~"))
            let parsed = try #require(FolderVersions.parse(stored))
            #expect(parsed.name == name && parsed.time == time, "\(stored)")
        }
        #expect(FolderVersions.stored("plan.txt", at: time).hasSuffix(".txt"))
        #expect(FolderVersions.parse("plan~2.txt") == nil && FolderVersions.parse("plain.txt") == nil)
        let second = try #require(FolderVersions.parse("plan~20270115-080000-3.txt"))
        #expect(second.name == "plan.txt")
    }

    @Test func keptListedRestoredAndLetGo() throws {
        let (url, root) = try folder()
        defer { try? FileManager.default.removeItem(at: url) }
        let versions = FolderVersions(root: root, days: 30)
        let notes = try root.directory(components: ["notes"])
        let file = url.appendingPathComponent("notes/plan.txt")
        try Data("first\n".utf8).write(to: file)
        let early = Date(timeIntervalSinceNow: -3600)
        try versions.keep(notes, "plan.txt", path: "notes/plan.txt", now: early)
        try FileManager.default.removeItem(at: file)
        try Data("second\n".utf8).write(to: file)
        try versions.keep(notes, "plan.txt", path: "notes/plan.txt")
        try versions.keep(notes, "plan.txt", path: "notes/plan.txt")
        try FileManager.default.removeItem(at: file)
        let listed = versions.list("notes/plan.txt")
        #expect(listed.count == 3 && listed.allSatisfy { $0.path == "notes/plan.txt" }, "\(listed)")
        #expect(versions.list("notes").count == 3 && versions.list("other").isEmpty)
        // The newest, then the one kept at or before a time.
        _ = try versions.restore("notes/plan.txt")
        #expect(try String(contentsOf: file, encoding: .utf8) == "second\n")
        _ = try versions.restore("notes/plan.txt", at: early.addingTimeInterval(1))
        #expect(try String(contentsOf: file, encoding: .utf8) == "first\n")
        // What was there was kept first.
        #expect(versions.list("notes/plan.txt").count == 4)
        #expect(throws: (any Error).self) { try versions.restore("notes/plan.txt", at: early.addingTimeInterval(-60)) }
        #expect(throws: (any Error).self) { try versions.restore("notes/none.txt") }
        // Days later, every version older than the folder keeps them goes.
        #expect(versions.clean(now: Date(timeIntervalSinceNow: 30 * 86_400 + 60)) == 4)
        #expect(versions.list().isEmpty)
        // A folder that keeps none keeps none.
        try FolderVersions(root: root, days: 0).keep(notes, "plan.txt", path: "notes/plan.txt")
        #expect(versions.list().isEmpty)
    }

    /// A file whose name is near the longest a file system allows is kept all the same (under a name fitted to the
    /// limit: the version's time would pass it, and the replacement was refused), listed as the file's, restored to
    /// its whole name, and told apart from another long name alike at the start.
    @Test func versionsOfNamesNearTheLongestAreKeptListedAndRestored() throws {
        let (url, root) = try folder()
        defer { try? FileManager.default.removeItem(at: url) }
        let versions = FolderVersions(root: root, days: 30)
        let notes = try root.directory(components: ["notes"])
        let long = String(repeating: "é", count: 125) + ".txt"
        let other = String(repeating: "é", count: 124) + "x.txt"
        for (name, text) in [(long, "long\n"), (other, "other\n")] {
            try Data(text.utf8).write(to: url.appendingPathComponent("notes/" + name))
            try versions.keep(notes, name, path: "notes/" + name)
            try versions.keep(notes, name, path: "notes/" + name)
        }
        let stored = versions.list().map { $0.stored.split(separator: "/").last.map(String.init) ?? "" }
        #expect(stored.count == 4 && stored.allSatisfy { $0.utf8.count <= 255 }, "\(stored)")
        let listed = versions.list("notes/" + long)
        #expect(listed.count == 2 && listed.allSatisfy { $0.path == "notes/" + long }, "\(listed)")
        try FileManager.default.removeItem(at: url.appendingPathComponent("notes/" + long))
        _ = try versions.restore("notes/" + long)
        #expect(try String(contentsOf: url.appendingPathComponent("notes/" + long), encoding: .utf8) == "long\n")
        #expect(versions.list("notes/" + other).count == 2)
    }

    /// A small file pulled into a folder is made in its partials, then renamed into place: what an agent stopped in
    /// between left there goes when the folder is opened again; a placement of this process and a resumable partial
    /// stay.
    @Test func placementsLeftInThePartialsGoWhenTheFolderOpens() throws {
        let (url, root) = try folder()
        defer { try? FileManager.default.removeItem(at: url) }
        let partials = try root.directory(components: [".share-partial"], create: true)
        let left = ".plan.txt.tmp-\(getpid() + 1)-7"
        let mine = ".notes.md.tmp-\(getpid())-9"
        for name in [left, mine, "0123abcd.json", "0123abcd.part"] { try partials.writeAtomically(name, [1]) }
        FolderService.removeLeftPlacements(in: root)
        #expect(Set(partials.entries()) == [mine, "0123abcd.json", "0123abcd.part"])
    }
}
