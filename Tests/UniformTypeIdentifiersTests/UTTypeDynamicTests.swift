import Foundation
import Testing

@testable import UniformTypeIdentifiers

@Suite struct UTTypeDynamicTests {
    @Test func unknownExtensionYieldsADynamicTypeConformingToTheParent() throws {
        let type = try #require(UTType(filenameExtension: "qqzz"))
        #expect(type.isDynamic && !type.isDeclared && !type.isPublic)
        #expect(type.identifier.hasPrefix("dyn.a"))
        #expect(type.conforms(to: .data) && type.conforms(to: .item))
        #expect(type.preferredFilenameExtension == "qqzz")
        #expect(type.tags == [.filenameExtension: ["qqzz"]])

        let text = try #require(UTType(filenameExtension: "qqzz", conformingTo: .plainText))
        #expect(text != type)
        #expect(text.conforms(to: .text))
        #expect(!type.conforms(to: .text))
    }

    @Test func dynamicIdentifiersAreStableAndSelfDescribing() throws {
        let a = try #require(UTType(filenameExtension: "QQZZ"))
        let b = try #require(UTType(filenameExtension: "qqzz"))
        #expect(a == b)
        let again = try #require(UTType(a.identifier))
        #expect(again == a && again.conforms(to: .data))
    }

    @Test func unknownMIMETypeYieldsADynamicType() throws {
        let type = try #require(UTType(mimeType: "application/x-made-up"))
        #expect(type.isDynamic)
        #expect(type.preferredMIMEType == "application/x-made-up")
        #expect(UTType.types(tag: "application/x-made-up", tagClass: .mimeType, conformingTo: .data) == [type])
    }

    @Test func invalidTagsYieldNothing() {
        #expect(UTType(filenameExtension: "") == nil)
        #expect(UTType(filenameExtension: "a/b") == nil)
        #expect(UTType(mimeType: "not a mime") == nil)
        #expect(UTType(mimeType: "text/") == nil)
        #expect(UTType.types(tag: "", tagClass: .filenameExtension, conformingTo: nil).isEmpty)
    }

    @Test func garbageDynamicIdentifiersAreNotTypes() {
        #expect(UTType("dyn.a") == nil)
        #expect(UTType("dyn.aiiii") == nil)
        #expect(UTType("dyn.a!!") == nil)
    }
}
