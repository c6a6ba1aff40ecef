import Foundation
import Testing

@testable import UniformTypeIdentifiers

/// Every entry of the system table, as data: identifiers, tags and conformance.
@Suite struct UTTypeSystemTableTests {
    struct Row: Decodable {
        let identifier: String
        let swiftName: String?
        let parents: [String]
        let parentsInCoreTypesDump: [String]?
        let filenameExtensions: [String]
        let mimeTypes: [String]
    }

    static let rows: [Row] = {
        struct Table: Decodable { let types: [Row] }
        let url = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("data/system-uttypes.json")
        return try! JSONDecoder().decode(Table.self, from: Data(contentsOf: url)).types
    }()

    @Test func tableIsComplete() {
        #expect(Self.rows.count == 151)
        #expect(Self.rows.filter { $0.swiftName != nil }.count == 141)
    }

    @Test(arguments: rows.map(\.identifier))
    func everyIdentifierIsDeclared(_ identifier: String) throws {
        let type = try #require(UTType(identifier))
        #expect(type.identifier == identifier)
        #expect(type.isDeclared && !type.isDynamic)
        #expect(type.isPublic == identifier.hasPrefix("public."))
        #expect(UTType(identifier.uppercased()) == type)
    }

    @Test(arguments: rows)
    func parentsAreTheUnionOfBothColumns(_ row: Row) throws {
        let type = try #require(UTType(row.identifier))
        for parent in row.parents + (row.parentsInCoreTypesDump ?? []) {
            #expect(type.supertypes.map(\.identifier).contains(parent), "\(row.identifier) → \(parent)")
        }
    }

    @Test(arguments: rows)
    func extensionsRoundTrip(_ row: Row) throws {
        let type = try #require(UTType(row.identifier))
        #expect(type.preferredFilenameExtension == row.filenameExtensions.first)
        #expect(type.tags[.filenameExtension] == (row.filenameExtensions.isEmpty ? nil : row.filenameExtensions))
        for ext in row.filenameExtensions {
            let found = UTType.types(tag: ext, tagClass: .filenameExtension, conformingTo: nil)
            #expect(found.contains(type), "\(ext) → \(row.identifier)")
            #expect(UTType(filenameExtension: ext.uppercased(), conformingTo: type) == type, "\(ext) upper")
            #expect(UTType(filenameExtension: ext, conformingTo: type) == type)
        }
    }

    @Test(arguments: rows)
    func mimeTypesRoundTrip(_ row: Row) throws {
        let type = try #require(UTType(row.identifier))
        #expect(type.preferredMIMEType == row.mimeTypes.first)
        for mime in row.mimeTypes {
            #expect(UTType(mimeType: mime, conformingTo: type) == type, "\(mime) → \(row.identifier)")
            #expect(UTType(mimeType: mime.uppercased(), conformingTo: type) == type)
            #expect(UTType.types(tag: mime, tagClass: .mimeType, conformingTo: nil).contains(type))
        }
    }

    @Test func staticMembersMatchTheirIdentifiers() {
        #expect(UTType.plainText.identifier == "public.plain-text")
        #expect(UTType.internetShortcut.identifier == "com.microsoft.internet-shortcut")
        #expect(UTType.mpeg4Movie.identifier == "public.mpeg-4")
        #expect(UTType.package.identifier == "com.apple.package")
        #expect(UTType.tarArchive.identifier == "public.tar-archive")
        #expect(UTType.markdown.identifier == "net.daringfireball.markdown")
        #expect(UTType.commaSeparatedText.identifier == "public.comma-separated-values-text")
    }
}
