import CoreTransferable
import FoundationEssentials
import ShareDisk
import ShareEngine
import ShareProtocol
import ShareSync
import ShareTLS

/// A file of a shared folder offered to a device that pulls it: read through the folder's handles, offered only
/// while this device's index holds it at the digest asked for and the disk still holds what the index recorded, and
/// checked again after its last chunk (a file changed while it was read is reported as changed, never sent as a mix).
/// A small one read and checked moments ago for another device is sent as it was read then (`ServedContents`).
final class SyncFileSource: ItemSource {
    let offer: OfferItem
    let directory: Directory
    let leaf: String
    let stamp: DiskStamp
    /// The content digest the index names (`ContentDigest`).
    let digest: [UInt8]
    /// The puller's version of the file, when it described one (`SmallDelta.Signature`, base64).
    let basis: String?

    /// The sources of the items this device holds at the content asked for now (the others left out); the
    /// folders they are in are opened once each.
    static func sources(_ items: [FolderPull.Item], folder: SharedFolder) -> [SyncFileSource] {
        let items = items.filter { SyncNames.isValidPath($0.path) && !SyncNames.isInternal($0.path) }
        // What the index recorded of every path, in one look (the folder's lock is taken once, not once a file).
        let locals = folder.withFolder { state in items.map { state.store.local($0.path) } }
        var directories: [String: Directory?] = [:]
        return zip(items, locals).compactMap { item, local in
            guard let local else { return nil }
            let path = item.path
            let slash = path.utf8.lastIndex(of: UInt8(ascii: "/"))
            let parent = slash.map { String(path[..<$0]) } ?? ""
            let leaf = slash.map { String(path[path.index(after: $0)...]) } ?? path
            if directories[parent] == nil {
                let components = parent.split(separator: "/").map(String.init)
                directories[parent] = .some(try? folder.root.directory(components: components))
            }
            guard let directory = directories[parent] ?? nil else { return nil }
            return SyncFileSource(item, leaf: leaf, in: directory, recorded: local)
        }
    }

    /// The source of `item`, or nil when this device does not hold that content now (`local`: what the index
    /// recorded of its path).
    init?(_ item: FolderPull.Item, leaf: String, in directory: Directory, recorded local: LocalEntry) {
        guard !local.entry.deleted, local.entry.kind == .file, local.entry.digest.isHex(item.digest),
            local.entry.size == item.size, let recorded = local.stamp, recorded.kind == .file
        else { return nil }
        // A small file is looked at once it is read (what was read must be what the index recorded, or it is left
        // out); a large one now, so that one changed since is not offered.
        let stamp: DiskStamp
        if item.size <= UInt64(FolderFiles.largest) {
            stamp = recorded
        } else {
            guard let info = directory.info(leaf), let found = DiskFolder.stamp(info), found.kind == .file,
                recorded.same(as: found)
            else { return nil }
            stamp = found
        }
        self.directory = directory
        self.leaf = leaf
        self.stamp = stamp
        digest = local.entry.digest
        basis = item.basis
        offer = OfferItem(
            id: item.ref, label: item.path,
            representations: [
                OfferedRepresentation(
                    contentType: "public.data", kind: .file, size: item.size, suggestedFileName: leaf)
            ], declarations: [], version: "sync-" + item.digest)
    }

    /// The whole file, read now, when it is still what the index recorded after it was read (a small file).
    func wholeContents() -> [UInt8]? { Self.read(leaf, in: directory, stamp: stamp) }

    /// The bytes of the small file `leaf`, when it is still as `stamp` says after it was read.
    static func read(_ leaf: String, in directory: Directory, stamp: DiskStamp) -> [UInt8]? {
        guard let file = try? directory.openFile(leaf, .readLeavingAccessTime) else { return nil }
        defer { file.close() }
        let size = Int(stamp.size)
        var whole = true
        let bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            let into = UnsafeMutableRawBufferPointer(buffer)
            var filled = 0
            while filled < size {
                let n =
                    (try? file.read(
                        into: UnsafeMutableRawBufferPointer(rebasing: into[filled..<size]), at: UInt64(filled)))
                    ?? 0
                guard n > 0 else { break }
                filled += n
            }
            whole = filled == size
            count = filled
        }
        guard whole else { return nil }
        // The file read (whatever is at its name by now) is still the one the stamp describes.
        guard let info = file.info, let now = DiskFolder.stamp(info), now.same(as: stamp) else { return nil }
        return bytes
    }

    func produce(representation index: Int) throws -> ProducedChunks {
        let file = try directory.openFile(leaf, .readLeavingAccessTime)
        return .positional(SyncFileChunks(file: file, source: self))
    }
}

/// The bytes of a pulled file.
final class SyncFileChunks: PositionalSource {
    let file: OpenFile
    let source: SyncFileSource
    let size: UInt64

    init(file: OpenFile, source: SyncFileSource) {
        self.file = file
        self.source = source
        size = source.stamp.size
        file.adviseSequential()
    }

    var fileName: String? { source.leaf }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws -> Int {
        try file.read(into: buffer, at: offset)
    }

    func hashHeld(_ indices: [Int], chunkSize: Int, hasher: ChunkHasher) -> HeldDigests {
        ComputedDigests(source: self, indices: indices, chunkSize: chunkSize, hasher: hasher)
    }

    func checkUnchanged() throws {
        guard let info = source.directory.info(source.leaf), let now = DiskFolder.stamp(info),
            now.same(as: source.stamp)
        else {
            throw ProtocolError(.sourceChanged, "\(source.offer.label) changed while it was being sent")
        }
    }

    func close() { file.close() }
}
