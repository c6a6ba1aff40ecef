import FoundationEssentials
import ShareArchive
import ShareDisk
import ShareProtocol
import ShareTrust
import CoreTransferable
import UniformTypeIdentifiers

/// The append-only journal beside an item's ledger (`KEY.log`): one line per verified chunk, written as the chunk is
/// written, so a killed receiver loses at most the chunks it had in hand, never the ones the kernel already holds.
/// The ledger itself is rewritten only at checkpoints (every second or 64 chunks), which then empty the journal.
/// Lines are JSON; a line cut short by a kill, and anything after it, is ignored.
///
/// No fsync: a killed process loses nothing the kernel holds, and after a reboot every recorded chunk is re-hashed
/// (files) or the item starts over (archives) before anything counts, as for the ledger.
final class LedgerJournal {
    /// One line: a verified chunk and, for an archive, where the extraction stood when it was handed over.
    struct Record: Codable {
        /// Chunk index and its hex SHA-256.
        var c: Int
        var d: String
        /// An archive's checkpoint, with only the folders met since the previous record in `directories`.
        var a: ExtractionCheckpoint?
        /// How many folders the checkpoint holds in all (the previous ones plus `a.directories`).
        var n: Int?
    }

    static let suffix = "log"
    /// The most of a journal read back (a line is ~80 bytes, or a few KiB for an archive's checkpoint).
    static let readLimit = 64 << 20

    private let store: PartialStore
    private let name: String
    private var file: OpenFile?
    /// Folders of the archive checkpoint already in the ledger or an earlier line.
    private var recordedDirectories = 0

    init(store: PartialStore, key: String) {
        self.store = store
        name = "\(key).\(Self.suffix)"
    }

    deinit { file?.close() }

    /// Appends a record of a file chunk.
    func record(chunk index: Int, digest: String) throws {
        try append(Record(c: index, d: digest, a: nil, n: nil))
    }

    /// Appends a record of an archive chunk with the extraction's checkpoint, if it moved.
    func record(chunk index: Int, digest: String, checkpoint: ExtractionCheckpoint?) throws {
        guard var mark = checkpoint else { return try append(Record(c: index, d: digest, a: nil, n: nil)) }
        let total = mark.directories.count
        let known = min(recordedDirectories, total)
        mark.directories = Array(mark.directories[known...])
        try append(Record(c: index, d: digest, a: mark, n: total))
        recordedDirectories = total
    }

    /// The ledger now holds everything (a checkpoint was written): the journal starts empty again.
    func reset(directoriesInLedger: Int = 0) throws {
        recordedDirectories = directoriesInLedger
        do {
            if let file {
                try file.truncate(to: 0)
            } else if store.partials.info(name) != nil {
                try store.partials.openFile(name, .update).truncate(to: 0)
            }
        } catch let error as DiskError {
            throw ProtocolError(.storage, "the receiver cannot record progress: \(error.message)")
        }
    }

    func close() {
        file?.close()
        file = nil
    }

    func remove() {
        close()
        _ = try? store.partials.remove(name)
    }

    private func append(_ record: Record) throws {
        do {
            if file == nil { file = try store.partials.openFile(name, .append, mode: 0o600) }
            var line = Array(try JSONEncoder().encode(record))
            line.append(0x0A)
            try file!.append(line)
        } catch let error as DiskError {
            if error.kind == .noSpace {
                throw ProtocolError(.storage, "the receiver's disk is full; free space and send again to resume")
            }
            throw ProtocolError(.storage, "the receiver cannot record progress: \(error.message)")
        } catch let error as ProtocolError {
            throw error
        } catch {
            throw ProtocolError(.storage, "the receiver cannot record progress: \(error)")
        }
    }

    /// Applies the journal's records, in order, to `ledger` (read back by the next session).
    static func replay(_ bytes: [UInt8], onto ledger: inout PartialStore.Ledger) {
        let decoder = JSONDecoder()
        var start = 0
        while let end = bytes[start...].firstIndex(of: 0x0A) {
            defer { start = end + 1 }
            // A line that does not parse was cut short: nothing after it counts either.
            guard let record = try? decoder.decode(Record.self, from: Data(bytes[start..<end])),
                record.c >= 0, Hex.bytes(record.d)?.count == 32
            else { return }
            ledger.chunks[String(record.c)] = record.d
            if var mark = record.a, let total = record.n, total >= mark.directories.count {
                let before = ledger.archive?.directories ?? []
                let kept = total - mark.directories.count
                guard kept <= before.count else { return }
                mark.directories = Array(before[0..<kept]) + mark.directories
                ledger.archive = mark
            }
        }
    }
}
