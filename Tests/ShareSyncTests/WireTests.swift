import ShareProtocol
import ShareSync
import Testing

/// What crosses a folder link: index updates read back exactly, and entries a peer may send checked before anything
/// is kept.
@Suite struct WireTests {
    func entry(_ path: String, kind: FileEntry.Kind = .file, deleted: Bool = false) -> IndexRecord {
        IndexRecord(
            path: path, kind: kind.rawValue, deleted: deleted, size: kind == .file && !deleted ? 3 : 0,
            modified: 1_800_000_000_000_000_000, mode: 0o644,
            digest: kind == .file && !deleted ? Array(repeating: 7, count: 32) : [],
            target: kind == .symlink ? "../elsewhere" : "", sequence: 5, modifiedBy: 42, version: [(42, 9), (7, 3)])
    }

    @Test func anIndexUpdateReadsBackAsItWasWritten() throws {
        let update = IndexUpdate(
            folder: "abcde-fghij-klmno", indexID: "1f2e", from: 4, to: 5,
            records: [
                entry("a.txt"), entry("x", kind: .directory), entry("l", kind: .symlink), entry("gone", deleted: true),
            ])
        #expect(try IndexUpdate.decode(update.encoded()) == update)
        // Cut anywhere, or with a byte too many: refused, never read past its end.
        let bytes = update.encoded()
        for cut in [1, 10, 40, bytes.count - 1] {
            #expect(throws: ProtocolError.self) { try IndexUpdate.decode(Array(bytes.prefix(cut))) }
        }
        #expect(throws: ProtocolError.self) { try IndexUpdate.decode(bytes + [0]) }
    }

    /// A path stays inside the folder, and never names what the folder keeps for itself.
    @Test func anEntryStaysInsideItsFolder() {
        for good in ["a.txt", "chapters/one.tex", "a b/c d.txt", ".hidden/x", ".gitignore"] {
            #expect((try? FileEntry(record: entry(good))) != nil, "\(good)")
        }
        for bad in [
            "", "/etc/passwd", "../x", "a/../../x", "a//b", "a/./b", "a/", "x\u{0}y",
            String(repeating: "a", count: 300),
            ".share-partial/x", ".share-versions/a.txt", ".sharefolder", ".shareignore",
        ] {
            #expect(throws: ProtocolError.self, "\(bad)") { try FileEntry(record: entry(bad)) }
        }
    }

    /// A file without a digest of the right length, a deletion with content, a version without counters: refused.
    @Test func anEntryThatBreaksItsRulesIsRefused() {
        var noDigest = entry("a.txt")
        noDigest.digest = []
        var contentOnDeletion = entry("a.txt", deleted: true)
        contentOnDeletion.target = "x"
        var noVersion = entry("a.txt")
        noVersion.version = []
        var folderWithTarget = entry("d", kind: .directory)
        folderWithTarget.target = "x"
        for record in [noDigest, contentOnDeletion, noVersion, folderWithTarget] {
            #expect(throws: ProtocolError.self) { try FileEntry(record: record) }
        }
    }

    /// Conflict copies are named from the losing version itself, so every device names the same copy alike.
    @Test func conflictCopiesAreNamedFromTheLosingVersion() {
        let time: Int64 = 1_800_000_000 * 1_000_000_000
        #expect(
            ConflictName.make(for: "notes.txt", modified: time, device: "ABCDEFGH")
                == "notes.sync-conflict-20270115-080000-ABCDEFG.txt")
        #expect(
            ConflictName.make(for: "a/Makefile", modified: time, device: "XYZ1234")
                == "a/Makefile.sync-conflict-20270115-080000-XYZ1234")
        #expect(
            ConflictName.make(for: ".bashrc", modified: time, device: "XYZ1234")
                == ".bashrc.sync-conflict-20270115-080000-XYZ1234")
        #expect(ConflictName.original(of: "a/Makefile.sync-conflict-20270115-080000-XYZ1234") == "a/Makefile")
        #expect(ConflictName.original(of: "notes.sync-conflict-20270115-080000-ABCDEFG.txt") == "notes.txt")
        #expect(ConflictName.original(of: "notes.txt") == nil)
    }

    /// Version vectors: equal, following, concurrent; a device's counter follows wall time.
    @Test func versionVectorsOrderChanges() {
        let a = VersionVector().updated(by: 1, now: 100)
        let b = a.updated(by: 2, now: 100)
        let c = a.updated(by: 3, now: 100)
        #expect(a.compare(a) == .equal && b.compare(a) == .greater && a.compare(b) == .lesser)
        #expect(b.compare(c) == .concurrent && b.merged(with: c).dominates(b) && b.merged(with: c).dominates(c))
        #expect(a.updated(by: 1, now: 50).value(of: 1) == 101 && a.updated(by: 1, now: 500).value(of: 1) == 500)
    }
}
