import Foundation
import ShareTestSupport
import Testing

@testable import ShareArchive

/// Our streams read by bsdtar and GNU tar, and their archives (and Python's zips) read by us.
@Suite struct InteropTests {
    func streamFile(_ plan: ArchivePlan, in scratch: Scratch) throws -> URL {
        let file = scratch.path("stream.tar")
        try Data(streamBytes(plan)).write(to: file)
        return file
    }

    @Test func bsdtarListsAndGNUTarExtractsOurStream() throws {
        let scratch = Scratch()
        let root = try sampleFolder(in: scratch)
        let plan = try ArchivePlan.folder(root)
        let file = try streamFile(plan, in: scratch)
        let (listed, listing) = try run("/usr/bin/bsdtar", ["-tf", file.path])
        #expect(listed == 0, "\(listing)")
        let names = Set(listing.split(separator: "\n").map { String($0).trimmingCharacters(in: ["/"]) })
        for entry in plan.entries where entry.path != "./" { #expect(names.contains(entry.path), "\(entry.path)") }
        let out = scratch.path("gnu")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        let (status, output) = try run("/usr/bin/tar", ["-xf", file.path, "-C", out.path])
        #expect(status == 0, "\(output)")
        var expected = tree(root)
        expected["outside"] = nil
        #expect(tree(out) == expected)
    }

    @Test func aFolderArchivedByGNUTarExtractsIdentically() throws {
        let scratch = Scratch()
        let root = try sampleFolder(in: scratch)
        try FileManager.default.removeItem(at: root.appendingPathComponent("outside"))
        for format in ["gnu", "pax", "ustar"] where format != "ustar" {
            let file = scratch.path("gnu-\(format).tar")
            let (status, output) = try run(
                "/usr/bin/tar", ["--format=\(format)", "-cf", file.path, "-C", root.path, "."])
            #expect(status == 0, "\(output)")
            _ = try Extractor.inspect(file: file)
            let target = scratch.path("out-\(format)")
            try Extractor(rootPath: target.path).run(ArchiveReader(file: file.path))
            #expect(tree(target) == tree(root), "format \(format)")
        }
    }

    @Test func aZipMadeByPythonExtracts() throws {
        let scratch = Scratch()
        let zip = scratch.path("made.zip")
        let script = """
            import zipfile, sys
            with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
                z.writestr("docs/readme.txt", "hello zip\\n")
                z.writestr("docs/empty/", "")
                z.writestr("caf\\u00e9.txt", "accent")
            """
        let (status, output) = try run("/usr/bin/python3", ["-c", script, zip.path])
        #expect(status == 0, "\(output)")
        let target = scratch.path("out")
        _ = try Extractor.inspect(file: zip)
        try Extractor(rootPath: target.path).run(ArchiveReader(file: zip.path))
        #expect(
            try String(contentsOf: target.appendingPathComponent("docs/readme.txt"), encoding: .utf8) == "hello zip\n")
        #expect(try String(contentsOf: target.appendingPathComponent("café.txt"), encoding: .utf8) == "accent")
        var isFolder: ObjCBool = false
        #expect(
            FileManager.default.fileExists(
                atPath: target.appendingPathComponent("docs/empty").path, isDirectory: &isFolder) && isFolder.boolValue)
    }

    @Test func zstdAndZipFilesRoundTrip() throws {
        let scratch = Scratch()
        let root = try sampleFolder(in: scratch)
        let plan = try ArchivePlan.folder(root)
        var expected = tree(root, times: true)
        expected["outside"] = nil
        for (name, format, compression) in [
            ("f.tar.zst", ArchiveWriter.Format.pax, ArchiveWriter.Compression.zstd(level: 3)),
            ("f.zip", .zip, .none),
        ] {
            let file = scratch.path(name)
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 16)
            defer { buffer.deallocate() }
            try plan.write(to: ArchiveWriter(file: file.path, format: format, compression: compression), buffer: buffer)
            let (status, output) = try run("/usr/bin/bsdtar", ["-tf", file.path])
            #expect(status == 0, "\(output)")
            let target = scratch.path("out-\(name)")
            try Extractor(rootPath: target.path).run(ArchiveReader(file: file.path))
            #expect(tree(target) == expected, "\(name)")
        }
    }
}
