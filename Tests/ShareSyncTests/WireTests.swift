@testable import ShareProtocol
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

    /// A pull reads back as it was written in both its forms; the binary one cut short, padded, or claiming more
    /// items than it could hold is refused before anything is kept.
    @Test func aPullReadsBackInBothForms() throws {
        let pull = FolderPull(
            folder: "abcde-fghij-klmno",
            items: [
                .init(ref: "3f2a9c", path: "chapters/one.tex", digest: String(repeating: "ab", count: 32), size: 1234),
                .init(ref: "77", path: "ä b/c\"d.txt", digest: "00", size: 0, basis: "AAEC"),
            ])
        for binary in [false, true] {
            let frame = pull.frame(.folderPull, binary: binary)
            #expect(frame.payload.first == (binary ? 0x01 : UInt8(ascii: "{")))
            #expect(try FolderPull.decode(frame) == pull)
        }
        let bytes = pull.frame(.folderPull, binary: true).payload
        for cut in [1, 2, 10, 25, bytes.count - 1] {
            #expect(throws: ProtocolError.self) {
                try FolderPull.decode(Frame(type: .folderPull, payload: Array(bytes.prefix(cut))))
            }
        }
        #expect(throws: ProtocolError.self) { try FolderPull.decode(Frame(type: .folderPull, payload: bytes + [0])) }
        // A count of four billion items in a few bytes.
        var huge = bytes
        let count = 2 + pull.folder.utf8.count
        huge.replaceSubrange(count..<count + 4, with: [0xFF, 0xFF, 0xFF, 0xFF])
        #expect(throws: ProtocolError.self) { try FolderPull.decode(Frame(type: .folderPull, payload: huge)) }
        // The rules of either form: no items, an empty ref, a folder ID that is not one.
        for bad in [
            FolderPull(folder: pull.folder, items: []),
            FolderPull(folder: pull.folder, items: [.init(ref: "", path: "a", digest: "00", size: 1)]),
            FolderPull(folder: "../x", items: pull.items),
        ] {
            for binary in [false, true] {
                #expect(throws: ProtocolError.self) { try FolderPull.decode(bad.frame(.folderPull, binary: binary)) }
            }
        }
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

    /// The path check, one pass over the bytes, agrees with its definition (parts split at `/`, none empty, `.` or
    /// `..`, none over 255 bytes, no NUL, 4096 bytes in all) on paths made of the characters that matter.
    @Test func thePathCheckAgreesWithItsDefinition() {
        func defined(_ path: String) -> Bool {
            !path.isEmpty && path.utf8.count <= Limits.maxPathBytes && !path.utf8.contains(0)
                && path.split(separator: "/", omittingEmptySubsequences: false).allSatisfy {
                    !$0.isEmpty && $0 != "." && $0 != ".." && $0.utf8.count <= 255
                }
        }
        let pieces = ["/", ".", "..", "...", "a", "é", "\u{0}", "x.y", String(repeating: "b", count: 254), " "]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let path = (0..<Int.random(in: 0...6, using: &generator)).map { _ in
                pieces.randomElement(using: &generator)!
            }.joined()
            #expect(SyncNames.isValidPath(path) == defined(path), "\(path.debugDescription)")
        }
        for edge in [".a", "a.", "..a", "a/..b", "./a", "a/.", String(repeating: "c", count: 255)] {
            #expect(SyncNames.isValidPath(edge) == defined(edge), "\(edge)")
        }
        #expect(!SyncNames.isValidPath(String(repeating: "d/", count: 2049) + "e"))
    }

    /// A file without a digest of the right length, a deletion with content, a version without counters or with a
    /// counter no device reaches: refused.
    @Test func anEntryThatBreaksItsRulesIsRefused() {
        var noDigest = entry("a.txt")
        noDigest.digest = []
        var contentOnDeletion = entry("a.txt", deleted: true)
        contentOnDeletion.target = "x"
        var noVersion = entry("a.txt")
        noVersion.version = []
        var folderWithTarget = entry("d", kind: .directory)
        folderWithTarget.target = "x"
        var counterAtTheTop = entry("a.txt")
        counterAtTheTop.version = [(1, 5), (2, Limits.maxVersionCounter + 1)]
        for record in [noDigest, contentOnDeletion, noVersion, folderWithTarget, counterAtTheTop] {
            #expect(throws: ProtocolError.self) { try FileEntry(record: record) }
        }
        var counterAtTheLimit = entry("a.txt")
        counterAtTheLimit.version = [(1, 5), (2, Limits.maxVersionCounter)]
        #expect(throws: Never.self) { try FileEntry(record: counterAtTheLimit) }
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
        // Times at the ends of what the index holds (a peer may send any), and just before 1970.
        #expect(
            ConflictName.make(for: "a.txt", modified: .max, device: "XYZ1234")
                == "a.sync-conflict-22620411-234716-XYZ1234.txt")
        #expect(
            ConflictName.make(for: "a.txt", modified: .min, device: "XYZ1234")
                == "a.sync-conflict-16770921-001243-XYZ1234.txt")
        #expect(
            ConflictName.make(for: "a.txt", modified: -1, device: "XYZ1234")
                == "a.sync-conflict-19691231-235959-XYZ1234.txt")
        // Whether a path is a copy: the same answer as taking it apart, for names with and without the marker.
        for path in [
            "a/Makefile.sync-conflict-20270115-080000-XYZ1234", "ré/sumé.sync-conflict-20270115-080000-ABCDEFG.txt",
            "notes.txt", ".sync-conflict-20270115-080000-ABCDEFG", "a/.sync-conflict-x/b.txt", "a.sync-conflict",
            "d/.sync-conflict-.txt", "", "x.sync-conflict-", "a/b.sync-conflict-1/c",
        ] {
            #expect(ConflictName.isConflictCopy(path) == (ConflictName.original(of: path) != nil), "\(path)")
        }
        #expect(ConflictName.isConflictCopy("ré/sumé.sync-conflict-20270115-080000-ABCDEFG.txt"))
        #expect(!ConflictName.isConflictCopy("a/.sync-conflict-x/b.txt"))
    }

    /// A copy's name fits where its original did: a name near the longest a file system allows (255 bytes) has its
    /// stem cut at a character, marked "…" and a hash of the whole name, so that the copy can be made at all; the
    /// copy still names its original (and no other name alike at the start),
    /// and a second copy of the same second and device is numbered after the device, never in the original's name.
    @Test func conflictCopiesOfLongNamesFitAndStillNameTheirOriginal() {
        let time: Int64 = 1_800_000_000 * 1_000_000_000
        let suffix = ".sync-conflict-20270115-080000-XYZ1234"
        for original in [
            "a/" + String(repeating: "n", count: 240) + ".txt", String(repeating: "é", count: 126) + ".md",
            "b/" + String(repeating: "x", count: 250), "c/x." + String(repeating: "e", count: 250),
            String(repeating: "👩‍💻", count: 22) + ".txt",
        ] {
            for number in 1...12 {
                let copy = ConflictName.make(for: original, modified: time, device: "XYZ1234", number: number)
                let name = copy.split(separator: "/").last.map(String.init) ?? copy
                #expect(name.utf8.count <= 255, "\(name.utf8.count): \(name)")
                #expect(name.contains("…") && name.contains(".sync-conflict-"), "\(name)")
                #expect(ConflictName.isConflictCopy(copy), "\(copy)")
                #expect(ConflictName.isCopy(copy, of: original), "\(copy)")
                #expect(!ConflictName.isCopy(copy, of: original + "x"), "\(copy)")
            }
        }
        // A name that fits is left whole, and copies are numbered after the device.
        #expect(
            ConflictName.make(for: "notes.txt", modified: time, device: "XYZ1234", number: 2)
                == "notes" + suffix + "-2.txt")
        #expect(
            ConflictName.make(for: "a/Makefile", modified: time, device: "XYZ1234", number: 3)
                == "a/Makefile" + suffix + "-3")
        #expect(ConflictName.original(of: "a/Makefile" + suffix + "-3") == "a/Makefile")
        #expect(ConflictName.isCopy("notes" + suffix + "-2.txt", of: "notes.txt"))
        let fits = String(repeating: "f", count: 200) + ".txt"
        #expect(
            ConflictName.make(for: fits, modified: time, device: "XYZ1234") == String(fits.dropLast(4)) + suffix
                + ".txt")
    }

    /// Version vectors: equal, following, concurrent; a device's counter follows wall time.
    @Test func versionVectorsOrderChanges() {
        let a = VersionVector().updated(by: 1, now: 100)
        let b = a.updated(by: 2, now: 100)
        let c = a.updated(by: 3, now: 100)
        #expect(a.compare(a) == .equal && b.compare(a) == .greater && a.compare(b) == .lesser)
        #expect(b.compare(c) == .concurrent && b.merged(with: c).dominates(b) && b.merged(with: c).dominates(c))
        #expect(a.updated(by: 1, now: 50).value(of: 1) == 101 && a.updated(by: 1, now: 500).value(of: 1) == 500)
        // A counter at the top of its range stays there, and raising it does not stop the program.
        let top = VersionVector([.init(device: 1, value: .max)])
        #expect(top.updated(by: 1, now: 100).value(of: 1) == .max)
    }

    /// A small file's patch against the puller's version: rebuilt exactly whatever the edit, and about as large as
    /// what changed.
    @Test func aSmallFilesPatchCarriesAboutWhatChanged() throws {
        var generator = SystemRandomNumberGenerator()
        func random(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) } }
        func applied(_ patch: [UInt8], to old: [UInt8], length: Int) throws -> [UInt8] {
            var out = [UInt8](repeating: 0, count: length)
            _ = try patch.withUnsafeBytes { ops in
                try out.withUnsafeMutableBytes { output in
                    try Patch.apply(ops, basisSize: UInt64(old.count), length: length, into: output) { buffer, at in
                        let count = min(buffer.count, old.count - Int(at))
                        old.withUnsafeBytes {
                            buffer.baseAddress!.copyMemory(from: $0.baseAddress! + Int(at), byteCount: count)
                        }
                        return count
                    }
                }
            }
            return out
        }
        func rebuilt(_ old: [UInt8], _ new: [UInt8]) throws -> (bytes: [UInt8], patch: Int) {
            let signature = old.withUnsafeBytes { SmallDelta.Signature(of: $0) }
            let decoded = try SmallDelta.Signature.decode(signature.encoded())
            #expect(decoded == signature)
            let patch = new.withUnsafeBytes { SmallDelta.patch($0, against: decoded) }
            return (try applied(patch, to: old, length: new.count), patch.count)
        }
        let old = random(10_500)
        var edited = old
        edited.replaceSubrange(3000..<4024, with: random(1024))
        var result = try rebuilt(old, edited)
        // The block follows the size (256 bytes here): the edit and at most one block more, and a signature of
        // about one block.
        #expect(SmallDelta.blockSize(for: old.count) == 256)
        #expect(result.bytes == edited && result.patch < 1024 + 256 + 64, "in place: \(result.patch)")
        #expect(old.withUnsafeBytes { SmallDelta.Signature(of: $0) }.encoded().count == 6 + 42 * 6)
        var inserted = old
        inserted.insert(contentsOf: random(100), at: 5000)
        result = try rebuilt(old, inserted)
        #expect(result.bytes == inserted && result.patch < 1300, "inserted: \(result.patch)")
        let removed = Array(old[0..<2000] + old[2500...])
        result = try rebuilt(old, removed)
        #expect(result.bytes == removed && result.patch < 2200, "removed: \(result.patch)")
        let appended = old + random(10)
        result = try rebuilt(old, appended)
        #expect(result.bytes == appended && result.patch < 700, "appended: \(result.patch)")
        let fresh = random(3000)
        result = try rebuilt(old, fresh)
        #expect(result.bytes == fresh && result.patch >= 3000)
        result = try rebuilt(old, [])
        #expect(result.bytes.isEmpty)
        #expect(try rebuilt([], old).bytes == old)
        // The earlier form (1 KiB blocks, whole 32-bit rolling sums) is still read, and its patches still give the
        // new version.
        var earlier: [UInt8] = [0, 0, UInt8(old.count >> 8), UInt8(old.count & 0xFF)]
        for start in stride(from: 0, to: old.count, by: 1024) {
            let block = old[start..<min(start + 1024, old.count)]
            let (weak, strong) = block.withUnsafeBytes { (RollingSum($0).value, BlockQuery.sum($0)) }
            for word in [weak, strong] { earlier += (0..<4).map { UInt8(truncatingIfNeeded: word >> (24 - 8 * $0)) } }
        }
        let read = try SmallDelta.Signature.decode(earlier)
        #expect(read.block == 1024 && !read.folded && read.weak.count == 11)
        let patch = edited.withUnsafeBytes { SmallDelta.patch($0, against: read) }
        #expect(patch.count < 2200 && patch.count > 1024)
        #expect(try applied(patch, to: old, length: edited.count) == edited)
        // A signature that lies about its blocks is refused.
        var lying = old.withUnsafeBytes { SmallDelta.Signature(of: $0) }.encoded()
        lying.removeLast(8)
        #expect(throws: ProtocolError.self) { try SmallDelta.Signature.decode(lying) }
    }

    /// A frame of small files, whole and patched, compressed or not, reads back; a frame that breaks its rules is
    /// refused before anything is kept.
    @Test func aFrameOfSmallFilesReadsBackAsItWasWritten() throws {
        let frame = FolderFiles(files: [
            FolderFiles.File(ref: "a", bytes: Array("hello, hello, hello, hello, hello".utf8)),
            FolderFiles.File(ref: "b", size: 40, patch: [2, 0, 0, 0, 1, 7]),
            FolderFiles.File(ref: "c", bytes: []),
        ])
        #expect(try FolderFiles.decode(frame.encoded(codec: nil), codec: nil) == frame)
        let text = FolderFiles(
            files: (0..<100).map { FolderFiles.File(ref: "r\($0)", bytes: Array("line \($0)\n".utf8)) })
        #expect(try FolderFiles.decode(text.encoded(codec: nil), codec: nil) == text)
        var oversized = WireBytes()
        oversized.add([0])
        oversized.add32(UInt32(Limits.maxChunkPayload + 1))
        #expect(throws: ProtocolError.self) { try FolderFiles.decode(oversized.bytes, codec: nil) }
        var big = [UInt8](repeating: 0, count: 0)
        big += [1, 0x61, 0, 0, 1, 0, 1, 0, 1, 0, 1]  // a whole file of 65,537 bytes: over the limit
        var frameBytes: [UInt8] = [0]
        frameBytes += [
            UInt8(big.count >> 24), UInt8(big.count >> 16 & 0xFF), UInt8(big.count >> 8 & 0xFF),
            UInt8(big.count & 0xFF),
        ]
        #expect(throws: ProtocolError.self) { try FolderFiles.decode(frameBytes + big, codec: nil) }
    }
}

/// Big-endian bytes for hand-made frames.
struct WireBytes {
    var bytes: [UInt8] = []
    mutating func add(_ more: [UInt8]) { bytes += more }
    mutating func add32(_ value: UInt32) {
        bytes += [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }
}
