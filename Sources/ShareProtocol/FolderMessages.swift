/// Shared folders on the wire (docs/PROTOCOL.md, "Shared folders"): the folders a device shares with its peer and
/// where each side's index stands (`FolderHello`), the entries of an index recorded since a sequence
/// (`IndexUpdate`, binary), and a pull of files' content (`FolderPull`, the first frame of a session the puller
/// opens, answered as a transfer). Wire types only: the folder logic converts them to its own.

/// A folder as one side of a link announces it.
public struct FolderAnnouncement: Sendable, Codable, Equatable {
    /// The folder's identity: never its name (two folders of one name are two folders).
    public var id: String
    /// What the person named it, shown to the others.
    public var label: String
    /// `send-receive`, `send-only` or `receive-only`: how the announcing device treats it.
    public var type: String
    /// The devices the announcing side shares it with (device IDs).
    public var devices: [String]
    /// The announcer's index: its identity (hex, new whenever the index starts over) and its latest sequence.
    public var indexID: String
    public var sequence: UInt64
    /// What the announcer holds of the other side's index: its identity ("" for none) and the last sequence of it
    /// received in order. The other side sends what follows (everything, when the identity is not its own).
    public var heldIndexID: String
    public var heldSequence: UInt64

    public init(
        id: String, label: String, type: String, devices: [String], indexID: String, sequence: UInt64,
        heldIndexID: String, heldSequence: UInt64
    ) {
        self.id = id
        self.label = label
        self.type = type
        self.devices = devices
        self.indexID = indexID
        self.sequence = sequence
        self.heldIndexID = heldIndexID
        self.heldSequence = heldSequence
    }

    /// Folder IDs: 1–64 letters, digits and `-`.
    public static func validID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 64
            && id.utf8.allSatisfy {
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D
            }
    }

    public func validate() throws(ProtocolError) {
        guard Self.validID(id), label.utf8.count <= 255, !label.utf8.contains(where: { $0 < 0x20 }),
            ["send-receive", "send-only", "receive-only"].contains(type), devices.count <= Limits.maxFolderDevices,
            indexID.utf8.count <= 16, heldIndexID.utf8.count <= 16
        else { throw ProtocolError(.badMessage, "a folder announcement that breaks its rules") }
    }
}

/// A folder the receiver of a hello shares with its sender, or offered it, that the sender does not share back, and
/// why: so that the device that shares it can say more than "not sharing". A state this device does not know (a
/// later version's) is read as saying nothing.
public struct FolderWithheld: Sendable, Codable, Equatable {
    /// Offered to the sender's person, not accepted yet.
    public static let offered = "offered"
    /// Its person declined the offer (it is not offered again).
    public static let declined = "declined"
    /// Accepted, and paused there.
    public static let paused = "paused"
    /// Accepted once, and removed there since.
    public static let removed = "removed"
    /// Still shared there, with other devices: no longer with this one.
    public static let unshared = "unshared"
    /// The states this version knows.
    public static let known = [offered, declined, paused, removed, unshared]

    public var id: String
    public var state: String

    public init(id: String, state: String) {
        self.id = id
        self.state = state
    }
}

/// The first frame of a folder link, each way: every folder the sender shares with the receiver; and (optional: an
/// earlier version sends none) the folders the receiver shares with the sender that the sender does not, with why.
public struct FolderHello: Sendable, Codable, Equatable {
    public var folders: [FolderAnnouncement]
    public var withheld: [FolderWithheld]?

    public init(folders: [FolderAnnouncement], withheld: [FolderWithheld]? = nil) {
        self.folders = folders
        self.withheld = withheld
    }

    public func validate() throws(ProtocolError) {
        guard folders.count <= Limits.maxFolders, (withheld?.count ?? 0) <= Limits.maxFolders else {
            throw ProtocolError(.badMessage, "a folder hello of more than \(Limits.maxFolders) folders")
        }
        for folder in folders { try folder.validate() }
        for folder in withheld ?? [] where !FolderAnnouncement.validID(folder.id) || folder.state.utf8.count > 32 {
            throw ProtocolError(.badMessage, "a folder hello that withholds a folder without a valid ID")
        }
    }
}

/// One entry of an index, as it crosses.
public struct IndexRecord: Sendable, Equatable {
    public var path: String
    /// 0 file, 1 folder, 2 link.
    public var kind: UInt8
    public var deleted: Bool
    public var size: UInt64
    public var modified: Int64
    public var mode: UInt32
    public var digest: [UInt8]
    public var target: String
    public var sequence: UInt64
    public var modifiedBy: UInt64
    /// (device, counter) pairs.
    public var version: [(UInt64, UInt64)]

    public init(
        path: String, kind: UInt8, deleted: Bool, size: UInt64, modified: Int64, mode: UInt32, digest: [UInt8],
        target: String, sequence: UInt64, modifiedBy: UInt64, version: [(UInt64, UInt64)]
    ) {
        self.path = path
        self.kind = kind
        self.deleted = deleted
        self.size = size
        self.modified = modified
        self.mode = mode
        self.digest = digest
        self.target = target
        self.sequence = sequence
        self.modifiedBy = modifiedBy
        self.version = version
    }

    public static func == (a: IndexRecord, b: IndexRecord) -> Bool {
        a.path == b.path && a.kind == b.kind && a.deleted == b.deleted && a.size == b.size && a.modified == b.modified
            && a.mode == b.mode && a.digest == b.digest && a.target == b.target && a.sequence == b.sequence
            && a.modifiedBy == b.modifiedBy && a.version.map { [$0.0, $0.1] } == b.version.map { [$0.0, $0.1] }
    }

    /// About how many bytes it takes on the wire.
    public var wireSize: Int {
        2 + path.utf8.count + 40 + 1 + digest.count + 2 + target.utf8.count + 2 + 16 * version.count
    }
}

/// Entries of the sender's index for one folder: those recorded after `from` up to `to` (sequences), in order. A
/// receiver applies it only when it continues what it holds (`from` is the last sequence it has of that index, or
/// 0 with a new index identity: everything again).
public struct IndexUpdate: Sendable, Equatable {
    public var folder: String
    public var indexID: String
    public var from: UInt64
    public var to: UInt64
    public var records: [IndexRecord]

    public init(folder: String, indexID: String, from: UInt64, to: UInt64, records: [IndexRecord]) {
        self.folder = folder
        self.indexID = indexID
        self.from = from
        self.to = to
        self.records = records
    }

    /// `folder (1 + n) | indexID (1 + n) | from (8) | to (8) | records (4) | per record: path (2 + n), kind (1),
    /// deleted (1), size (8), modified (8), mode (4), digest (1 + n), target (2 + n), sequence (8), modifiedBy (8),
    /// counters (2), counters × (device (8), value (8))`, big endian.
    public func encoded() -> [UInt8] {
        var out = WireWriter()
        out.string8(folder)
        out.string8(indexID)
        out.u64(from)
        out.u64(to)
        out.u32(UInt32(records.count))
        for record in records {
            out.string16(record.path)
            out.u8(record.kind)
            out.u8(record.deleted ? 1 : 0)
            out.u64(record.size)
            out.u64(UInt64(bitPattern: record.modified))
            out.u32(record.mode)
            out.u8(UInt8(record.digest.count))
            out.bytes += record.digest
            out.string16(record.target)
            out.u64(record.sequence)
            out.u64(record.modifiedBy)
            out.u16(UInt16(record.version.count))
            for (device, value) in record.version {
                out.u64(device)
                out.u64(value)
            }
        }
        return out.bytes
    }

    /// Reads an update, every field checked against its limit before anything is kept.
    public static func decode(_ payload: [UInt8]) throws(ProtocolError) -> IndexUpdate { try decode(payload[...]) }

    /// As above, from part of a buffer (what `Packed.unpack` gives).
    public static func decode(_ payload: ArraySlice<UInt8>) throws(ProtocolError) -> IndexUpdate {
        var reader = WireReader(payload, what: "index update")
        let folder = try reader.string8()
        let indexID = try reader.string8()
        let from = try reader.u64()
        let to = try reader.u64()
        let count = Int(try reader.u32())
        guard FolderAnnouncement.validID(folder), indexID.utf8.count <= 16, from <= to,
            count <= payload.count / 40
        else { throw ProtocolError(.badMessage, "an index update whose header breaks its rules") }
        var records: [IndexRecord] = []
        records.reserveCapacity(count)
        for _ in 0..<count {
            let path = try reader.string16()
            let kind = try reader.u8()
            let deleted = try reader.u8()
            let size = try reader.u64()
            let modified = Int64(bitPattern: try reader.u64())
            let mode = try reader.u32()
            let digest = try reader.take(Int(try reader.u8()))
            let target = try reader.string16()
            let sequence = try reader.u64()
            let modifiedBy = try reader.u64()
            let counters = Int(try reader.u16())
            guard kind <= 2, deleted <= 1, counters <= Limits.maxFolderDevices, digest.count <= 64,
                path.utf8.count <= Limits.maxPathBytes, target.utf8.count <= Limits.maxPathBytes,
                sequence > from, sequence <= to
            else { throw ProtocolError(.badMessage, "an index entry that breaks its rules") }
            var version: [(UInt64, UInt64)] = []
            for _ in 0..<counters { version.append((try reader.u64(), try reader.u64())) }
            records.append(
                IndexRecord(
                    path: path, kind: kind, deleted: deleted == 1, size: size, modified: modified, mode: mode,
                    digest: digest, target: target, sequence: sequence, modifiedBy: modifiedBy, version: version))
        }
        guard reader.remaining == 0 else {
            throw ProtocolError(.badMessage, "an index update with bytes after its entries")
        }
        return IndexUpdate(folder: folder, indexID: indexID, from: from, to: to, records: records)
    }
}

/// A pull: the files whose content the sender of this frame wants from the receiver, each named by path and by the
/// version and digest it must be. The receiver answers as a transfer's sender, offering those it holds at exactly
/// that version (each item's id is the `ref` given here); the rest it leaves out of its offer.
public struct FolderPull: Sendable, Codable, Equatable {
    public struct Item: Sendable, Codable, Equatable {
        public var ref: String
        public var path: String
        /// Hex.
        public var digest: String
        public var size: UInt64
        /// For a small file: the puller's version of it, as a `SmallDelta.Signature` (base64), when it has one.
        public var basis: String?
        public init(ref: String, path: String, digest: String, size: UInt64, basis: String? = nil) {
            self.ref = ref
            self.path = path
            self.digest = digest
            self.size = size
            self.basis = basis
        }
    }

    public var folder: String
    public var items: [Item]

    public init(folder: String, items: [Item]) {
        self.folder = folder
        self.items = items
    }

    public func validate() throws(ProtocolError) {
        guard FolderAnnouncement.validID(folder), !items.isEmpty, items.count <= Offer.maxItems,
            items.allSatisfy({
                !$0.ref.isEmpty && $0.ref.utf8.count <= 64 && $0.path.utf8.count <= Limits.maxPathBytes
                    && $0.digest.utf8.count <= 128 && ($0.basis?.utf8.count ?? 0) <= 1024
            })
        else { throw ProtocolError(.badMessage, "a pull that breaks its rules") }
    }

    /// What a device lists in its hello when it reads pulls in their binary form (`frame(_:binary:)`).
    public static let binaryFeature = "folder-pull-1"

    /// The frame of this pull: binary to a device whose hello lists `binaryFeature`, JSON to one that does not.
    /// Binary: `0x01 | folder (1 + n) | count (4)`, then per item `ref (1 + n) | path (2 + n) | digest (1 + n) |
    /// size (8) | basis (2 + n, empty: none)` (a JSON payload starts with `{`).
    public func frame(_ type: FrameType, binary: Bool) -> Frame {
        guard binary else { return MessageCoding.frame(type, self) }
        var out = WireWriter()
        out.bytes.reserveCapacity(16 + items.reduce(0) { $0 + $1.ref.utf8.count + $1.path.utf8.count + 80 })
        out.u8(Self.binaryMark)
        out.string8(folder)
        out.u32(UInt32(items.count))
        for item in items {
            out.string8(item.ref)
            out.string16(item.path)
            out.string8(item.digest)
            out.u64(item.size)
            out.string16(item.basis ?? "")
        }
        return Frame(type: type, payload: out.bytes)
    }

    private static let binaryMark: UInt8 = 0x01

    /// Reads a pull in either form, checked against its rules (`validate`) before it is used.
    public static func decode(_ frame: Frame) throws(ProtocolError) -> FolderPull {
        guard frame.payload.first == binaryMark else {
            let pull = try MessageCoding.decode(FolderPull.self, from: frame)
            try pull.validate()
            return pull
        }
        var reader = WireReader(frame.payload[1...], what: "pull")
        let folder = try reader.string8()
        let count = Int(try reader.u32())
        // Each item takes at least 14 bytes: a count beyond what the payload could hold is refused before anything
        // is kept.
        guard count > 0, count <= Offer.maxItems, count <= reader.remaining / 14 else {
            throw ProtocolError(.badMessage, "a pull that breaks its rules")
        }
        var items: [Item] = []
        items.reserveCapacity(count)
        for _ in 0..<count {
            let ref = try reader.string8()
            let path = try reader.string16()
            let digest = try reader.string8()
            let size = try reader.u64()
            let basis = try reader.string16()
            items.append(Item(ref: ref, path: path, digest: digest, size: size, basis: basis.isEmpty ? nil : basis))
        }
        guard reader.remaining == 0 else { throw ProtocolError(.badMessage, "a pull with bytes after its items") }
        let pull = FolderPull(folder: folder, items: items)
        try pull.validate()
        return pull
    }
}

/// Whole small files of a pull, several to a frame: what per-file transfers would spend more on than the files
/// themselves (an offer, a selection, a resume, a digest and an answer each). A file travels here when the pull
/// names it at most `largest` bytes long; the puller checks each against the content digest its index names.
///
/// A `Packed` message whose body is, per file, `ref (1 + n) | kind (1: 0 whole, 1 patch) | size (4) | length (4) |
/// bytes` (the file, or a `SmallDelta` patch of it).
public struct FolderFiles: Sendable, Equatable {
    /// Files up to this size travel whole in these frames.
    public static let largest = 64 << 10
    /// About how many bytes of files a frame carries before the next one starts.
    public static let frameBytes = 1 << 20

    public struct File: Sendable, Equatable {
        public var ref: String
        /// The file's size.
        public var size: Int
        /// `bytes` is a patch against the version the puller described (`SmallDelta`), not the file itself.
        public var patch: Bool
        public var bytes: [UInt8]
        public init(ref: String, bytes: [UInt8]) {
            self.ref = ref
            size = bytes.count
            patch = false
            self.bytes = bytes
        }
        public init(ref: String, size: Int, patch: [UInt8]) {
            self.ref = ref
            self.size = size
            self.patch = true
            bytes = patch
        }
    }
    public var files: [File]
    public init(files: [File]) { self.files = files }

    /// The frame's payload (`Packed`: compressed with `codec` when that saves a tenth or more).
    public func encoded(codec: ChunkCodec?) -> [UInt8] { Array(built(codec: codec)[Limits.frameHeaderSize...]) }

    /// The whole frame as it crosses, built in one buffer: room for the frame's header at the start
    /// (`FrameChannel.send(_:built:)` fills it in), then the payload (`encoded(codec:)`). Files that do not compress
    /// are copied once, from their arrays into this one.
    public func built(codec: ChunkCodec?) -> [UInt8] {
        let room = Limits.frameHeaderSize + Packed.headerSize
        var records = WireWriter()
        records.bytes.reserveCapacity(room + files.reduce(0) { $0 + $1.ref.utf8.count + 10 + $1.bytes.count })
        records.bytes += repeatElement(0, count: room)
        for file in files {
            records.string8(file.ref)
            records.u8(file.patch ? 1 : 0)
            records.u32(UInt32(file.size))
            records.u32(UInt32(file.bytes.count))
            records.bytes += file.bytes
        }
        Packed.pack(inPlace: &records.bytes, from: room, codec: codec)
        return records.bytes
    }

    /// Reads a frame: every file checked against `largest`.
    public static func decode(_ payload: [UInt8], codec: ChunkCodec?) throws(ProtocolError) -> FolderFiles {
        let records = try Packed.unpack(payload, codec: codec, limit: Limits.maxChunkPayload, what: "files frame")
        var reader = WireReader(records, what: "files frame")
        var files: [File] = []
        while reader.remaining > 0 {
            let ref = try reader.string8()
            let kind = try reader.u8()
            let size = Int(try reader.u32())
            let length = Int(try reader.u32())
            guard !ref.isEmpty, kind <= 1, size <= largest, kind == 1 ? length <= 2 * largest : length == size else {
                throw ProtocolError(.badMessage, "a files frame with a file that breaks its rules")
            }
            let bytes = try reader.take(length)
            files.append(kind == 1 ? File(ref: ref, size: size, patch: bytes) : File(ref: ref, bytes: bytes))
        }
        return FolderFiles(files: files)
    }
}

/// A binary message as it crosses, compressed when that pays: `flags (1: bit 0 = zstd) | length (4) | body`, the
/// length being the message's before compression (checked against the frame's limit before anything is
/// decompressed). Index updates and pulls' small files travel so.
public enum Packed {
    /// The bytes before the body: flags and length.
    public static let headerSize = 5

    public static func pack(_ message: [UInt8], codec: ChunkCodec?) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: headerSize) + message
        pack(inPlace: &buffer, from: headerSize, codec: codec)
        return buffer
    }

    /// Packs the message that `buffer` holds from `start` on, whose last `headerSize` bytes before `start` are room
    /// for the header: in place when it crosses as it is, else into a new buffer with the same room before it.
    static func pack(inPlace buffer: inout [UInt8], from start: Int, codec: ChunkCodec?) {
        let count = buffer.count - start
        let room = start - headerSize
        if let codec, count >= 256,
            let packed = buffer.withUnsafeBytes({
                codec.compress(UnsafeRawBufferPointer(rebasing: $0[start...]), level: 3, minSaving: 0.1)
            })
        {
            var out = WireWriter()
            out.bytes.reserveCapacity(start + packed.count)
            out.bytes += repeatElement(0, count: room)
            out.u8(1)
            out.u32(UInt32(count))
            out.bytes += packed
            buffer = out.bytes
            return
        }
        buffer[room] = 0
        for n in 0..<4 { buffer[room + 1 + n] = UInt8((UInt32(count) >> UInt32(24 - 8 * n)) & 0xFF) }
    }

    /// The message a payload holds: part of `payload` itself when it crossed as it is.
    public static func unpack(_ payload: [UInt8], codec: ChunkCodec?, limit: Int, what: String) throws(ProtocolError)
        -> ArraySlice<UInt8>
    {
        var head = WireReader(payload, what: what)
        let flags = try head.u8()
        let length = Int(try head.u32())
        guard flags <= 1, length <= limit else {
            throw ProtocolError(.badMessage, "a \(what) whose header breaks its rules")
        }
        let body = payload[headerSize...]
        guard flags == 1 else {
            guard body.count == length else { throw ProtocolError(.badMessage, "a \(what) cut short") }
            return body
        }
        guard let codec else { throw ProtocolError(.badMessage, "a compressed \(what) nobody asked for") }
        var message = [UInt8](repeating: 0, count: length)
        do {
            try body.withUnsafeBytes { compressed in
                try message.withUnsafeMutableBytes { try codec.decompress(compressed, into: $0, expected: length) }
            }
        } catch {
            throw ProtocolError(.badMessage, "a \(what) that does not decompress to its length")
        }
        return message[...]
    }
}

/// The end of a pull's small files: whether a transfer of its larger files follows on the same session.
public struct FolderFilesEnd: Sendable, Codable, Equatable {
    public var more: Bool
    public init(more: Bool) { self.more = more }
}

/// Big-endian writing of binary messages.
struct WireWriter {
    var bytes: [UInt8] = []
    mutating func u8(_ value: UInt8) { bytes.append(value) }
    mutating func u16(_ value: UInt16) { bytes += [UInt8(value >> 8), UInt8(value & 0xFF)] }
    mutating func u32(_ value: UInt32) {
        for shift in stride(from: 24, through: 0, by: -8) { bytes.append(UInt8((value >> UInt32(shift)) & 0xFF)) }
    }
    mutating func u64(_ value: UInt64) {
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8((value >> UInt64(shift)) & 0xFF)) }
    }
    mutating func string8(_ text: String) {
        let utf8 = Array(text.utf8.prefix(255))
        u8(UInt8(utf8.count))
        bytes += utf8
    }
    mutating func string16(_ text: String) {
        let utf8 = Array(text.utf8.prefix(65_535))
        u16(UInt16(utf8.count))
        bytes += utf8
    }
}

/// Big-endian reading of binary messages from a peer: every read checked against what is left.
struct WireReader {
    let bytes: ArraySlice<UInt8>
    var at: Int
    let what: String

    init(_ bytes: ArraySlice<UInt8>, what: String) {
        self.bytes = bytes
        at = bytes.startIndex
        self.what = what
    }

    init(_ bytes: [UInt8], what: String) { self.init(bytes[...], what: what) }

    var remaining: Int { bytes.endIndex - at }

    /// The next `count` bytes, in place; the reader moves past them.
    private mutating func next(_ count: Int) throws(ProtocolError) -> ArraySlice<UInt8> {
        guard count >= 0, count <= remaining else { throw ProtocolError(.badMessage, "a \(what) cut short") }
        defer { at += count }
        return bytes[at..<at + count]
    }
    mutating func take(_ count: Int) throws(ProtocolError) -> [UInt8] { Array(try next(count)) }
    mutating func u8() throws(ProtocolError) -> UInt8 { try next(1).first! }
    mutating func u16() throws(ProtocolError) -> UInt16 { UInt16(try number(2)) }
    mutating func u32() throws(ProtocolError) -> UInt32 { UInt32(try number(4)) }
    mutating func u64() throws(ProtocolError) -> UInt64 { try number(8) }
    /// A big-endian number of `count` bytes.
    private mutating func number(_ count: Int) throws(ProtocolError) -> UInt64 {
        var value: UInt64 = 0
        for byte in try next(count) { value = value << 8 | UInt64(byte) }
        return value
    }
    mutating func string8() throws(ProtocolError) -> String { try text(Int(try u8())) }
    mutating func string16() throws(ProtocolError) -> String { try text(Int(try u16())) }
    private mutating func text(_ count: Int) throws(ProtocolError) -> String {
        guard let text = String(validating: try next(count), as: UTF8.self) else {
            throw ProtocolError(.badMessage, "a \(what) with text that is not UTF-8")
        }
        return text
    }
}
