/// What a receiver holds of an earlier version: its groups, in order.
public struct BasisIndex: Sendable, Equatable {
    public var item: String
    public var parameters: DeltaParameters
    public var size: UInt64
    public var groups: [DeltaEntry]

    public init(item: String, parameters: DeltaParameters, size: UInt64, groups: [DeltaEntry]) {
        self.item = item
        self.parameters = parameters
        self.size = size
        self.groups = groups
    }

    /// Where each group starts.
    public func offsets() -> [UInt64] {
        var result: [UInt64] = []
        result.reserveCapacity(groups.count)
        var offset: UInt64 = 0
        for group in groups {
            result.append(offset)
            offset += UInt64(group.length)
        }
        return result
    }

    /// Group ids are 48 bits: enough that the groups of two 32 GiB versions hardly ever share one by chance (and a
    /// chance match costs a chunk sent again).
    public static let idMask: UInt64 = 0xFFFF_FFFF_FFFF

    /// `version 2 | fineBits | groupBits | size (8) | count (4) | item (1 + n) | count × (length (3), id (6))`
    public func encoded() -> [UInt8] {
        var out = DeltaWire()
        out.u8(2)
        out.u8(UInt8(parameters.fineBits))
        out.u8(UInt8(parameters.groupBits))
        out.u64(size)
        out.u32(UInt32(groups.count))
        out.string(item)
        for group in groups {
            out.number(UInt64(group.length), bytes: 3)
            out.number(group.id, bytes: 6)
        }
        return out.bytes
    }

    /// Reads and checks an index from a peer: lengths within the parameters' group limit, adding up to the size.
    public static func decode(_ payload: [UInt8]) throws(ProtocolError) -> BasisIndex {
        var reader = DeltaReader(payload, what: "basis index")
        guard try reader.u8() == 2 else { throw ProtocolError(.badMessage, "a basis index of an unknown version") }
        let bits = Int(try reader.u8())
        let groupBits = Int(try reader.u8())
        guard DeltaParameters.allowedFineBits.contains(bits), DeltaParameters.allowedGroupBits.contains(groupBits)
        else {
            throw ProtocolError(.badMessage, "a basis index with chunks of 2^\(bits) bytes in groups of 2^\(groupBits)")
        }
        let parameters = DeltaParameters(fineBits: bits, groupBits: groupBits)
        let size = try reader.u64()
        let count = Int(try reader.u32())
        let item = try reader.string()
        guard size <= Limits.maxItemSize, count <= Delta.maxGroups, reader.remaining == count * 9 else {
            throw ProtocolError(.badMessage, "a basis index of \(count) groups does not match its length")
        }
        var groups: [DeltaEntry] = []
        groups.reserveCapacity(count)
        var total: UInt64 = 0
        for _ in 0..<count {
            let length = UInt32(try reader.number(3))
            guard length > 0, Int(length) <= parameters.maxGroupLength else {
                throw ProtocolError(.badMessage, "a basis group of \(length) bytes")
            }
            total += UInt64(length)
            groups.append(DeltaEntry(length: length, id: try reader.number(6)))
        }
        guard total == size else {
            throw ProtocolError(.badMessage, "a basis index's groups add up to \(total) bytes, not \(size)")
        }
        return BasisIndex(item: item, parameters: parameters, size: size, groups: groups)
    }

    /// Builds an index from bytes fed in order, in pieces of any size.
    public struct Builder {
        private var indexer: DeltaIndexer
        private var groups: [DeltaEntry] = []
        private var size: UInt64 = 0
        private let item: String

        public init(item: String, parameters: DeltaParameters) {
            self.item = item
            indexer = DeltaIndexer(parameters: parameters)
        }

        public mutating func feed(_ bytes: UnsafeRawBufferPointer) {
            size += UInt64(bytes.count)
            indexer.feed(bytes) { _, entry, _ in groups.append(entry) }
        }

        public mutating func finish() -> BasisIndex {
            indexer.finish { _, entry, _ in groups.append(entry) }
            return BasisIndex(item: item, parameters: indexer.parameters, size: size, groups: groups)
        }
    }

    /// Builds the index of `size` bytes read by `read` (at most `buffer` bytes at a time, in order).
    public static func build(
        item: String, size: UInt64, bufferSize: Int = 1 << 20,
        read: (UnsafeMutableRawBufferPointer, UInt64) throws -> Int
    ) throws -> BasisIndex {
        let parameters = DeltaParameters.forSize(size)
        var indexer = DeltaIndexer(parameters: parameters)
        var groups: [DeltaEntry] = []
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bufferSize, alignment: 64)
        defer { buffer.deallocate() }
        var offset: UInt64 = 0
        while offset < size {
            let want = Int(min(UInt64(bufferSize), size - offset))
            let n = try read(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), offset)
            guard n == want else { throw ProtocolError(.sourceChanged, "the basis became shorter while indexed") }
            indexer.feed(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) { _, entry, _ in groups.append(entry) }
            offset += UInt64(n)
        }
        indexer.finish { _, entry, _ in groups.append(entry) }
        return BasisIndex(item: item, parameters: parameters, size: size, groups: groups)
    }
}

/// The sender asks for the chunks of these basis groups (ranges of group indices).
public struct BasisQuery: Sendable, Equatable {
    public var item: String
    public var groups: [ChunkRange]

    public init(item: String, groups: [ChunkRange]) {
        self.item = item
        self.groups = groups
    }

    public func encoded() -> [UInt8] {
        var out = DeltaWire()
        out.string(item)
        out.u32(UInt32(groups.count))
        for range in groups {
            out.u32(UInt32(range.start))
            out.u32(UInt32(range.end))
        }
        return out.bytes
    }

    /// Reads a query, checked against the index the receiver sent: ranges ascending, within it, not too many.
    public static func decode(_ payload: [UInt8], groupCount: Int, parameters: DeltaParameters) throws(ProtocolError)
        -> BasisQuery
    {
        var reader = DeltaReader(payload, what: "basis query")
        let item = try reader.string()
        let count = Int(try reader.u32())
        guard reader.remaining == count * 8 else { throw ProtocolError(.badMessage, "a basis query of bad length") }
        var groups: [ChunkRange] = []
        var total = 0
        var last = 0
        for _ in 0..<count {
            let range = ChunkRange(Int(try reader.u32()), Int(try reader.u32()))
            guard range.start >= last, range.end > range.start, range.end <= groupCount else {
                throw ProtocolError(
                    .badMessage, "the sender asked for basis groups \(range.start)..<\(range.end) of \(groupCount)")
            }
            total += range.count
            last = range.end
            groups.append(range)
        }
        guard total <= Delta.maxQueriedGroups(parameters) else {
            throw ProtocolError(.badMessage, "the sender asked for \(total) basis groups")
        }
        return BasisQuery(item: item, groups: groups)
    }
}

/// The receiver's answer: the chunks of each asked group, in the order asked. A chunk is named by the low 32 bits of
/// its id: it is matched only against the new version's chunks of the changed regions, and a false match costs a
/// chunk sent again.
public struct BasisDetail: Sendable, Equatable {
    public var item: String
    public var groups: [[DeltaEntry]]

    public init(item: String, groups: [[DeltaEntry]]) {
        self.item = item
        self.groups = groups
    }

    public func encoded() -> [UInt8] {
        var out = DeltaWire()
        out.string(item)
        out.u32(UInt32(groups.count))
        for chunks in groups {
            out.u16(UInt16(chunks.count))
            for chunk in chunks {
                out.u16(UInt16(chunk.length))
                out.u32(UInt32(truncatingIfNeeded: chunk.id))
            }
        }
        return out.bytes
    }

    /// Reads the detail, checked against the groups asked for: each group's chunks add up to its length.
    public static func decode(_ payload: [UInt8], asked: [DeltaEntry], parameters: DeltaParameters)
        throws(ProtocolError) -> BasisDetail
    {
        var reader = DeltaReader(payload, what: "basis detail")
        let item = try reader.string()
        let count = Int(try reader.u32())
        guard count == asked.count else {
            throw ProtocolError(.badMessage, "the receiver described \(count) basis groups of \(asked.count)")
        }
        var groups: [[DeltaEntry]] = []
        for group in asked {
            let chunks = Int(try reader.u16())
            guard chunks >= 1, chunks <= parameters.maxGroupChunks, reader.remaining >= chunks * 6 else {
                throw ProtocolError(.badMessage, "a basis group described with \(chunks) chunks")
            }
            var entries: [DeltaEntry] = []
            var total: UInt32 = 0
            for _ in 0..<chunks {
                let length = UInt32(try reader.u16())
                guard length > 0, Int(length) <= parameters.maximum else {
                    throw ProtocolError(.badMessage, "a basis chunk of \(length) bytes")
                }
                total += length
                entries.append(DeltaEntry(length: length, id: UInt64(try reader.u32())))
            }
            guard total == group.length else {
                throw ProtocolError(.badMessage, "a basis group's chunks add up to \(total) bytes, not \(group.length)")
            }
            groups.append(entries)
        }
        guard reader.remaining == 0 else { throw ProtocolError(.badMessage, "basis detail with bytes left over") }
        return BasisDetail(item: item, groups: groups)
    }
}

/// After the chunks are matched, the sender asks for block sums of the basis bytes around each region it would send
/// as literal bytes: per range, the low 32 bits of the XXH64 of each 2^`blockBits`-byte block, the blocks laid from
/// the range's start (`fromEnd` false) or ending at its end (`fromEnd` true, for the bytes after an insertion or a
/// removal). The sender compares them with the same blocks of its own bytes and copies those that match.
public struct BlockQuery: Sendable, Equatable {
    public struct Range: Sendable, Equatable {
        public var offset: UInt64
        public var length: Int
        public var fromEnd: Bool
        public var blockBits: Int
        public init(offset: UInt64, length: Int, fromEnd: Bool, blockBits: Int) {
            self.offset = offset
            self.length = length
            self.fromEnd = fromEnd
            self.blockBits = blockBits
        }
        /// How many whole blocks the range holds.
        public var blocks: Int { length >> blockBits }
        /// Where the first block starts.
        public var firstBlock: UInt64 { fromEnd ? offset + UInt64(length - blocks << blockBits) : offset }
    }

    public static let allowedBlockBits = 5...12
    /// The longest range: longer literal regions are new bytes, not an edit worth narrowing.
    public static let maxRangeLength = 4 << 20

    public var item: String
    public var ranges: [Range]

    public init(item: String, ranges: [Range]) {
        self.item = item
        self.ranges = ranges
    }

    /// `item id (1 + n) | ranges (4) | per range: offset (8), length (4), fromEnd (1), blockBits (1)`
    public func encoded() -> [UInt8] {
        var out = DeltaWire()
        out.string(item)
        out.u32(UInt32(ranges.count))
        for range in ranges {
            out.u64(range.offset)
            out.u32(UInt32(range.length))
            out.u8(range.fromEnd ? 1 : 0)
            out.u8(UInt8(range.blockBits))
        }
        return out.bytes
    }

    /// Reads a query, checked against the basis: every range inside it, at most `Delta.maxBlockRanges` ranges and
    /// `Delta.maxBlockSums` blocks, and no more bytes in all than twice the basis (each byte is read at most twice
    /// by an honest sender).
    public static func decode(_ payload: [UInt8], basisSize: UInt64) throws(ProtocolError) -> BlockQuery {
        var reader = DeltaReader(payload, what: "block query")
        let item = try reader.string()
        let count = Int(try reader.u32())
        guard count <= Delta.maxBlockRanges, reader.remaining == count * 14 else {
            throw ProtocolError(.badMessage, "a block query of \(count) ranges does not match its length")
        }
        var ranges: [Range] = []
        var blocks = 0
        var bytes: UInt64 = 0
        for _ in 0..<count {
            let offset = try reader.u64()
            let length = Int(try reader.u32())
            let flag = try reader.u8()
            let bits = Int(try reader.u8())
            guard flag <= 1, allowedBlockBits.contains(bits), length >= 1 << bits, length <= maxRangeLength,
                offset <= basisSize, UInt64(length) <= basisSize - offset
            else {
                throw ProtocolError(
                    .badMessage,
                    "the sender asked for block sums of \(length) bytes at \(offset) of a \(basisSize)-byte basis")
            }
            let range = Range(offset: offset, length: length, fromEnd: flag == 1, blockBits: bits)
            blocks += range.blocks
            bytes += UInt64(length)
            ranges.append(range)
        }
        guard blocks <= Delta.maxBlockSums, bytes <= basisSize * 2 else {
            throw ProtocolError(.badMessage, "the sender asked for \(blocks) block sums over \(bytes) bytes")
        }
        return BlockQuery(item: item, ranges: ranges)
    }

    /// The sum of one block.
    public static func sum(_ block: UnsafeRawBufferPointer) -> UInt32 {
        UInt32(truncatingIfNeeded: XXH64.hash(block))
    }
}

/// The receiver's answer: the sums of every range's blocks, in the order asked.
public struct BlockSums: Sendable, Equatable {
    public var item: String
    public var sums: [UInt32]

    public init(item: String, sums: [UInt32]) {
        self.item = item
        self.sums = sums
    }

    /// `item id (1 + n) | sums (4) | sums × 4`
    public func encoded() -> [UInt8] {
        var out = DeltaWire()
        out.string(item)
        out.u32(UInt32(sums.count))
        out.bytes.reserveCapacity(out.bytes.count + sums.count * 4)
        for sum in sums { out.u32(sum) }
        return out.bytes
    }

    /// Reads the answer to `query`: exactly one sum per block asked.
    public static func decode(_ payload: [UInt8], query: BlockQuery) throws(ProtocolError) -> BlockSums {
        var reader = DeltaReader(payload, what: "block sums")
        let item = try reader.string()
        let count = Int(try reader.u32())
        let expected = query.ranges.reduce(0) { $0 + $1.blocks }
        guard item == query.item, count == expected, reader.remaining == count * 4 else {
            throw ProtocolError(.badMessage, "the receiver sent \(count) block sums of \(expected) for \(item)")
        }
        var sums: [UInt32] = []
        sums.reserveCapacity(count)
        for _ in 0..<count { sums.append(try reader.u32()) }
        return BlockSums(item: item, sums: sums)
    }
}

/// The end of a delta item's patches (sender → receiver), and the receiver's answer: the chunks whose patch did not
/// give their digest (the basis changed meanwhile), which the sender then sends whole before `done`.
public struct DeltaEnd: Sendable, Codable, Equatable {
    public var item: String
    public init(item: String) { self.item = item }
}

public struct DeltaResult: Sendable, Codable, Equatable {
    public var item: String
    public var redo: [ChunkRange]
    public init(item: String, redo: [ChunkRange]) {
        self.item = item
        self.redo = redo
    }
}

/// Big-endian writing of delta messages.
struct DeltaWire {
    var bytes: [UInt8] = []
    mutating func u8(_ value: UInt8) { bytes.append(value) }
    mutating func u16(_ value: UInt16) { bytes += [UInt8(value >> 8), UInt8(value & 0xFF)] }
    mutating func u32(_ value: UInt32) {
        for shift in stride(from: 24, through: 0, by: -8) { bytes.append(UInt8((value >> UInt32(shift)) & 0xFF)) }
    }
    mutating func u64(_ value: UInt64) { number(value, bytes: 8) }
    /// The low `count` bytes of `value`.
    mutating func number(_ value: UInt64, bytes count: Int) {
        for shift in stride(from: (count - 1) * 8, through: 0, by: -8) {
            bytes.append(UInt8((value >> UInt64(shift)) & 0xFF))
        }
    }
    mutating func string(_ text: String) {
        let utf8 = Array(text.utf8.prefix(255))
        u8(UInt8(utf8.count))
        bytes += utf8
    }
}

/// Big-endian reading of delta messages from a peer: every read is checked against what is left.
struct DeltaReader {
    let bytes: [UInt8]
    var at = 0
    let what: String

    init(_ bytes: [UInt8], what: String) {
        self.bytes = bytes
        self.what = what
    }

    var remaining: Int { bytes.count - at }

    mutating func number(_ n: Int) throws(ProtocolError) -> UInt64 {
        guard remaining >= n else { throw ProtocolError(.badMessage, "a \(what) ends early") }
        var value: UInt64 = 0
        for byte in bytes[at..<(at + n)] { value = value << 8 | UInt64(byte) }
        at += n
        return value
    }

    mutating func u8() throws(ProtocolError) -> UInt8 { UInt8(try number(1)) }
    mutating func u16() throws(ProtocolError) -> UInt16 { UInt16(try number(2)) }
    mutating func u32() throws(ProtocolError) -> UInt32 { UInt32(try number(4)) }
    mutating func u64() throws(ProtocolError) -> UInt64 { try number(8) }
    mutating func string() throws(ProtocolError) -> String {
        let n = Int(try u8())
        guard remaining >= n else { throw ProtocolError(.badMessage, "a \(what) ends early") }
        defer { at += n }
        return String(decoding: bytes[at..<(at + n)], as: UTF8.self)
    }
}
