import Foundation
import ShareArchive
import ShareDisk
import ShareProtocol
import ShareTLS

/// What a receiver remembers of the files it delivered, so that a later version of one can arrive as a delta: which
/// sender's item became which file in which folder, and the index of that file (rebuilt when its size, modification
/// time or inode changed). Kept in the device's state folder, never in the folder items are saved to.
package final class Versions: Sendable {
    let folder: Directory

    /// Records and indexes not used for this long are removed.
    static let maxAge: Int64 = 30 * 24 * 3600

    package init(directory: URL) throws {
        folder = try Directory.open(directory.path, create: true, mode: 0o700)
    }

    /// A delivered file: where it went and what it was then.
    struct Record: Codable {
        var name: String
        var size: UInt64
        var inode: UInt64
    }

    private static func key(target: Directory, sender: DeviceID, name: String) -> String {
        let place = target.ownInfo.map { "\($0.device):\($0.inode)" } ?? target.path
        let text = "\(place)|\(sender.description)|\(name)"
        return String(SHA256Hasher.hash(Array(text.utf8)).hexString.prefix(32))
    }

    /// `sender`'s item saved as `placed` under the name it asked for (`name`) in `target`.
    func recordDelivery(target: Directory, sender: DeviceID, name: String, placed: String) {
        guard let info = target.info(placed), info.kind == .file || info.kind == .directory else { return }
        let record = Record(name: placed, size: info.size, inode: info.inode)
        guard let bytes = try? JSONEncoder().encode(record) else { return }
        try? folder.writeAtomically(
            "\(Self.key(target: target, sender: sender, name: name)).delivered", Array(bytes), durable: false)
    }

    /// The file (or folder) `sender` last delivered under `name` into `target`, if it is still there as one.
    func delivered(target: Directory, sender: DeviceID, name: String, kind: FileInfo.Kind = .file)
        -> (name: String, info: FileInfo)?
    {
        guard
            let bytes = try? folder.readFile(
                "\(Self.key(target: target, sender: sender, name: name)).delivered", limit: 64 << 10),
            let record = try? JSONDecoder().decode(Record.self, from: Data(bytes)),
            let info = target.info(record.name), info.kind == kind
        else { return nil }
        return (record.name, info)
    }

    /// The index of `name` in `target` by `hasher`'s digest: from the cache when the file's size, modification time
    /// and inode are those it was built for, else built now (reading the file once) and cached.
    func index(target: Directory, name: String, info: FileInfo, hasher: ChunkHasher) -> BasisIndex? {
        guard info.size >= Delta.minimumSize else { return nil }
        let cacheName = "\(info.device)-\(info.inode)-\(hasher.algorithm.rawValue).index"
        let stamp = "\(info.size) \(info.modified) \(info.modifiedNanoseconds)\n"
        if let cached = try? folder.readFile(cacheName, limit: Delta.maxPayload + 256),
            let newline = cached.firstIndex(of: UInt8(ascii: "\n")),
            String(decoding: cached[...newline], as: UTF8.self) == stamp,
            let index = try? BasisIndex.decode(Array(cached[(newline + 1)...])), index.size == info.size
        {
            return index
        }
        guard let file = try? target.openFile(name, .read) else { return nil }
        defer { file.close() }
        file.adviseSequential()
        guard let now = file.info, now.inode == info.inode, now.size == info.size,
            let index = try? BasisIndex.build(
                item: "", size: info.size, read: { try file.read(into: $0, at: $1) }),
            index.groups.count <= Delta.maxGroups
        else { return nil }
        // The file may have changed while it was read: the cache is kept only when it did not.
        if let after = file.info, after.modified == info.modified,
            after.modifiedNanoseconds == info.modifiedNanoseconds, after.size == info.size
        {
            try? folder.writeAtomically(cacheName, Array(stamp.utf8) + index.encoded(), durable: false)
        }
        return index
    }

    /// Opens `name` in `target` to read the basis from, when it is still the file that was indexed.
    func open(target: Directory, name: String, info: FileInfo) throws -> BasisReader {
        let file = try target.openFile(name, .read)
        guard let now = file.info, now.inode == info.inode, now.size == info.size, now.modified == info.modified,
            now.modifiedNanoseconds == info.modifiedNanoseconds
        else {
            file.close()
            throw DeltaBasisChanged()
        }
        return BasisFile(file)
    }

    /// A folder delivered earlier, as the tar stream its sender would make of it now (entries in the same order,
    /// times and modes as extracted): written once to a file that is removed at once and read while it is open, and
    /// indexed as it is written. A folder changed since is simply a basis that matches less.
    func folderBasis(target: Directory, name: String, hasher: ChunkHasher) -> ItemBasis? {
        guard let plan = try? ArchivePlan.folder(URL(fileURLWithPath: target.path + "/" + name)),
            plan.streamSize >= Delta.minimumSize
        else { return nil }
        let temporary = "folder-\(UUID().uuidString).tar"
        guard let file = try? folder.openFile(temporary, .create) else { return nil }
        _ = try? folder.remove(temporary)
        var builder = BasisIndex.Builder(item: "", parameters: .forSize(plan.streamSize, archive: true))
        var offset: UInt64 = 0
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        do {
            let writer = try ArchiveWriter { bytes in
                try file.write(bytes, at: offset)
                offset += UInt64(bytes.count)
                builder.feed(bytes)
            }
            try plan.write(to: writer, buffer: buffer)
            try writer.finish()
        } catch {
            file.close()
            return nil
        }
        let index = builder.finish()
        guard index.size == offset, index.groups.count <= Delta.maxGroups else {
            file.close()
            return nil
        }
        let reader = BasisFile(file, closes: false)
        return ItemBasis(index: index) { reader }
    }

    /// Removes records and indexes nobody used for `maxAge`.
    func removeStale() {
        let now = Int64(Date().timeIntervalSince1970)
        for name in folder.entries() {
            guard let info = folder.info(name), now - info.modified > Self.maxAge else { continue }
            _ = try? folder.remove(name)
        }
    }
}

/// A basis file open for reading.
final class BasisFile: BasisReader {
    let file: OpenFile
    /// False when the file outlives this reader (a folder's stream, read again for each patch).
    let closes: Bool
    init(_ file: OpenFile, closes: Bool = true) {
        self.file = file
        self.closes = closes
    }
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws -> Int {
        try file.read(into: buffer, at: offset)
    }
    func close() { if closes { file.close() } }
}
