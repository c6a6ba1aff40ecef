import ShareNet
import ShareText
import CoreTransferable
import Glibc
import ShareDisk
import ShareTrust
import ShareProtocol
import ShareTLS

/// The watch's sink: text and URLs (at most `--max-size`) are gathered in memory to be shown; anything else (images)
/// is written chunk by chunk to a hidden file in the shelf folder and moved into place only once the driver has
/// verified the whole item. Nothing larger than the limit is ever written: the receiver machine stops an item at
/// its offered size, at the accept list's limit and at `--max-size`, counting bytes as they arrive.
final class WatchSink: ItemSink {
    let shelf: Shelf
    let console: Console
    let agent: String
    private(set) var received = 0

    init(shelf: Shelf, console: Console, agent: String) {
        self.shelf = shelf
        self.console = console
        self.agent = agent
    }

    /// A watch keeps no partials: every item comes whole.
    func held(item: OfferItem, representation: OfferedRepresentation, chunkSize: Int) -> HeldChunks { .nothing }

    func open(item: OfferItem, representation: OfferedRepresentation, chunkSize: Int, digest: DigestAlgorithm)
        throws -> IncomingPayload
    {
        try WatchItem(item: item, representation: representation, sink: self)
    }

    fileprivate func kept() { received += 1 }
}

/// One item the watch is receiving.
final class WatchItem: IncomingPayload {
    let item: OfferItem
    let representation: OfferedRepresentation
    let isText: Bool
    private unowned let sink: WatchSink
    private var bytes: [UInt8] = []
    private var file: (handle: OpenFile, name: String)?
    private var size: UInt64 = 0
    let held: [Int: [UInt8]] = [:]

    init(item: OfferItem, representation: OfferedRepresentation, sink: WatchSink) throws {
        self.item = item
        self.representation = representation
        self.sink = sink
        let type = UTType(representation.contentType)
        isText = type.map { $0.conforms(to: .plainText) || $0.conforms(to: .url) } ?? false
        if !isText { file = try sink.shelf.createPartial() }
    }

    func write(index: Int, bytes data: UnsafeRawBufferPointer, digest: [UInt8]) throws {
        if let file {
            do {
                try file.handle.write(data, at: size)
            } catch {
                throw ProtocolError(.storage, "the watch cannot write \(item.label): \(error)")
            }
        } else {
            bytes += data
        }
        size += UInt64(data.count)
    }

    /// Shows the text or keeps the file; the acknowledgement says which.
    func complete(done: Done) throws -> Ack {
        let console = sink.console
        if isText, let text = String(validating: bytes, as: UTF8.self) {
            console.item(
                Console.Event(
                    event: "text", from: sink.agent, type: representation.contentType, text: text, size: size,
                    item: item.label, origin: item.origin),
                plain: text)
            sink.kept()
            return Ack(item: item.id, outcome: "printed")
        }
        if isText {
            // Not UTF-8 after all: kept as a file like any other item.
            file = try sink.shelf.createPartial()
            try file!.handle.write(bytes[...], at: 0)
            bytes = []
        }
        guard let partial = file else { throw ProtocolError(.internalError, "no file for \(item.label)") }
        file = nil
        partial.handle.close()
        var name = FileNamesOnDisk.sanitize(representation.suggestedFileName ?? item.label, fallback: "item")
        if !name.contains("." as Character), let ext = UTType(representation.contentType)?.preferredFilenameExtension {
            name += "." + ext
        }
        let kept: String
        do {
            kept = try sink.shelf.keep(partial: partial.name, size: size, name: name)
        } catch {
            sink.shelf.remove(partial.name)
            throw ProtocolError(.storage, "the watch cannot keep \(item.label): \(error)")
        }
        console.status(
            Console.Event(
                event: "saved", from: sink.agent, type: representation.contentType,
                path: sink.shelf.folder.path + "/" + kept, size: size, item: item.label, origin: item.origin),
            plain:
                "saved \(kept) (\(Format.bytes(UInt64(size))), \(representation.contentType)) from \(item.origin ?? sink.agent)"
        )
        sink.kept()
        return Ack(item: item.id, outcome: "saved", savedAs: kept)
    }

    /// Drops what was received of an unfinished item (a small item is simply sent again).
    func discard() {
        if let file {
            file.handle.close()
            sink.shelf.remove(file.name)
        }
        file = nil
        bytes = []
    }

    func suspend() { discard() }
}

/// The watch's folder for images and other kept items, held open as a directory handle. It never holds more than
/// `limit` bytes: before an item is kept, the oldest files are removed until it fits.
final class Shelf {
    let folder: Directory
    let limit: UInt64
    static let partialPrefix = ".watch-partial-"

    init(path: String, limit: UInt64) throws {
        self.limit = limit
        do {
            folder = try Directory.open(path, create: true, mode: 0o700)
            folder.setMode(0o700)
        } catch {
            throw ShareFailure(.cannotCreate, "cannot use \(path) for the watch's items: \(error)")
        }
        // Items cut short by an earlier run are sent again whole: their leftovers go.
        for name in folder.entries() where name.hasPrefix(Self.partialPrefix) { remove(name) }
    }

    var freeSpace: UInt64? { folder.freeSpace }

    func createPartial() throws -> (handle: OpenFile, name: String) {
        let name = Self.partialPrefix + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        do {
            return (try folder.openFile(name, .create, mode: 0o600), name)
        } catch {
            throw ProtocolError(.storage, "the watch cannot create a file in \(folder.path): \(error)")
        }
    }

    func remove(_ name: String) { _ = try? folder.remove(name) }

    /// Moves a verified partial into place under `name` (made unique), after making room for `size` bytes.
    func keep(partial: String, size: UInt64, name: String) throws -> String {
        makeRoom(for: size)
        for _ in 0..<100 {
            let target = folder.freeName(for: name)
            do {
                try folder.rename(partial, to: target, in: folder)
                return target
            } catch let error as DiskError where error.kind == .exists {
                continue
            }
        }
        throw DiskError(.exists, "no free name for \(name) in \(folder.path)")
    }

    /// Removes the oldest kept files until `size` more bytes fit within the limit.
    private func makeRoom(for size: UInt64) {
        var files: [(name: String, size: UInt64, modified: Int64)] = []
        for name in folder.entries() where !name.hasPrefix(".") {
            guard let info = folder.info(name), info.kind == .file else { continue }
            files.append((name, info.size, info.modifiedTime))
        }
        var total = files.reduce(UInt64(0)) { $0 + $1.size }
        for file in files.sorted(by: { $0.modified < $1.modified }) where total + size > limit {
            if (try? folder.remove(file.name)) == true { total -= file.size }
        }
    }
}
