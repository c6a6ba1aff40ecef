import Foundation
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
        let extractor = try Extractor(root: target, policy: policy)
        let error = try #require(throws: ArchiveError.self) { try extractor.run(ArchiveReader(file: file.path)) }
        #expect(error.message.contains(needle) || error.message.contains("entries"), "\(error.message)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: Self.built.escape.path).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.url.path) == ["target"])
        // Nothing in the target is a device, and no link in it points outside.
        for (path, kind) in tree(target) where kind.hasPrefix("link") {
            #expect(SafePath.linkStaysInside(link: path, target: String(kind.dropFirst("link -> ".count))))
        }
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
    }
}
