import Foundation
import Glibc
import Testing

@testable import ShareDisk

/// What the watch reports: a file by its name (one path to look at again), a folder made or moved as everything
/// beneath it.
@Suite struct TreeWatchTests {
    /// The changes reported within a few seconds until `done` holds for them (bounded).
    private func changes(_ watch: TreeWatch, until done: ([TreeWatch.Change]) -> Bool) -> [TreeWatch.Change] {
        var seen: [TreeWatch.Change] = []
        let deadline = ContinuousClock.now + .seconds(10)
        while !done(seen), ContinuousClock.now < deadline { seen += watch.next(timeout: 0.2) }
        return seen
    }

    @Test func aFileIsReportedByNameAndAFolderAsEverythingBeneath() throws {
        let scratch = try Scratch()
        let root = scratch.inside.path
        try FileManager.default.createDirectory(
            at: scratch.inside.appendingPathComponent("notes"), withIntermediateDirectories: true)
        let watch = try TreeWatch()
        watch.add("f", root: root)
        try Data("one".utf8).write(to: scratch.inside.appendingPathComponent("notes/a.txt"))
        var seen = changes(watch) { $0.contains { $0.file == "a.txt" } }
        let file = try #require(seen.first { $0.file == "a.txt" })
        #expect(file.folder == "notes" && !file.beneath && !file.whole)
        #expect(!seen.contains { $0.file == nil && $0.folder == "notes" }, "a file's change names the file: \(seen)")

        try FileManager.default.createDirectory(
            at: scratch.inside.appendingPathComponent("notes/drafts"), withIntermediateDirectories: true)
        seen = changes(watch) { $0.contains { $0.folder == "notes/drafts" } }
        let folder = try #require(seen.first { $0.folder == "notes/drafts" })
        #expect(folder.beneath && folder.file == nil)

        try FileManager.default.removeItem(at: scratch.inside.appendingPathComponent("notes/a.txt"))
        seen = changes(watch) { $0.contains { $0.file == "a.txt" } }
        #expect(seen.contains { $0.folder == "notes" && $0.file == "a.txt" }, "a removal names the file: \(seen)")
    }
}
