import Foundation
import Testing

@testable import UniformTypeIdentifiers

@Suite struct UTTypeDeclarationTests {
    static func fixture(_ name: String) -> URL {
        Bundle.module.url(forResource: "Fixtures/\(name)", withExtension: nil)!
    }

    @Test func xmlPlistDeclaresTypesWithTagsAndParents() throws {
        let declared = try UTType.registerDeclarations(contentsOf: Self.fixture("Info.plist"))
        #expect(declared.map(\.identifier).contains("com.company.greatApp-document"))
        let doc = try #require(UTType("com.company.greatapp-document"))
        #expect(doc.identifier == "com.company.greatApp-document")
        #expect(doc.conforms(to: .json) && doc.conforms(to: .text) && doc.conforms(to: .data))
        #expect(doc.localizedDescription == "GreatApp Document")
        #expect(doc.preferredFilenameExtension == "greatappdoc")
        #expect(doc.preferredMIMEType == "application/x-greatapp")
        #expect(UTType(filenameExtension: "GREATAPP") == doc)
        #expect(UTType(mimeType: "application/x-greatapp") == doc)
        #expect(doc.isDeclared && !doc.isDynamic && !doc.isPublic)
        // A scalar string is accepted where an array is expected.
        #expect(UTType(filenameExtension: "imponly")?.identifier == "org.other.imported-only")
    }

    @Test func exportedWinsOverImported() throws {
        try UTType.registerDeclarations(contentsOf: Self.fixture("Info.plist"))
        let thing = try #require(UTType("org.example.shared-thing"))
        #expect(thing.conforms(to: .image))
        #expect(!thing.conforms(to: .text))
        #expect(thing.localizedDescription == "Exported description")
        // Registering the imported declaration again changes nothing.
        UTType.register([
            UTTypeDeclaration(identifier: "org.example.shared-thing", conformsTo: ["public.text"], kind: .imported)
        ])
        #expect(!UTType("org.example.shared-thing")!.conforms(to: .text))
    }

    @Test func binaryPlistIsRead() throws {
        let plist: [String: Any] = [
            "UTExportedTypeDeclarations": [
                [
                    "UTTypeIdentifier": "com.example.binary-declared", "UTTypeConformsTo": ["public.image"],
                    "UTTypeTagSpecification": ["public.filename-extension": ["bindecl"]],
                ]
            ]
        ]
        let data = try PropertyListSerialization.data(fromPropertyList: plist, format: .binary, options: 0)
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("decl-\(UUID()).plist")
        try data.write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        try UTType.registerDeclarations(contentsOf: url)
        #expect(UTType(filenameExtension: "bindecl")?.conforms(to: .image) == true)
    }

    @Test func jsonWithTheSameKeysIsRead() throws {
        try UTType.registerDeclarations(contentsOf: Self.fixture("declarations.json"))
        let type = try #require(UTType("com.example.json-declared"))
        #expect(type.conforms(to: .content) && type.conforms(to: .data))
        #expect(UTType(mimeType: "application/x-jdecl") == type)
    }

    @Test func malformedEntryIsAnErrorNamingFileAndEntry() throws {
        let url = Self.fixture("malformed-entry.plist")
        let error = try #require(throws: UTTypeDeclarationError.self) { try UTTypeDeclaration.load(contentsOf: url) }
        #expect(error.file.hasSuffix("malformed-entry.plist"))
        #expect(error.entry == "UTExportedTypeDeclarations[1]")
        #expect(error.description.contains("UTTypeIdentifier is missing"))
        // Nothing from the bad file is registered.
        #expect(throws: UTTypeDeclarationError.self) { try UTType.registerDeclarations(contentsOf: url) }
        #expect(UTType("com.example.fine") == nil)
    }

    @Test func truncatedAndInvalidFilesAreErrors() throws {
        let truncated = try #require(throws: UTTypeDeclarationError.self) {
            try UTTypeDeclaration.load(contentsOf: Self.fixture("truncated.plist"))
        }
        #expect(truncated.description.contains("truncated.plist"))
        let bad = try #require(throws: UTTypeDeclarationError.self) {
            try UTTypeDeclaration.load(contentsOf: Self.fixture("bad-identifier.json"))
        }
        #expect(bad.description.contains("UTImportedTypeDeclarations[0] (com.example/evil)"))
        let missing = try #require(throws: UTTypeDeclarationError.self) {
            try UTTypeDeclaration.load(contentsOf: URL(fileURLWithPath: "/nonexistent/Info.plist"))
        }
        #expect(missing.description.contains("/nonexistent/Info.plist"))
    }

    @Test func wrongValueTypesAreErrors() {
        let cases: [String] = [
            #"{"UTExportedTypeDeclarations": {"a": 1}}"#,
            #"{"UTExportedTypeDeclarations": [{"UTTypeIdentifier": 5}]}"#,
            #"{"UTExportedTypeDeclarations": [{"UTTypeIdentifier": "a.b", "UTTypeConformsTo": [1]}]}"#,
            #"{"UTExportedTypeDeclarations": [{"UTTypeIdentifier": "a.b", "UTTypeTagSpecification": []}]}"#,
            #"{"UTExportedTypeDeclarations": [{"UTTypeIdentifier": "a.b", "UTTypeDescription": []}]}"#,
            #"[1, 2]"#,
            "",
        ]
        for text in cases {
            #expect(throws: UTTypeDeclarationError.self, "\(text)") {
                try UTTypeDeclaration.parse(Data(text.utf8), name: "case.json")
            }
        }
    }

    @Test func exportedAsRegistersTheCodeDeclaration() {
        let type = UTType(exportedAs: "com.example.code-declared", conformingTo: .image)
        #expect(type.isDeclared)
        #expect(type.conforms(to: .image))
        #expect(UTType("com.example.code-declared") == type)
        let imported = UTType(importedAs: "com.example.code-imported")
        #expect(imported.conforms(to: .data))
        // An exported declaration replaces an imported placeholder.
        let upgraded = UTType(exportedAs: "com.example.code-imported", conformingTo: .text)
        #expect(upgraded.conforms(to: .text))
        // exportedAs on a system identifier gives the system type.
        #expect(UTType(exportedAs: "public.jpeg", conformingTo: .text) == .jpeg)
        #expect(!UTType.jpeg.conforms(to: .text))
    }

    @Test func registryIsSafeUnderConcurrentUse() async {
        await withTaskGroup(of: Bool.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    var ok = true
                    for i in 0..<300 {
                        let t = UTType(exportedAs: "com.example.concurrent-\(worker)-\(i)", conformingTo: .image)
                        ok = ok && t.conforms(to: .data) && UTType.jpeg.conforms(to: .image)
                        ok = ok && UTType(filenameExtension: "png") == .png
                    }
                    return ok
                }
            }
            for await ok in group { #expect(ok) }
        }
    }
}
