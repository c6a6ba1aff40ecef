import CoreTransferable
import Foundation

extension UTType {
    static let testNote = UTType(exportedAs: "com.example.test-note", conformingTo: .json)
    static let testSecret = UTType(exportedAs: "com.example.test-secret")
}

/// A value with every kind of representation, most faithful first.
struct Note: Codable, Transferable, Equatable {
    var title: String
    var body: String
    var secret = false

    static var transferRepresentation: some TransferRepresentation {
        CodableRepresentation(contentType: .testNote)
        DataRepresentation(exportedContentType: .testSecret) { Data($0.body.utf8) }
            .visibility(.ownProcess)
        DataRepresentation(contentType: .html) { note in
            Data("<h1>\(note.title)</h1>".utf8)
        } importing: { data in
            Note(title: String(decoding: data, as: UTF8.self), body: "")
        }
        .exportingCondition { !$0.secret }
        ProxyRepresentation(exporting: \.body)
            .suggestedFileName { $0.title + ".txt" }
    }
}

/// Import-only entries tried in order, the first of which always fails.
struct Picky: Transferable, Equatable {
    var source: String

    struct Refused: Error {}

    static var transferRepresentation: some TransferRepresentation {
        DataRepresentation(importedContentType: .png) { _ in throw Refused() }
        DataRepresentation(importedContentType: .image) { _ in Picky(source: "image") }
        FileRepresentation(importedContentType: .data) { received in
            Picky(source: "file:" + (try String(contentsOf: received.file, encoding: .utf8)))
        }
    }
}

/// A file-backed value whose importer records what it saw.
struct Clip: Transferable {
    let file: URL
    let sawOriginal: Bool

    static let seen = Seen()

    final class Seen: @unchecked Sendable {
        private let lock = NSLock()
        private var urls: [URL] = []
        func add(_ url: URL) { lock.lock(); urls.append(url); lock.unlock() }
        var last: URL? { lock.lock(); defer { lock.unlock() }; return urls.last }
    }

    static var transferRepresentation: some TransferRepresentation {
        FileRepresentation(contentType: .mpeg4Movie, shouldAttemptToOpenInPlace: true) {
            SentTransferredFile($0.file, allowAccessingOriginalFile: true)
        } importing: { received in
            seen.add(received.file)
            #if DEBUG
                precondition(FileManager.default.fileExists(atPath: received.file.path))
            #endif
            return Clip(file: received.file, sawOriginal: received.isOriginalFile)
        }
        .suggestedFileName("clip.mp4")
    }
}

struct CopiedClip: Transferable {
    let file: URL
    let sawOriginal: Bool
    static var transferRepresentation: some TransferRepresentation {
        FileRepresentation(importedContentType: .movie) { received in
            Clip.seen.add(received.file)
            return CopiedClip(file: received.file, sawOriginal: received.isOriginalFile)
        }
    }
}

func temporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("ct-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}
