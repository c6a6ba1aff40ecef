import Foundation
import ShareDisk

/// Text and URLs an agent received, one JSON object per line in `history.jsonl` inside the inbox (mode 0600),
/// newest last. Appends are serialized within the process and written with one `write` each.
public final class TextHistory: @unchecked Sendable {  // appends guarded by `lock`
    public struct Entry: Codable, Sendable, Equatable {
        public var date: Date
        public var from: String
        public var type: String
        public var text: String

        public init(date: Date, from: String, type: String, text: String) {
            self.date = date
            self.from = from
            self.type = type
            self.text = text
        }
    }

    public let file: URL
    private let lock = NSLock()

    public init(file: URL) {
        self.file = file
    }

    public func append(_ entry: Entry) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var line = try encoder.encode(entry)
        line.append(0x0A)
        try lock.withLock {
            do {
                let folder = try Directory.open(file.deletingLastPathComponent().path, create: true, mode: 0o700)
                let history = try folder.openFile(file.lastPathComponent, .append, mode: 0o600)
                defer { history.close() }
                try history.append(Array(line))
            } catch let error as DiskError {
                throw ShareFailure(error.kind == .noSpace ? .ioError : .cannotCreate, error.message)
            }
        }
    }

    /// Every entry, oldest first; lines that do not decode (a torn write after a crash) are skipped.
    public func entries() -> [Entry] {
        guard let data = FileManager.default.contents(atPath: file.path) else { return [] }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return data.split(separator: 0x0A).compactMap { try? decoder.decode(Entry.self, from: Data($0)) }
    }
}
