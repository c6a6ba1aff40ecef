import FoundationEssentials
import ShareThreads
import ShareDisk
import ShareTrust
import ShareProtocol
import CoreTransferable
import UniformTypeIdentifiers

/// Text and URLs an agent received, one JSON object per line in `history.jsonl` inside the inbox (mode 0600),
/// newest last. Appends are serialized within the process and written with one `write` each.
package final class TextHistory: Sendable {
    package struct Entry: Codable, Sendable, Equatable {
        package var date: Date
        package var from: String
        package var type: String
        package var text: String

        package init(date: Date, from: String, type: String, text: String) {
            self.date = date
            self.from = from
            self.type = type
            self.text = text
        }
    }

    package let file: URL
    private let lock = ThreadCondition()

    package init(file: URL) {
        self.file = file
    }

    package func append(_ entry: Entry) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .internetDate
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
    package func entries() -> [Entry] {
        guard let data = FileManager.default.contents(atPath: file.path) else { return [] }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .internetDate
        return data.split(separator: 0x0A).compactMap { try? decoder.decode(Entry.self, from: Data($0)) }
    }
}
