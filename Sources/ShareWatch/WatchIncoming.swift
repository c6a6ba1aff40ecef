import CoreTransferable
import Glibc
import ShareLink
import ShareProtocol
import ShareTLS

/// One item the watch is receiving. Text and URLs (at most `--max-size`) are gathered in memory to be shown; anything
/// else (images) is written chunk by chunk to a hidden file in the shelf folder and renamed into place only once the
/// whole-item digest matches. Nothing larger than the limit is ever written: the receiver machine stops an item at
/// its offered size and at the limit.
final class WatchIncoming {
    let item: OfferItem
    let representation: OfferedRepresentation
    let isText: Bool
    private let shelf: Shelf
    private var bytes: [UInt8] = []
    private var file: (fd: Int32, path: String)?
    private let digests = SHA256Hasher()
    private var size: UInt64 = 0

    init(item: OfferItem, representation: OfferedRepresentation, shelf: Shelf) throws {
        self.item = item
        self.representation = representation
        self.shelf = shelf
        let type = UTType(representation.contentType)
        isText = type.map { $0.conforms(to: .plainText) || $0.conforms(to: .url) } ?? false
        if !isText { file = try shelf.createPartial() }
    }

    func append(_ data: ArraySlice<UInt8>, digest: [UInt8]) throws {
        digests.update(digest)
        if let file {
            do {
                try Syscalls.pwriteAll(file.fd, data, offset: Int64(size))
            } catch {
                throw ProtocolError(.storage, "the watch cannot write \(item.label): \(error)")
            }
        } else {
            bytes += data
        }
        size += UInt64(data.count)
    }

    /// Checks the whole-item digest, then shows the text or keeps the file; the acknowledgement says which.
    func finish(done: Done, agent: String, console: Console) throws -> Ack {
        guard size == done.size, digests.finalize().hexString == done.digest else {
            discard()
            throw ProtocolError(.digestMismatch, "\(item.label) does not match its whole-item digest")
        }
        if isText, let text = String(validating: bytes, as: UTF8.self) {
            console.item(
                Console.Event(
                    event: "text", from: agent, type: representation.contentType, text: text, size: size,
                    item: item.label),
                plain: text)
            return Ack(item: item.id, outcome: "printed")
        }
        if isText {
            // Not UTF-8 after all: kept as a file like any other item.
            file = try shelf.createPartial()
            try Syscalls.pwriteAll(file!.fd, bytes[...], offset: 0)
            bytes = []
        }
        guard let partial = file else { throw ProtocolError(.internalError, "no file for \(item.label)") }
        file = nil
        Glibc.close(partial.fd)
        var name = FileNamesOnDisk.sanitize(representation.suggestedFileName ?? item.label, fallback: "item")
        if !name.contains("." as Character), let ext = UTType(representation.contentType)?.preferredFilenameExtension {
            name += "." + ext
        }
        let kept: URL
        do {
            kept = try shelf.keep(partial: partial.path, size: size, name: name)
        } catch {
            unlink(partial.path)
            throw ProtocolError(.storage, "the watch cannot keep \(item.label): \(error)")
        }
        console.item(
            Console.Event(
                event: "saved", from: agent, type: representation.contentType, path: kept.path, size: size,
                item: item.label),
            plain: "saved \(kept.lastPathComponent) (\(size) bytes, \(representation.contentType)) from \(agent)")
        return Ack(item: item.id, outcome: "saved", savedAs: kept.lastPathComponent)
    }

    /// Drops what was received of an unfinished item (a small item is simply sent again).
    func discard() {
        if let file {
            Glibc.close(file.fd)
            unlink(file.path)
        }
        file = nil
        bytes = []
    }
}

/// The watch's folder for images and other kept items. It never holds more than `limit` bytes: before an item is
/// kept, the oldest files are removed until it fits.
final class Shelf {
    let folder: URL
    let limit: UInt64
    static let partialPrefix = ".watch-partial-"

    init(folder: URL, limit: UInt64) throws {
        self.folder = folder
        self.limit = limit
        do {
            try DevicePaths.ensurePrivateDirectory(folder)
        } catch {
            throw ShareError(.cannotCreate, "cannot use \(folder.path) for the watch's items: \(error)")
        }
        // Items cut short by an earlier run are sent again whole: their leftovers go.
        for name in PosixFiles.entries(folder.path)
        where name.hasPrefix(Self.partialPrefix) {
            unlink(folder.appendingPathComponent(name).path)
        }
    }

    var freeSpace: UInt64? { Syscalls.freeSpace(folder.path) }

    func createPartial() throws -> (fd: Int32, path: String) {
        let path = folder.appendingPathComponent(
            Self.partialPrefix + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        )
        .path
        let fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw ProtocolError(.storage, "the watch cannot create \(path): \(String(cString: strerror(errno)))")
        }
        return (fd, path)
    }

    /// Moves a verified partial into place under `name` (made unique), after making room for `size` bytes.
    func keep(partial: String, size: UInt64, name: String) throws -> URL {
        makeRoom(for: size)
        let target = FileNamesOnDisk.unique(name, in: folder)
        guard Syscalls.renameNoReplace(partial, to: target.path) else {
            throw AtomicFile.posixError("cannot rename into \(target.path)")
        }
        return target
    }

    /// Removes the oldest kept files until `size` more bytes fit within the limit.
    private func makeRoom(for size: UInt64) {
        var files: [(path: String, size: UInt64, modified: Int)] = []
        for name in PosixFiles.entries(folder.path) where !name.hasPrefix(".") {
            let path = folder.appendingPathComponent(name).path
            var info = stat()
            guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
            files.append((path, UInt64(info.st_size), info.st_mtim.tv_sec * 1_000_000_000 + info.st_mtim.tv_nsec))
        }
        var total = files.reduce(UInt64(0)) { $0 + $1.size }
        for file in files.sorted(by: { $0.modified < $1.modified }) where total + size > limit {
            if unlink(file.path) == 0 { total -= file.size }
        }
    }
}
