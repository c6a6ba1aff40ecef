import CoreTransferable
import Foundation
import Testing
import UniformTypeIdentifiers

@Suite struct AppleDocumentationSampleTests {
    @Test func layerExportsItsOwnTypeThenPNG() async throws {
        let layer = try ImageDocumentLayer(data: Data())
        #expect(layer.exportedContentTypes() == [.layer, .png])
        #expect(try await layer.exported(as: .png) == Data([0x89, 0x50]))
        #expect(ImageDocumentLayer.importedContentTypes() == [.layer])
    }

    @Test func noteIsPlainText() async throws {
        #expect(try await Note(body: "hi").exported(as: .plainText) == Data("hi".utf8))
        #expect(describeAll(Note(body: "x")) == ["public.utf8-plain-text"])
    }

    @Test func todoRoundTripsAndSuggestsAName() async throws {
        let todo = Todo(text: "Buy milk")
        #expect(todo.suggestedFilename == "Buy milk.txt")
        let data = try await todo.exported(as: .todo)
        #expect(try await Todo(importing: data, contentType: .todo).text == "Buy milk")
        #expect(UTType.todo.conforms(to: .json))
    }

    @Test func movieCopiesTheReceivedFile() async throws {
        let source = URL.temporaryDirectory.appending(path: "src-\(UUID().uuidString).mp4")
        try Data(repeating: 4, count: 100).write(to: source)
        defer { try? FileManager.default.removeItem(at: source) }
        let movie = try await Movie(importing: source, contentType: nil)
        defer { try? FileManager.default.removeItem(at: movie.url) }
        #expect(try Data(contentsOf: movie.url).count == 100)
        let mov = URL.temporaryDirectory.appending(path: "src-\(UUID().uuidString).mov")
        try Data(repeating: 1, count: 10).write(to: mov)
        defer { try? FileManager.default.removeItem(at: mov) }
        #expect(try await Movie(importing: mov, contentType: .quickTimeMovie).url.pathExtension == "mov")
        #expect(Movie(url: source).suggestedFilename == "Movie.mp4")
    }

    @Test func ownProcessRepresentationsStayHome() {
        #expect(Secret(value: "k").exportedContentTypes().isEmpty)
        #expect(Secret(value: "k").exportedContentTypes(.ownProcess) == [.utf8PlainText])
        #expect(Secret(value: "k").offeredRepresentations(for: .trusted).isEmpty)
    }

    @Test func customGenericRepresentation() async throws {
        let report = Report(title: "Q3")
        #expect(report.exportedContentTypes() == [.plainText])
        #expect(report.suggestedFilename == "export.txt")
        #expect(try await report.exported(as: nil) == Data("Q3".utf8))
    }

    @Test func twoProxiesKeepTheirOrder() async throws {
        let article = Article(title: "Swift", url: URL(string: "https://swift.org")!)
        #expect(article.exportedContentTypes() == [.url, .utf8PlainText, .utf8PlainText])
        #expect(try await article.exported(as: .plainText) == Data("https://swift.org".utf8))
    }

    @Test func importedTypeDeclaration() {
        #expect(UTType.greatDocument.conforms(to: .json))
        #expect(UTType("com.company.greatApp-document") != nil)
    }
}
