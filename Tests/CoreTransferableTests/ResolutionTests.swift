import CoreTransferable
import Foundation
import Testing

@Suite struct ResolutionTests {
    @Test func flatListKeepsSourceOrderWithProxiesSplicedInPlace() {
        let list = ResolvedRepresentations.resolve(Note.self)
        #expect(list.map(\.contentType) == [.testNote, .testSecret, .html, .utf8PlainText])
        #expect(list.map(\.payload) == [.data, .data, .data, .data])
        #expect(list.map(\.canExport) == [true, true, true, true])
        // String's import-only plain-text entry is dropped: the proxy is export-only.
        #expect(list.map(\.canImport) == [true, false, true, false])
        #expect(list[1].visibility == .ownProcess)
        #expect(list[2].hasExportingCondition)
        #expect(list[3].hasSuggestedFileName)
    }

    @Test func staticAndInstanceContentTypes() {
        #expect(Note.exportedContentTypes() == [.testNote, .html, .utf8PlainText])
        #expect(Note.exportedContentTypes(visibility: .ownProcess) == [.testNote, .testSecret, .html, .utf8PlainText])
        #expect(Note.importedContentTypes() == [.testNote, .html])
        let secret = Note(title: "t", body: "b", secret: true)
        #expect(secret.exportedContentTypes() == [.testNote, .utf8PlainText])
        #expect(secret.exportedContentTypes(.ownProcess) == [.testNote, .testSecret, .utf8PlainText])
        #expect(secret.importedContentTypes() == [.testNote, .html])
    }

    @Test func suggestedFilenameComesFromTheFirstEntryThatHasOne() {
        #expect(Note(title: "Groceries", body: "milk").suggestedFilename == "Groceries.txt")
        #expect(String("x").suggestedFilename == nil)
    }

    @Test func lastSuggestedFileNameWins() {
        struct Named: Transferable {
            static var transferRepresentation: some TransferRepresentation {
                DataRepresentation(exportedContentType: .data) { _ in Data() }
                    .suggestedFileName("first.bin")
                    .suggestedFileName("second.bin")
            }
        }
        #expect(Named().suggestedFilename == "second.bin")
    }

    @Test func nestedVisibilityNeverWidens() {
        struct Narrow: Transferable {
            static var transferRepresentation: some TransferRepresentation {
                DataRepresentation(exportedContentType: .data) { _ in Data() }
                    .visibility(.team)
                    .visibility(.all)
                DataRepresentation(exportedContentType: .text) { _ in Data() }
                    .visibility(.group)
            }
        }
        let list = ResolvedRepresentations.of(Narrow.self)
        #expect(list.map(\.visibility) == [.team, .group])
        #expect(Narrow.exportedContentTypes(visibility: .all).isEmpty)
        #expect(Narrow.exportedContentTypes(visibility: .group) == [.text])
        #expect(Narrow.exportedContentTypes(visibility: .team) == [.data, .text])
    }

    @Test func visibilityIsAStructWithFourValues() {
        let all: [TransferRepresentationVisibility] = [.all, .team, .group, .ownProcess]
        #expect(Set(all).count == 4)
        #expect(TransferRepresentationVisibility.all != .ownProcess)
    }

    @Test func proxyChainsResolveRecursively() async throws {
        struct Inner: Transferable {
            var text: String
            static var transferRepresentation: some TransferRepresentation {
                ProxyRepresentation(exporting: \.text, importing: { Inner(text: $0) })
            }
        }
        struct Outer: Transferable {
            var inner: Inner
            static var transferRepresentation: some TransferRepresentation {
                ProxyRepresentation(exporting: \.inner, importing: { Outer(inner: $0) })
            }
        }
        #expect(Outer.exportedContentTypes() == [.utf8PlainText])
        #expect(Outer.importedContentTypes() == [.utf8PlainText, .plainText])
        let data = try await Outer(inner: Inner(text: "deep")).exported(as: .plainText)
        #expect(String(decoding: data, as: UTF8.self) == "deep")
        let back = try await Outer(importing: Data("up".utf8), contentType: .plainText)
        #expect(back.inner.text == "up")
    }

    @Test func asyncProxiesAndImportOnlyProxies() async throws {
        struct Slow: Transferable {
            var n: Int
            static var transferRepresentation: some TransferRepresentation {
                ProxyRepresentation(
                    exporting: { (s: Slow) async throws -> String in
                        await Task.yield()
                        return "\(s.n)"
                    }, importing: { (text: String) async throws -> Slow in Slow(n: Int(text) ?? -1) })
                ProxyRepresentation(importing: { (url: URL) in Slow(n: url.absoluteString.count) })
            }
        }
        #expect(try await Slow(n: 42).exported(as: nil) == Data("42".utf8))
        #expect(try await Slow(importing: Data("7".utf8), contentType: .utf8PlainText).n == 7)
        #expect(try await Slow(importing: Data("https://a.b/".utf8), contentType: .url).n == 12)
    }

    @Test func builderAcceptsTenChildrenAndNestingForMore() {
        struct Ten: Transferable {
            static var transferRepresentation: some TransferRepresentation {
                DataRepresentation(exportedContentType: .png) { _ in Data() }
                DataRepresentation(exportedContentType: .jpeg) { _ in Data() }
                DataRepresentation(exportedContentType: .gif) { _ in Data() }
                DataRepresentation(exportedContentType: .tiff) { _ in Data() }
                DataRepresentation(exportedContentType: .bmp) { _ in Data() }
                DataRepresentation(exportedContentType: .webP) { _ in Data() }
                DataRepresentation(exportedContentType: .heic) { _ in Data() }
                DataRepresentation(exportedContentType: .svg) { _ in Data() }
                DataRepresentation(exportedContentType: .ico) { _ in Data() }
                Extra()
            }
        }
        struct Extra: TransferRepresentation {
            typealias Item = Ten
            var body: some TransferRepresentation<Ten> {
                DataRepresentation(exportedContentType: .pdf) { _ in Data() }
                DataRepresentation(exportedContentType: .plainText) { _ in Data() }
            }
        }
        #expect(
            Ten.exportedContentTypes() == [.png, .jpeg, .gif, .tiff, .bmp, .webP, .heic, .svg, .ico, .pdf, .plainText])
    }

    @Test func customRepresentationWithABody() {
        struct Bundle: TransferRepresentation {
            typealias Item = Note
            var body: some TransferRepresentation<Note> {
                DataRepresentation(exportedContentType: .rtf) { Data($0.title.utf8) }
                    .exportingCondition { !$0.title.isEmpty }
            }
        }
        struct Wrapped: Transferable {
            static var transferRepresentation: some TransferRepresentation {
                ProxyRepresentation(exporting: { (_: Wrapped) in Note(title: "x", body: "y") })
            }
        }
        #expect(Wrapped.exportedContentTypes().first == .testNote)
        #expect(ResolvedRepresentations.resolve(Note.self).count == 4)
        _ = Bundle()
    }

    @Test func standardConformances() async throws {
        #expect(String.exportedContentTypes() == [.utf8PlainText])
        #expect(String.importedContentTypes() == [.utf8PlainText, .plainText])
        #expect(Data.exportedContentTypes() == [.data])
        #expect(URL(string: "https://example.com")!.exportedContentTypes() == [.url, .utf8PlainText])
        #expect(URL(fileURLWithPath: "/tmp/x").exportedContentTypes() == [.fileURL, .url, .utf8PlainText])
        #expect(
            try await URL(importing: Data("https://example.com/a".utf8), contentType: .plainText).host == "example.com")
        await #expect(throws: TransferableSupportError.self) {
            _ = try await URL(importing: Data("not a url".utf8), contentType: .plainText)
        }
        let attributed = try await AttributedString(importing: Data("hello".utf8), contentType: .utf8PlainText)
        #expect(String(attributed.characters) == "hello")
        #expect(try await AttributedString("hi").exported(as: .plainText) == Data("hi".utf8))
        #expect(try await "héllo".exported(as: .text) == Data("héllo".utf8))
        #expect(try await Data([1, 2]).exported(as: .data) == Data([1, 2]))
    }

    @Test func codableRepresentationWithPropertyListCoders() async throws {
        struct Point: Codable, Transferable, Equatable {
            var x: Int
            static var xmlEncoder: PropertyListEncoder {
                let encoder = PropertyListEncoder()
                encoder.outputFormat = .xml
                return encoder
            }
            static var transferRepresentation: some TransferRepresentation {
                CodableRepresentation(
                    contentType: .xmlPropertyList, encoder: xmlEncoder, decoder: PropertyListDecoder())
            }
        }
        let data = try await Point(x: 3).exported(as: .propertyList)
        #expect(String(decoding: data, as: UTF8.self).contains("<plist"))
        #expect(try await Point(importing: data, contentType: .xmlPropertyList) == Point(x: 3))
    }
}
