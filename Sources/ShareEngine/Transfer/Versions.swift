import FoundationEssentials
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

    /// A delivered file: where it went and what it was then (size, modification time, inode), and its digest as the
    /// transfer verified it (the item's whole digest: a hash list of its chunks, with their size and algorithm), by
    /// which a file whose time or inode changed is recognised as still the delivered version.
    struct Record: Codable {
        var name: String
        var size: UInt64
        var inode: UInt64
        var modified: Int64?
        var nanoseconds: Int?
        var digest: String?
        var chunkSize: Int?
        var algorithm: DigestAlgorithm?
    }

    /// What a delivered file's digest was checked with.
    struct Verified {
        var digest: String
        var chunkSize: Int
        var algorithm: DigestAlgorithm
    }

    private static func key(target: Directory, sender: DeviceID, name: String) -> String {
        let place = target.ownInfo.map { "\($0.device):\($0.inode)" } ?? target.path
        let text = "\(place)|\(sender.description)|\(name)"
        return String(SHA256Hasher.hash(Array(text.utf8)).hexString.prefix(32))
    }

    /// `sender`'s item saved as `placed` under the name it asked for (`name`) in `target`: `info` is what is placed
    /// (taken before the rename, which keeps its inode and times), `verified` the whole digest the transfer checked (a
    /// file), `tree` a folder's entries as they were extracted. Written before the item is moved into place: a
    /// receiver killed between the two still has the partial (and the record names nothing yet), and one killed just
    /// after holds the item and its record, so the next send of it costs its index, never the whole item again.
    func recordDelivery(
        target: Directory, sender: DeviceID, name: String, placed: String, info: FileInfo, verified: Verified? = nil,
        tree: FolderTree? = nil
    ) {
        guard info.kind == .file || info.kind == .directory else { return }
        let key = Self.key(target: target, sender: sender, name: name)
        var record = Record(name: placed, size: info.size, inode: info.inode)
        if info.kind == .file, let verified {
            record.modified = info.modified
            record.nanoseconds = info.modifiedNanoseconds
            record.digest = verified.digest
            record.chunkSize = verified.chunkSize
            record.algorithm = verified.algorithm
        }
        if info.kind == .directory, let tree {
            try? folder.writeAtomically("\(key).tree", Array(tree.encoded().utf8), durable: false)
        }
        guard let bytes = try? JSONEncoder().encode(record) else { return }
        try? folder.writeAtomically("\(key).delivered", Array(bytes), durable: false)
    }

    /// A folder's entries as a later version of it is compared against (nil past `maxTreeEntries`).
    static func tree(of path: String) -> FolderTree? {
        guard
            let plan = try? ArchivePlan.folder(
                URL(fileURLWithPath: path), maxEntries: Self.maxTreeEntries, measure: false)
        else { return nil }
        return FolderTree(plan)
    }

    /// The most entries of a delivered folder remembered for its next version to be a delta against.
    static let maxTreeEntries = 200_000

    /// The file `sender` last delivered under `name` into `target`, if it is still there and still that version:
    /// the same size, modification time and inode, or else the same digest (read again, with the chunk size and
    /// digest it was verified with). A file changed or replaced since is no basis: a sender learns nothing of bytes
    /// it did not send (docs/SECURITY.md).
    func delivered(target: Directory, sender: DeviceID, name: String, hasher: ChunkHasher) -> (
        name: String, info: FileInfo
    )? {
        let recordName = "\(Self.key(target: target, sender: sender, name: name)).delivered"
        guard let bytes = try? folder.readFile(recordName, limit: 64 << 10),
            var record = try? JSONDecoder().decode(Record.self, from: Data(bytes)),
            let info = target.info(record.name), info.kind == .file, info.size == record.size,
            let digest = record.digest, let chunkSize = record.chunkSize, let algorithm = record.algorithm
        else { return nil }
        if info.inode == record.inode, info.modified == record.modified, info.modifiedNanoseconds == record.nanoseconds
        {
            return (record.name, info)
        }
        guard
            let now = try? Self.wholeDigest(
                target: target, name: record.name, info: info, chunkSize: chunkSize, hasher: hasher.make(algorithm)),
            now == digest
        else { return nil }
        // The same bytes (touched, or copied back): remembered as they are now, so the next look is quick.
        record.inode = info.inode
        record.modified = info.modified
        record.nanoseconds = info.modifiedNanoseconds
        if let bytes = try? JSONEncoder().encode(record) {
            try? folder.writeAtomically(recordName, Array(bytes), durable: false)
        }
        return (record.name, info)
    }

    /// The folder `sender` last delivered under `name` into `target`, and what of it is still as delivered.
    func deliveredFolder(target: Directory, sender: DeviceID, name: String) -> (name: String, tree: FolderTree)? {
        let key = Self.key(target: target, sender: sender, name: name)
        guard let bytes = try? folder.readFile("\(key).delivered", limit: 64 << 10),
            let record = try? JSONDecoder().decode(Record.self, from: Data(bytes)),
            let info = target.info(record.name), info.kind == .directory,
            let text = try? folder.readFile("\(key).tree", limit: 256 << 20),
            let tree = FolderTree(decoding: String(decoding: text, as: UTF8.self))
        else { return nil }
        return (record.name, tree)
    }

    /// A file's whole digest as a transfer computes it: the digest of its chunks' digests, in order.
    static func wholeDigest(target: Directory, name: String, info: FileInfo, chunkSize: Int, hasher: ChunkHasher)
        throws -> String
    {
        guard chunkSize > 0 else { throw DeltaBasisChanged() }
        let file = try target.openFile(name, .read)
        defer { file.close() }
        file.adviseSequential()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        var digests: [UInt8] = []
        var offset: UInt64 = 0
        repeat {
            var filled = 0
            while filled < chunkSize, offset + UInt64(filled) < info.size {
                let n = try file.read(
                    into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]), at: offset + UInt64(filled))
                guard n > 0 else { throw DeltaBasisChanged() }
                filled += n
            }
            digests += hasher.digest(UnsafeRawBufferPointer(rebasing: buffer[0..<filled]))
            offset += UInt64(filled)
        } while offset < info.size
        return hasher.digest(digests).hexString
    }

    /// The index of `name` in `target` by `hasher`'s digest: from the cache when the file's size, modification time
    /// and inode are those it was built for, else built now (reading the file once) and cached.
    package func index(target: Directory, name: String, info: FileInfo, hasher: ChunkHasher) -> BasisIndex? {
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
    package func open(target: Directory, name: String, info: FileInfo) throws -> BasisReader {
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
    /// times and modes as extracted), of the entries still as they were delivered (the same size, time and inode):
    /// what was added or changed there since is left out, never read into a sender's basis. Written once to a file
    /// that is removed at once and read while it is open, and indexed as it is written. A folder changed since is
    /// simply a basis that matches less.
    func folderBasis(target: Directory, name: String, tree: FolderTree, hasher: ChunkHasher) -> ItemBasis? {
        guard let whole = try? ArchivePlan.folder(URL(fileURLWithPath: target.path + "/" + name)),
            let plan = try? ArchivePlan(entries: whole.entries.filter { tree.holds($0) }),
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

    /// A descriptor of the file of its own, made once and shared by every range: the chunk writer's thread may use
    /// it after this reader is closed, and it closes when the last range and the reader are gone.
    private var shared: OpenFile?

    /// A range of this file, on that descriptor.
    func origin(at offset: UInt64, length: Int) -> ChunkOrigin? {
        if shared == nil { shared = try? file.duplicate() }
        return shared.map { BasisRange(file: $0, offset: offset) }
    }
}

/// A range of a basis file that a chunk equals: `PartialFile` shares its blocks where the file system can.
final class BasisRange: ChunkOrigin {
    let file: OpenFile
    let offset: UInt64
    init(file: OpenFile, offset: UInt64) {
        self.file = file
        self.offset = offset
    }
}
