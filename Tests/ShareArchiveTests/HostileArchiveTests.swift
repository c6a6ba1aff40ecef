import Foundation
import Glibc
import ShareTestSupport
import Testing

@testable import ShareArchive

/// Archives built by Python's tarfile and zipfile to attack the extractor: each is refused with a message naming
/// the entry, and nothing is written outside the target folder.
@Suite struct HostileArchiveTests {
    /// The archives, built once: (file, what the refusal must name), the folder they try to reach.
    static let built: (cases: [(URL, String)], escape: URL, scratch: Scratch) = {
        let scratch = Scratch()
        let out = scratch.path("archives")
        let escape = scratch.path("escape")
        try? FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        try? FileManager.default.createDirectory(at: escape, withIntermediateDirectories: true)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/hostile_archives.py")
        let (status, output) = (try? run("/usr/bin/python3", [script.path, out.path, escape.path])) ?? (-1, "")
        precondition(status == 0, "hostile_archives.py failed: \(output)")
        let cases = output.split(separator: "\n").map { line -> (URL, String) in
            let parts = line.split(separator: "\t", maxSplits: 1).map(String.init)
            return (out.appendingPathComponent(parts[0]), parts[1])
        }
        return (cases, escape, scratch)
    }()

    static var names: [String] { built.cases.map { $0.0.lastPathComponent } }

    func find(_ name: String) -> (URL, String) { Self.built.cases.first { $0.0.lastPathComponent == name }! }

    @Test(arguments: names)
    func inspectionRefusesBeforeWritingAnything(_ name: String) throws {
        let (file, needle) = find(name)
        let error = try #require(throws: ArchiveError.self) { try Extractor.inspect(file: file) }
        #expect(error.kind == .unsafeEntry || error.kind == .limit)
        #expect(error.message.contains(needle), "\(error.message)")
    }

    @Test(arguments: names)
    func extractionAloneRefusesAndStaysInside(_ name: String) throws {
        let (file, needle) = find(name)
        let scratch = Scratch()
        let target = scratch.path("target")
        var policy = ExtractionPolicy()
        policy.maxEntries = 1000
        let extractor = try Extractor(rootPath: target.path, policy: policy)
        let error = try #require(throws: ArchiveError.self) { try extractor.run(ArchiveReader(file: file.path)) }
        #expect(error.message.contains(needle) || error.message.contains("entries"), "\(error.message)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: Self.built.escape.path).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.url.path) == ["target"])
        // Nothing in the target is a device, and no link in it resolves outside.
        let resolvedTarget = target.resolvingSymlinksInPath().path
        for (path, kind) in tree(target) where kind.hasPrefix("link") {
            let resolved = target.appendingPathComponent(path).resolvingSymlinksInPath().path
            #expect(resolved == resolvedTarget || resolved.hasPrefix(resolvedTarget + "/"), "\(path) -> \(resolved)")
        }
    }

    /// The race the outside review won with two sessions on one partial folder: between two entries a folder of the
    /// tree is swapped for a link leading out. The next entry through it stops; nothing lands outside.
    @Test func aFolderSwappedForALinkBetweenEntriesStopsTheExtraction() throws {
        let scratch = Scratch()
        let target = scratch.path("target")
        let escape = scratch.path("escape")
        try FileManager.default.createDirectory(at: escape, withIntermediateDirectories: true)
        let first = scratch.path("first.tar")
        let second = scratch.path("second.tar")
        let source = scratch.path("source")
        try FileManager.default.createDirectory(
            at: source.appendingPathComponent("x/y/z"), withIntermediateDirectories: true)
        try Data("one".utf8).write(to: source.appendingPathComponent("x/y/z/one.txt"))
        var (status, output) = try run("/usr/bin/bsdtar", ["-cf", first.path, "-C", source.path, "x"])
        #expect(status == 0, "\(output)")
        try Data("two".utf8).write(to: source.appendingPathComponent("x/y/z/two.txt"))
        (status, output) = try run("/usr/bin/bsdtar", ["-cf", second.path, "-C", source.path, "x/y/z/two.txt"])
        #expect(status == 0, "\(output)")
        try Extractor(rootPath: target.path).run(ArchiveReader(file: first.path))
        try FileManager.default.removeItem(at: target.appendingPathComponent("x/y"))
        try FileManager.default.createSymbolicLink(at: target.appendingPathComponent("x/y"), withDestinationURL: escape)
        try FileManager.default.createDirectory(
            at: escape.appendingPathComponent("z"), withIntermediateDirectories: true)
        let error = try #require(throws: ArchiveError.self) {
            try Extractor(rootPath: target.path).run(ArchiveReader(file: second.path))
        }
        #expect(error.kind == .unsafeEntry, "\(error.message)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: escape.appendingPathComponent("z").path).isEmpty)
    }

    /// Received modes lose group and other write: a 0777 folder arrives 0755, a 0666 file 0644.
    @Test func receivedModesLoseGroupAndOtherWrite() throws {
        let scratch = Scratch()
        let source = scratch.path("source")
        try FileManager.default.createDirectory(
            at: source.appendingPathComponent("open"), withIntermediateDirectories: true)
        try Data("x".utf8).write(to: source.appendingPathComponent("open/f.txt"))
        chmod(source.appendingPathComponent("open").path, 0o777)
        chmod(source.appendingPathComponent("open/f.txt").path, 0o666)
        let archive = scratch.path("modes.tar")
        let (status, output) = try run("/usr/bin/bsdtar", ["-cf", archive.path, "-C", source.path, "open"])
        #expect(status == 0, "\(output)")
        let target = scratch.path("target")
        try Extractor(rootPath: target.path).run(ArchiveReader(file: archive.path))
        let folder = try FileManager.default.attributesOfItem(atPath: target.appendingPathComponent("open").path)
        let file = try FileManager.default.attributesOfItem(atPath: target.appendingPathComponent("open/f.txt").path)
        #expect((folder[.posixPermissions] as? Int) == 0o755)
        #expect((file[.posixPermissions] as? Int) == 0o644)
    }

    @Test func aCompressedBombIsRefusedByItsRatio() throws {
        // 256 MiB of zeros compress to a few KiB with zstd; the declared size is over 200 times the archive.
        let scratch = Scratch()
        let source = scratch.path("zeros")
        try FileManager.default.createDirectory(at: source, withIntermediateDirectories: true)
        let handle = try FileHandle(
            forWritingTo: {
                FileManager.default.createFile(atPath: source.appendingPathComponent("z.bin").path, contents: nil)
                return source.appendingPathComponent("z.bin")
            }())
        try handle.truncate(atOffset: 256 << 20)
        try handle.close()
        let archive = scratch.path("bomb.tar.zst")
        let (status, output) = try run("/usr/bin/bsdtar", ["--zstd", "-cf", archive.path, "-C", source.path, "."])
        #expect(status == 0, "\(output)")
        var policy = ExtractionPolicy()
        policy.ratioFloor = 1 << 20
        let error = try #require(throws: ArchiveError.self) { try Extractor.inspect(file: archive, policy: policy) }
        #expect(error.kind == .limit && error.message.contains("z.bin"), "\(error.message)")
    }

    @Test(arguments: ["../x", "a/../../x", "/etc/x", "a/..", "..", String(repeating: "n", count: 256)])
    func unsafeNamesAreRejected(_ name: String) {
        #expect(SafePath.components(name) == nil)
    }

    @Test func safeNamesAreNormalized() {
        #expect(SafePath.components("./a//b/./c/") == ["a", "b", "c"])
        #expect(SafePath.components("./") == [])
        #expect(SafePath.linkStaysInside(link: "a/b/l", target: "../../x"))
        #expect(!SafePath.linkStaysInside(link: "a/b/l", target: "../../../x"))
        #expect(!SafePath.linkStaysInside(link: "l", target: "/etc/passwd"))
        // Followed through the archive's other links, a chain that looks inside by its names leaves.
        let chain = ["x/y/z/w/r": "../../../.."]
        #expect(SafePath.linkStaysInside(link: "x/y/z/w/r", target: "../../../..", links: chain))
        #expect(!SafePath.linkStaysInside(link: "d", target: "x/y/z/w/r/../../../../..", links: chain))
    }
}
