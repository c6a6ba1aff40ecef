// Code shaped like the samples in Apple's Core Transferable and Uniform Type Identifiers documentation.
import CoreTransferable
import UniformTypeIdentifiers

extension UTType {
    static var layer: UTType { UTType(exportedAs: "com.example.layer") }
    static var todo: UTType = UTType(exportedAs: "com.example.todo", conformingTo: .json)
    static let greatDocument = UTType(importedAs: "com.company.greatApp-document", conformingTo: .json)
}

struct ImageDocumentLayer {
    init(data: Data) throws {}
    func data() -> Data { Data([1, 2, 3]) }
    func pngData() -> Data { Data([0x89, 0x50]) }
}

extension ImageDocumentLayer: Transferable {
    static var transferRepresentation: some TransferRepresentation {
        DataRepresentation(contentType: .layer) { layer in
            layer.data()
        } importing: { data in
            try ImageDocumentLayer(data: data)
        }
        DataRepresentation(exportedContentType: .png) { layer in
            layer.pngData()
        }
    }
}

struct Note: Transferable {
    var body: String

    static var transferRepresentation: some TransferRepresentation {
        ProxyRepresentation(\.body)
    }
}

struct Todo: Codable, Transferable {
    var text: String
    var isDone = false

    static var transferRepresentation: some TransferRepresentation {
        CodableRepresentation(for: Todo.self, contentType: .todo)
        ProxyRepresentation(exporting: \.text)
            .suggestedFileName { $0.text + ".txt" }
    }
}

struct Movie: Transferable {
    let url: URL

    static var transferRepresentation: some TransferRepresentation {
        FileRepresentation(contentType: .mpeg4Movie) { movie in
            SentTransferredFile(movie.url)
        } importing: { received in
            let copy = URL.temporaryDirectory.appending(path: "movie-\(UUID().uuidString).mp4")
            try FileManager.default.copyItem(at: received.file, to: copy)
            return Self.init(url: copy)
        }
        .suggestedFileName("Movie.mp4")
        FileRepresentation(importedContentType: .quickTimeMovie) { received in
            Movie(url: received.file)
        }
    }
}

struct Secret: Transferable {
    var value: String
    static var transferRepresentation: some TransferRepresentation {
        DataRepresentation(exportedContentType: .utf8PlainText) { Data($0.value.utf8) }
            .visibility(.ownProcess)
    }
}

/// A custom, reusable representation, generic over its item.
struct TextFileRepresentation<Item: Transferable>: TransferRepresentation {
    let text: @Sendable (Item) -> String

    var body: some TransferRepresentation<Item> {
        DataRepresentation(exportedContentType: .plainText) { item in Data(text(item).utf8) }
            .suggestedFileName("export.txt")
    }
}

struct Report: Transferable {
    var title: String
    static var transferRepresentation: some TransferRepresentation {
        TextFileRepresentation { (report: Report) in report.title }
    }
}

struct Article: Transferable {
    var title: String
    var url: URL
    static var transferRepresentation: some TransferRepresentation {
        ProxyRepresentation(exporting: \.url)
        ProxyRepresentation(exporting: \.title)
    }
}

func describeAll(_ item: some Transferable) -> [String] {
    item.exportedContentTypes().map(\.identifier)
}
