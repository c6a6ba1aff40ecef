import Foundation
import Testing

@testable import UniformTypeIdentifiers

@Suite struct UTTypeConformanceTests {
    @Test func jpegSupertypes() {
        #expect(UTType.jpeg.supertypes == [.image, .data, .content, .item])
    }

    @Test func folderIsADirectoryButNotData() {
        #expect(UTType.folder.conforms(to: .directory))
        #expect(UTType.folder.conforms(to: .item))
        #expect(!UTType.folder.conforms(to: .data))
    }

    @Test func conformanceExamplesFromTheReference() {
        #expect(UTType.mpeg4Audio.conforms(to: .audio))
        #expect(UTType.utf8PlainText.supertypes == [.plainText, .text, .data, .content, .item])
        #expect(UTType.mpeg4Movie.supertypes == [.movie, .audiovisualContent, .data, .content, .item])
        #expect(UTType.zip.conforms(to: UTType("com.pkware.zip-archive")!))
        #expect(UTType.zip.conforms(to: .archive) && UTType.zip.conforms(to: .data))
        #expect(!UTType.zip.conforms(to: .content))
        // Union of SDK and CoreTypes parents: CSV is plain text at runtime.
        #expect(UTType.commaSeparatedText.conforms(to: .plainText))
        #expect(UTType.svg.conforms(to: .xml))
        #expect(UTType.heic.conforms(to: .image))
        #expect(UTType.tarArchive.conforms(to: UTType("org.gnu.gnu-tar-archive")!))
    }

    @Test func subtypeAndSupertypeExcludeEquality() {
        #expect(UTType.png.isSubtype(of: .image))
        #expect(!UTType.png.isSubtype(of: .png))
        #expect(UTType.image.isSupertype(of: .png))
        #expect(!UTType.image.isSupertype(of: .image))
        #expect(!UTType.image.isSubtype(of: .png))
        #expect(UTType.png.conforms(to: .png))
    }

    @Test func rootsHaveNoSupertypes() {
        #expect(UTType.item.supertypes.isEmpty)
        #expect(UTType.content.supertypes.isEmpty)
    }

    @Test func descriptionsFallBackToSupertypes() {
        #expect(UTType.jpeg.localizedDescription == "JPEG image")
        #expect(UTType.plainText.localizedDescription == "text")
        #expect(UTType(filenameExtension: "zzqq")?.localizedDescription == nil)
    }

    @Test func tagsHoldOnlyStandardClasses() {
        #expect(Set(UTType.jpeg.tags.keys) == [.filenameExtension, .mimeType])
        #expect(UTType.jpeg.tags[.filenameExtension] == ["jpeg", "jpg", "jpe"])
        #expect(UTType.item.tags.isEmpty)
        #expect(UTType.item.tags[.mimeType] == nil)
    }

    @Test func identifierInitializerRejectsUnknownAndAcceptsUndeclaredOnRequest() {
        #expect(UTType("com.example.never-declared-anywhere") == nil)
        let undeclared = UTType(identifier: "com.example.never-declared-anywhere", allowUndeclared: true)
        #expect(undeclared?.isDeclared == false && undeclared?.isDynamic == false)
        #expect(undeclared?.supertypes.isEmpty == true)
        #expect(UTType(identifier: "not valid!", allowUndeclared: true) == nil)
        #expect(UTType(identifier: "com.example.never-declared-anywhere", allowUndeclared: false) == nil)
    }

    @Test func tagClassRawValues() {
        #expect(UTTagClass.filenameExtension.rawValue == "public.filename-extension")
        #expect(UTTagClass.mimeType.rawValue == "public.mime-type")
        #expect(UTTagClass(rawValue: "public.mime-type") == .mimeType)
    }

    @Test func codableRoundTripAndDescription() throws {
        let data = try JSONEncoder().encode([UTType.png, .folder])
        #expect(String(decoding: data, as: UTF8.self) == #"["public.png","public.folder"]"#)
        #expect(try JSONDecoder().decode([UTType].self, from: data) == [.png, .folder])
        #expect(UTType.png.description == "public.png")
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(UTType.self, from: Data(#""a b""#.utf8)) }
    }

    @Test func extensionLookupPrefersTheRequestedParent() {
        #expect(UTType(filenameExtension: "mp4") == .mpeg4Movie)
        #expect(UTType(filenameExtension: "mp4", conformingTo: .audio) == .mpeg4Audio)
        #expect(UTType(filenameExtension: "JPG") == .jpeg)
        #expect(UTType(filenameExtension: "txt") == .plainText)
        #expect(UTType(mimeType: "text/plain; charset=UTF-8") == .utf8PlainText)
        #expect(UTType(mimeType: "image/png; foo=bar") == .png)
        #expect(UTType(tag: "jpg", tagClass: .filenameExtension, conformingTo: nil) == .jpeg)
    }

    @Test func urlHelpersAppendThePreferredExtension() {
        let base = URL(fileURLWithPath: "/tmp/puppy.jpg")
        #expect(base.appendingPathExtension(for: .plainText).lastPathComponent == "puppy.jpg.txt")
        #expect(base.appendingPathExtension(for: .jpeg).lastPathComponent == "puppy.jpg")
        #expect(base.appendingPathExtension(for: .image).lastPathComponent == "puppy.jpg")
        let dir = URL(fileURLWithPath: "/tmp")
        #expect(dir.appendingPathComponent("notes", conformingTo: .plainText).lastPathComponent == "notes.txt")
        #expect(dir.appendingPathComponent("photos", conformingTo: .folder).hasDirectoryPath)
        var mutable = dir
        mutable.appendPathComponent("a", conformingTo: .png)
        #expect(mutable.lastPathComponent == "a.png")
    }
}
