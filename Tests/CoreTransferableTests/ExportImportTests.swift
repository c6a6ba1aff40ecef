import CoreTransferable
import Foundation
import Testing

@Suite struct ExportImportTests {
    let note = Note(title: "Groceries", body: "milk, eggs")

    @Test func exportPicksTheFirstConformingRepresentation() async throws {
        #expect(try JSONDecoder().decode(Note.self, from: try await note.exported(as: nil)) == note)
        // `.testNote` conforms to `.json` and `.text`, so it wins over HTML and the proxy for those requests.
        #expect(try JSONDecoder().decode(Note.self, from: try await note.exported(as: .text)) == note)
        #expect(try await note.exported(as: .html) == Data("<h1>Groceries</h1>".utf8))
        #expect(try await note.exported(as: .plainText) == Data("milk, eggs".utf8))
    }

    @Test func exportErrorsHaveStableCodesAndNameTheTypes() async throws {
        let error = try await #require(throws: TransferableSupportError.self) { try await note.exported(as: .png) }
        #expect(error.code == .noMatchingRepresentation && error.errorCode == 0)
        #expect(error.message.contains("public.png") && error.message.contains("com.example.test-note"))
        #expect(TransferableSupportError.errorDomain == "CoreTransferable.TransferableSupportError")

        let secret = Note(title: "t", body: "b", secret: true)
        let conditional = try await #require(throws: TransferableSupportError.self) {
            try await secret.exported(as: .html)
        }
        #expect(conditional.code == .exportingConditionFailed)
        #expect(conditional.message.contains("public.html"))
        #expect(Set(TransferableSupportError.Code.allCases.map(\.rawValue)).count == 6)
    }

    @Test func exportToDirectoryUsesTheSuggestedNameAndNeverOverwrites() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = try await note.export(to: directory, contentType: .plainText)
        let second = try await note.export(to: directory, contentType: .plainText)
        #expect(first.lastPathComponent == "Groceries.txt")
        #expect(second.lastPathComponent == "Groceries (2).txt")
        #expect(try String(contentsOf: second, encoding: .utf8) == "milk, eggs")
        let html = try await note.export(to: directory, contentType: .html)
        #expect(html.pathExtension == "html")
    }

    @Test func withExportedFileRemovesTheFileAfterwards() async throws {
        let seen = try await note.withExportedFile(contentType: .plainText) { url in
            #expect(FileManager.default.fileExists(atPath: url.path))
            let text = try String(contentsOf: url, encoding: .utf8)
            #expect(text == "milk, eggs")
            return url
        }
        #expect(!FileManager.default.fileExists(atPath: seen.path))
    }

    @Test func importWalksEntriesInOrderAndFallsThrough() async throws {
        // `.png` conforms to the first entry (fails), then `.image` (succeeds).
        #expect(try await Picky(importing: Data([0x89]), contentType: .png) == Picky(source: "image"))
        // `.plainText` conforms only to `.data`: the file entry gets a temporary file.
        #expect(try await Picky(importing: Data("abc".utf8), contentType: .plainText) == Picky(source: "file:abc"))
        // nil: every importing entry in order until one succeeds.
        #expect(try await Picky(importing: Data(), contentType: nil) == Picky(source: "image"))
        // Receiver entry `.png` does not accept a sender that only has `.image`, but `.image` does.
        #expect(try await Picky(importing: Data(), contentType: .image) == Picky(source: "image"))
    }

    @Test func importWithNothingMatchingIsAnError() async throws {
        struct OnlyPNG: Transferable {
            static var transferRepresentation: some TransferRepresentation {
                DataRepresentation(importedContentType: .png) { _ in OnlyPNG() }
            }
        }
        let error = try await #require(throws: TransferableSupportError.self) {
            _ = try await OnlyPNG(importing: Data(), contentType: .image)
        }
        #expect(error.code == .noMatchingRepresentation)
        #expect(error.message.contains("public.image") && error.message.contains("public.png"))

        struct Failing: Transferable {
            struct Boom: Error {}
            static var transferRepresentation: some TransferRepresentation {
                DataRepresentation(importedContentType: .data) { _ in throw Boom() }
            }
        }
        let failed = try await #require(throws: TransferableSupportError.self) {
            _ = try await Failing(importing: Data(), contentType: .data)
        }
        #expect(failed.code == .importFailed)
    }

    @Test func receivedFileExistsOnlyDuringTheImportingClosure() async throws {
        let data = try await Picky(importing: Data("xyz".utf8), contentType: .plainText)
        #expect(data.source == "file:xyz")
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let movie = directory.appendingPathComponent("m.mp4")
        try Data(repeating: 3, count: 100).write(to: movie)

        // The receiver did not ask to open in place: it gets a copy that is removed afterwards.
        let copied = try await CopiedClip(importing: movie, contentType: nil)
        #expect(!copied.sawOriginal)
        #expect(copied.file != movie)
        #expect(!FileManager.default.fileExists(atPath: copied.file.path))
        #expect(FileManager.default.fileExists(atPath: movie.path))

        // The receiver asked to open in place: it gets the original, which stays.
        let inPlace = try await Clip(importing: movie, contentType: .mpeg4Movie)
        #expect(inPlace.sawOriginal && inPlace.file == movie)
        #expect(FileManager.default.fileExists(atPath: movie.path))
    }

    @Test func fileImportInfersTheTypeFromTheExtension() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let text = directory.appendingPathComponent("a.txt")
        try Data("hello".utf8).write(to: text)
        #expect(try await String(importing: text, contentType: nil) == "hello")
        let error = try await #require(throws: TransferableSupportError.self) {
            _ = try await String(importing: directory.appendingPathComponent("missing.txt"), contentType: nil)
        }
        #expect(error.code == .fileUnavailable)
        // A movie is not text.
        let movie = directory.appendingPathComponent("b.mp4")
        try Data([0]).write(to: movie)
        await #expect(throws: TransferableSupportError.self) {
            _ = try await String(importing: movie, contentType: nil)
        }
    }

    @Test func fileRepresentationExportsAreNotReadUnlessDataIsAsked() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let movie = directory.appendingPathComponent("orig.mp4")
        try Data(repeating: 9, count: 64).write(to: movie)
        let clip = Clip(file: movie, sawOriginal: false)
        let exported = try await clip.export(to: directory, contentType: .movie)
        #expect(exported.lastPathComponent == "clip.mp4")
        #expect(try await clip.exported(as: .mpeg4Movie) == Data(repeating: 9, count: 64))
        let entry = try #require(ResolvedRepresentations.of(Clip.self).first)
        guard case .file(let sent) = try await entry.export(clip) else {
            Issue.record("expected a file")
            return
        }
        #expect(sent.file == movie && sent.allowAccessingOriginalFile)
    }
}
