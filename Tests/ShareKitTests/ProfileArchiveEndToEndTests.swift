import Foundation
import ShareTestSupport
import Testing

extension EndToEnd {
    /// The seeds' profile flows: a catalog with portraits and videos goes whole to a rich receiver, as CSV when
    /// nothing needs a file, as names to a text-only one; files move by export and import.
    @Suite(.serialized) struct ProfileArchiveEndToEndTests {
        func catalog(_ device: TestDevice, attachments: Bool) throws {
            var extra: [String] = []
            if attachments {
                let media = try device.folder("media-src")
                try makeFile(media.appendingPathComponent("juan.jpg"), size: 30_000)
                try makeFile(media.appendingPathComponent("juan.mp4"), size: 3 << 20)
                extra = [
                    "--portrait", media.appendingPathComponent("juan.jpg").path,
                    "--video", media.appendingPathComponent("juan.mp4").path,
                ]
            }
            #expect(
                device.run(
                    ["profile", "add", "Juan", "--bio", "Loves \"hiking\", maps", "--fact", "Climbed Aneto"] + extra
                ).status == 0)
            #expect(device.run(["profile", "add", "Ana", "--fact", "Speaks four languages"]).status == 0)
        }

        func send(_ laptop: TestDevice, to desk: TestDevice, accept: [String]) throws -> (
            CommandResult, BackgroundShare, URL
        ) {
            let inbox = try desk.folder("inbox")
            let (receiver, port) = try desk.startReceive(accept.isEmpty ? [] : ["--accept"] + accept, into: inbox)
            let sent = laptop.run(["send", "--profiles", "--to", "127.0.0.1:\(port)"])
            _ = receiver.wait(timeout: 60)
            return (sent, receiver, inbox)
        }

        @Test func aRichReceiverImportsTheWholeCatalogOnceEvenWhenSentTwice() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            try catalog(laptop, attachments: true)
            for round in 0..<2 {
                let (sent, receiver, _) = try send(laptop, to: desk, accept: [])
                #expect(sent.status == 0, "\(sent.stderr)")
                #expect(receiver.process.terminationStatus == 0, "\(receiver.stderr.text)")
                #expect(
                    receiver.stderr.text.contains(round == 0 ? "imported 2 and updated 0" : "imported 0 and updated 2"))
            }
            let listed = desk.run(["profile", "list"]).stdout.split(separator: "\n")
            #expect(listed.count == 2)
            #expect(listed.contains { $0.hasPrefix("Juan") && $0.contains("portrait") && $0.contains("video") })
            let shown = desk.run(["profile", "show", "Juan"]).stdout
            let video = try #require(shown.split(separator: "\"").first { $0.hasSuffix("video.mp4") })
            #expect(
                try Data(contentsOf: try #require(URL(string: String(video))))
                    == Data(contentsOf: laptop.directory.appendingPathComponent("media-src/juan.mp4")))
        }

        @Test func aTextOnlyReceiverGetsTheNames() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            try catalog(laptop, attachments: true)
            let (sent, receiver, _) = try send(laptop, to: desk, accept: ["public.plain-text"])
            #expect(sent.status == 0)
            #expect(receiver.stdout.text.contains("Juan\nAna"))
            #expect(desk.run(["profile", "list"]).stdout.isEmpty)
        }

        @Test func csvTravelsOnlyWhenNothingNeedsAFile() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            try catalog(laptop, attachments: false)
            let (sent, _, inbox) = try send(laptop, to: desk, accept: ["public.comma-separated-values-text"])
            #expect(sent.status == 0, "\(sent.stderr)")
            let csv = try String(contentsOf: inbox.appendingPathComponent("Profiles.csv"), encoding: .utf8)
            #expect(csv.hasPrefix("id,name,bio,fun_facts\r\n") && csv.contains("\"Loves \"\"hiking\"\", maps\""))

            let (rich, other) = try TestDevice.pair("rich", "other")
            try catalog(rich, attachments: true)
            let (refused, _, _) = try send(rich, to: other, accept: ["public.comma-separated-values-text"])
            #expect(refused.status == 3)
            #expect(refused.stderr.contains("no common representation"), "\(refused.stderr)")
        }

        @Test(arguments: ["tar", "tar.zst", "zip", "csv"])
        func exportThenImportOnAnotherDevice(_ format: String) throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            try catalog(laptop, attachments: format != "csv")
            let file = laptop.directory.appendingPathComponent("profiles.\(format)")
            let exported = laptop.run(["profile", "export", file.path])
            #expect(exported.status == 0, "\(exported.stderr)")
            if format == "tar" || format == "tar.zst" {
                let (status, listing) = try run("/usr/bin/bsdtar", ["-tf", file.path])
                #expect(status == 0 && listing.contains("manifest.json") && listing.contains("video.mp4"))
            }
            if format == "tar" {
                let (status, listing) = try run("/usr/bin/tar", ["-tf", file.path])
                #expect(status == 0 && listing.contains("portrait.jpg"))
            }
            for expected in ["imported 2 new and updated 0", "imported 0 new and updated 2"] {
                let imported = desk.run(["profile", "import", file.path])
                #expect(imported.status == 0, "\(imported.stderr)")
                #expect(imported.stderr.contains(expected), "\(imported.stderr)")
            }
            #expect(desk.run(["profile", "list"]).stdout.split(separator: "\n").count == 2)
        }

        @Test func csvExportIsRefusedWhenProfilesHaveAttachments() throws {
            let laptop = try TestDevice("laptop")
            try catalog(laptop, attachments: true)
            let result = laptop.run(["profile", "export", laptop.directory.appendingPathComponent("p.csv").path])
            #expect(result.status == 65)
            #expect(result.stderr.contains("CSV cannot carry portraits or videos"))
            #expect(result.stderr.split(separator: "\n").count == 1)
        }

        @Test func bundlesMadeByGNUTarAndPythonZipImport() throws {
            let desk = try TestDevice("desk")
            let bundle = try desk.folder("bundle")
            let id = UUID().uuidString.lowercased()
            try FileManager.default.createDirectory(
                at: bundle.appendingPathComponent("media/\(id)"), withIntermediateDirectories: true)
            try makeFile(bundle.appendingPathComponent("media/\(id)/portrait.png"), size: 5000)
            let manifest = """
                {"format": 1, "profiles": [{"id": "\(id)", "name": "Zoé", "bio": "", "funFacts": ["Knits"],
                 "portrait": "media/\(id)/portrait.png"}]}
                """
            try Data(manifest.utf8).write(to: bundle.appendingPathComponent("manifest.json"))
            let tarFile = desk.directory.appendingPathComponent("gnu.tar")
            #expect(try run("/usr/bin/tar", ["-cf", tarFile.path, "-C", bundle.path, "."]).0 == 0)
            let zipFile = desk.directory.appendingPathComponent("py.zip")
            let script = "import shutil,sys; shutil.make_archive(sys.argv[1], 'zip', sys.argv[2])"
            #expect(try run("/usr/bin/python3", ["-c", script, String(zipFile.path.dropLast(4)), bundle.path]).0 == 0)
            for file in [tarFile, zipFile] {
                let result = desk.run(["profile", "import", file.path])
                #expect(result.status == 0, "\(result.stderr)")
            }
            let listed = desk.run(["profile", "list"]).stdout
            #expect(listed.split(separator: "\n").count == 1 && listed.contains("Zoé") && listed.contains("portrait"))
        }

        @Test func hostileArchivesAreRefusedByImportWithOneLine() throws {
            let desk = try TestDevice("desk")
            let out = try desk.folder("hostile")
            let escape = try desk.folder("escape")
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("ShareArchiveTests/Fixtures/hostile_archives.py")
            let (status, listing) = try run("/usr/bin/python3", [script.path, out.path, escape.path])
            #expect(status == 0, "\(listing)")
            let passwd = try Data(contentsOf: URL(fileURLWithPath: "/etc/passwd"))
            for line in listing.split(separator: "\n") {
                let parts = line.split(separator: "\t").map(String.init)
                let result = desk.run(["profile", "import", out.appendingPathComponent(parts[0]).path])
                #expect(result.status == 65, "\(parts[0]): \(result.stderr)")
                #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
                #expect(result.stderr.contains(parts[1]) || result.stderr.contains("entries"), "\(result.stderr)")
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: escape.path).isEmpty)
            #expect(try Data(contentsOf: URL(fileURLWithPath: "/etc/passwd")) == passwd)
            #expect(desk.run(["profile", "list"]).stdout.isEmpty)
            let data = desk.config.appendingPathComponent("data")
            let leftovers = (try? FileManager.default.contentsOfDirectory(atPath: data.path)) ?? []
            #expect(leftovers.filter { $0.hasPrefix(".import-") }.isEmpty)
        }
    }
}
