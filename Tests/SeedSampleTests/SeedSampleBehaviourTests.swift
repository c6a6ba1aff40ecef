import CoreTransferable
import Foundation
import Testing
import UniformTypeIdentifiers

/// The session's samples behave as the session describes.
@Suite struct SeedSampleBehaviourTests {
    let profile = Profile(
        id: UUID(), name: "Juan", bio: "Loves hiking", funFacts: ["Has a cat"], video: nil, portrait: nil)

    @Test func profileTypeIsDeclaredAndConformsToData() {
        #expect(UTType.profile.identifier == "com.example.profile")
        #expect(UTType.profile.isDeclared)
        #expect(UTType.profile.conforms(to: .data))
        #expect(UTType("com.example.profile") == .profile)
    }

    @Test func profileExportsItsCodableFormFirstThenItsName() async throws {
        #expect(profile.exportedContentTypes() == [.profile, .utf8PlainText])
        let json = try await profile.exported(as: .profile)
        let decoded = try JSONDecoder().decode(Profile.self, from: json)
        #expect(decoded.id == profile.id && decoded.funFacts == ["Has a cat"])
        // A text field asking for plain text gets the name, through the proxy.
        let text = try await profile.exported(as: .plainText)
        #expect(String(decoding: text, as: UTF8.self) == "Juan")
    }

    @Test func profileImportsFromItsCodableForm() async throws {
        let json = try JSONEncoder().encode(profile)
        let imported = try await Profile(importing: json, contentType: .profile)
        #expect(imported.id == profile.id)
        // The proxy is export-only: a profile cannot be made from text.
        await #expect(throws: TransferableSupportError.self) {
            _ = try await Profile(importing: Data("Juan".utf8), contentType: .plainText)
        }
    }

    @Test func profilesArchiveExportsCSVWhenItSupportsIt() async throws {
        let archive = try ProfilesArchive(csvData: Data())
        #expect(archive.exportedContentTypes() == [.commaSeparatedText])
        #expect(try await archive.exported(as: .commaSeparatedText) == Data())
        #expect(ProfilesArchive.importedContentTypes() == [.commaSeparatedText])
    }

    @Test func videoGoesAsAFileAndAsItsURL() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("seed-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let movie = directory.appendingPathComponent("clip.mp4")
        try Data(repeating: 7, count: 4096).write(to: movie)
        let video = Video(file: movie)

        #expect(video.exportedContentTypes().first == .mpeg4Movie)
        #expect(video.exportedContentTypes().contains(.fileURL))
        let exported = try await video.export(to: directory, contentType: .mpeg4Movie)
        #expect(exported.lastPathComponent == "clip (2).mp4")
        #expect(try Data(contentsOf: exported) == Data(repeating: 7, count: 4096))
        // Pasted in a text field, the proxy gives the URL itself.
        let text = try await video.exported(as: .plainText)
        #expect(String(decoding: text, as: UTF8.self) == movie.absoluteString)
    }

    @Test func videoImportCopiesTheReceivedFileBeforeItDisappears() async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("seed-home-\(UUID())")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: home) }
        let source = home.appendingPathComponent("incoming.mp4")
        try Data(repeating: 1, count: 1000).write(to: source)
        let video = try await Video(importing: source, contentType: .mpeg4Movie)
        defer { try? FileManager.default.removeItem(at: video.file) }
        #expect(FileManager.default.fileExists(atPath: video.file.path))
        #expect(video.file != source)
        #expect(try Data(contentsOf: video.file).count == 1000)
    }
}
