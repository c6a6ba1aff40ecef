/// Delta transfer: a receiver that already holds an earlier version of an item (the basis) describes it, and the
/// sender sends each missing chunk of the new version as a patch — ranges to copy from the basis and the bytes the
/// basis lacks — instead of the chunk's bytes. The chunk grid, the chunk digests, the whole-item digest, the ledger
/// and the resume are those of every transfer: a patched chunk is checked against its digest before it is written.
///
/// Both ends cut their bytes the same way, into content-defined chunks (FastCDC: a Gear hash, normalized chunking),
/// grouped by the same content into groups of about 16 chunks. The receiver sends the groups of the basis (length and
/// a 6-byte id each: 9 bytes per ~64 KiB); the sender finds which of its own groups the basis holds, asks for the
/// chunks of the basis groups it did not find (the changed regions only), and names, for every byte of the new
/// version, a basis range or a literal. The literal regions left are then narrowed with fixed-size block sums of the
/// basis bytes around them (`BlockQuery`): an edit costs about what it changed whatever the chunk size. See
/// docs/PROTOCOL.md ("Delta transfer").
public enum Delta {
    /// The hello feature that says a device speaks delta transfer.
    public static let feature = "delta-2"
    /// Items smaller than this are always sent whole (a basis index would cost more than it saves).
    public static let minimumSize: UInt64 = 16 << 10
    /// The most groups a basis index holds (at 64 KiB a group, about 32 GiB): a larger basis is not used.
    public static let maxGroups = 1 << 19
    /// The most basis groups a sender asks the chunks of, for one item: as many as fit one detail frame however
    /// many chunks each holds (6 bytes a chunk), and at most 16 Ki.
    public static func maxQueriedGroups(_ parameters: DeltaParameters) -> Int {
        min(16 << 10, (maxPayload - 1024) / (parameters.maxGroupChunks * 6 + 2))
    }
    /// The most basis ranges one block query names, and the most block sums its answer holds (4 bytes each).
    public static let maxBlockRanges = 64 << 10
    public static let maxBlockSums = 1 << 20
    /// The most bytes of basis indexes a sender keeps for items not streamed yet; a basis beyond it is not used (the
    /// item goes whole).
    public static let maxHeldBases = 32 << 20
    /// The most chunks one group holds, whatever its parameters.
    public static let maxGroupChunks = 256
    /// Largest basis index or basis detail frame.
    public static let maxPayload = 8 << 20
}

/// How bytes are cut: the average chunk is 2^`fineBits` bytes (minimum a quarter, maximum four times), a group
/// ends at a chunk boundary whose hash also has `groupBits` more zero bits (about 2^`groupBits` chunks), or after
/// four times that many chunks.
public struct DeltaParameters: Sendable, Equatable {
    public var fineBits: Int
    public var groupBits: Int

    public init(fineBits: Int, groupBits: Int = 4) {
        self.fineBits = fineBits
        self.groupBits = groupBits
    }

    /// The valid values of `fineBits` and `groupBits`.
    public static let allowedFineBits = 9...12
    public static let allowedGroupBits = 3...6

    /// For a file: chunks of about 1 KiB under 1 MiB, 2 KiB under 64 MiB, 4 KiB above, in groups of about 16 — a
    /// small edit costs about what it changed, and the index (9 bytes a group) stays small. For a folder's tar
    /// stream, of many small files: 2 KiB chunks in groups of about 32, so that the index and the chunks of the
    /// changed groups stay small (an edit's bytes are narrowed down by block sums after the chunks are matched).
    public static func forSize(_ size: UInt64, archive: Bool = false) -> DeltaParameters {
        if archive { return DeltaParameters(fineBits: 11, groupBits: 5) }
        return DeltaParameters(fineBits: size < 1 << 20 ? 10 : size < 64 << 20 ? 11 : 12)
    }

    /// The most chunks one group holds.
    public var maxGroupChunks: Int { 4 << groupBits }

    public var average: Int { 1 << fineBits }
    public var minimum: Int { average / 4 }
    public var maximum: Int { average * 4 }
    /// The largest group: `maxGroupChunks` chunks of the largest size.
    public var maxGroupLength: Int { maxGroupChunks * maximum }
}

/// Cuts a stream of bytes into content-defined chunks and groups, the same way on both ends, whatever pieces the
/// bytes arrive in.
public struct ContentChunker {
    public let parameters: DeltaParameters
    private var hash: UInt64 = 0
    private var length = 0
    private var groupChunks = 0
    /// Offset of the next byte.
    public private(set) var offset: UInt64 = 0
    private let hardMask: UInt64
    private let easyMask: UInt64
    private let groupMask: UInt64

    public init(_ parameters: DeltaParameters) {
        self.parameters = parameters
        hardMask = ~UInt64(0) << UInt64(64 - (parameters.fineBits + 1))
        easyMask = ~UInt64(0) << UInt64(64 - (parameters.fineBits - 1))
        // The group's bits lie just below the chunk's.
        groupMask =
            ((UInt64(1) << UInt64(parameters.groupBits)) - 1)
            << UInt64(64 - (parameters.fineBits + 1) - parameters.groupBits)
    }

    /// Feeds bytes; `cut(end, groupEnds)` is called at every chunk boundary, with the offset where the chunk ends.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer, _ cut: (UInt64, Bool) throws -> Void) rethrows {
        let start = offset
        defer { offset = start + UInt64(bytes.count) }
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
        let count = bytes.count
        let minimum = parameters.minimum
        let average = parameters.average
        let maximum = parameters.maximum
        var i = 0
        try GearTable.values.withUnsafeBufferPointer { gear in
            let table = gear.baseAddress!
            while i < count {
                if length < minimum {
                    // FastCDC: the first bytes of a chunk are never a boundary, and not hashed.
                    let skip = min(minimum - length, count - i)
                    length += skip
                    i += skip
                    continue
                }
                var h = hash
                var n = length
                var found = false
                var group = false
                // Harder before the average length, easier after it: lengths cluster around the average. Each phase
                // runs to its own bound, with one test a byte.
                var phase = 0
                while phase < 2, !found {
                    let (mask, limit) = phase == 0 ? (hardMask, average) : (easyMask, maximum)
                    phase += 1
                    guard n < limit else { continue }
                    let stop = i + min(limit - n, count - i)
                    var j = i
                    while j < stop {
                        h = (h &<< 1) &+ table[Int(base[j])]
                        j += 1
                        if h & mask == 0 {
                            found = true
                            group = h & groupMask == 0
                            break
                        }
                    }
                    n += j - i
                    i = j
                    // The bytes ran out before this phase ended: it goes on with the next piece.
                    if !found, n < limit { break }
                }
                if !found, n >= maximum { found = true }
                hash = h
                length = n
                if found { try close(end: start + UInt64(i), group: group, cut) }
            }
        }
    }

    private mutating func close(end: UInt64, group: Bool, _ cut: (UInt64, Bool) throws -> Void) rethrows {
        groupChunks += 1
        let ends = group || groupChunks >= parameters.maxGroupChunks
        hash = 0
        length = 0
        if ends { groupChunks = 0 }
        try cut(end, ends)
    }

    /// The end of the bytes: the last chunk (if any bytes are left) ends the last group.
    public mutating func finish(_ cut: (UInt64, Bool) throws -> Void) rethrows {
        if length > 0 {
            try close(end: offset, group: true, cut)
        } else if groupChunks > 0 {
            // The previous chunk ended exactly at the end: it closes its group.
            groupChunks = 0
            try cut(offset, true)
        }
    }
}

/// Gear's 256 random 64-bit values, the same on every device (splitmix64 from a fixed seed).
enum GearTable {
    static let values: [UInt64] = {
        var state: UInt64 = 0x7368_6172_652d_6364  // "share-cd"
        return (0..<256).map { _ in
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }()
}

/// A chunk or group: its length and 8-byte id.
public struct DeltaEntry: Sendable, Equatable {
    public var length: UInt32
    public var id: UInt64
    public init(length: UInt32, id: UInt64) {
        self.length = length
        self.id = id
    }
}

/// Cuts bytes into chunks and groups and names them: a chunk's id is its XXH64, a group's the low 48 bits of the
/// XXH64 of its chunks' ids.
public struct DeltaIndexer {
    public let parameters: DeltaParameters
    private var chunker: ContentChunker
    /// Bytes of the chunk being cut that arrived in an earlier piece.
    private var carry: [UInt8] = []
    /// Where the chunk being cut starts.
    private var chunkStart: UInt64 = 0
    private var groupStart: UInt64 = 0
    private var groupIDs: [UInt8] = []
    /// The chunks of the group being cut (kept only when asked for).
    public private(set) var groupChunks: [DeltaEntry] = []
    private let keepChunks: Bool

    public init(parameters: DeltaParameters, keepChunks: Bool = false) {
        self.parameters = parameters
        self.keepChunks = keepChunks
        chunker = ContentChunker(parameters)
    }

    /// Feeds the next bytes; `group(offset, entry, chunks)` is called for every group that ends (its chunks when
    /// `keepChunks`).
    public mutating func feed(
        _ bytes: UnsafeRawBufferPointer, _ group: (UInt64, DeltaEntry, [DeltaEntry]) throws -> Void
    ) rethrows {
        let pieceStart = chunker.offset
        var consumed = 0
        var cuts: [(UInt64, Bool)] = []
        chunker.feed(bytes) { end, groupEnds in cuts.append((end, groupEnds)) }
        for (end, groupEnds) in cuts {
            let upTo = Int(end - pieceStart)
            let piece = UnsafeRawBufferPointer(rebasing: bytes[consumed..<upTo])
            let id: UInt64
            if carry.isEmpty {
                id = XXH64.hash(piece)
            } else {
                carry.append(contentsOf: piece)
                id = carry.withUnsafeBytes { XXH64.hash($0) }
                carry.removeAll(keepingCapacity: true)
            }
            consumed = upTo
            try closeChunk(end: end, id: id, groupEnds: groupEnds, group)
        }
        carry.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[consumed...]))
    }

    public mutating func finish(_ group: (UInt64, DeltaEntry, [DeltaEntry]) throws -> Void) rethrows {
        var cuts: [(UInt64, Bool)] = []
        chunker.finish { end, groupEnds in cuts.append((end, groupEnds)) }
        for (end, groupEnds) in cuts {
            if end == chunkStart {
                // Only closes the group of the chunk before.
                try closeGroup(end: end, group)
                continue
            }
            let id = carry.withUnsafeBytes { XXH64.hash($0) }
            carry.removeAll()
            try closeChunk(end: end, id: id, groupEnds: groupEnds, group)
        }
    }

    private mutating func closeChunk(
        end: UInt64, id: UInt64, groupEnds: Bool, _ group: (UInt64, DeltaEntry, [DeltaEntry]) throws -> Void
    ) rethrows {
        withUnsafeBytes(of: id.littleEndian) { groupIDs.append(contentsOf: $0) }
        if keepChunks { groupChunks.append(DeltaEntry(length: UInt32(end - chunkStart), id: id)) }
        chunkStart = end
        if groupEnds { try closeGroup(end: end, group) }
    }

    private mutating func closeGroup(end: UInt64, _ group: (UInt64, DeltaEntry, [DeltaEntry]) throws -> Void)
        rethrows
    {
        guard end > groupStart else { return }
        let entry = DeltaEntry(
            length: UInt32(end - groupStart), id: groupIDs.withUnsafeBytes { XXH64.hash($0) } & BasisIndex.idMask)
        let chunks = groupChunks
        let start = groupStart
        groupIDs.removeAll(keepingCapacity: true)
        groupChunks.removeAll(keepingCapacity: true)
        groupStart = end
        try group(start, entry, chunks)
    }

    /// The chunks of `length` bytes read by `read` (a basis group), in order.
    public static func chunks(
        parameters: DeltaParameters, bytes: UnsafeRawBufferPointer
    ) -> [DeltaEntry] {
        var indexer = DeltaIndexer(parameters: parameters, keepChunks: true)
        var out: [DeltaEntry] = []
        indexer.feed(bytes) { _, _, chunks in out += chunks }
        indexer.finish { _, _, chunks in out += chunks }
        return out
    }
}

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

/// One chunk of the new version, as basis ranges and literal bytes: `copy (1) | offset (8) | length (4)` or
/// `literal (2) | length (4) | bytes`.
public enum PatchOp: Sendable, Equatable {
    case copy(offset: UInt64, length: Int)
    case literal(length: Int)

    static let copyTag: UInt8 = 1
    static let literalTag: UInt8 = 2
}

public enum Patch {
    /// Builds a chunk of `length` bytes from a patch: every copy must lie inside the basis (`basisSize` bytes; nil:
    /// there is none), every literal inside the patch, and together they must make exactly `length` bytes.
    public static func apply(
        _ patch: UnsafeRawBufferPointer, basisSize: UInt64?, length: Int, into output: UnsafeMutableRawBufferPointer,
        read: (UnsafeMutableRawBufferPointer, UInt64) throws -> Int
    ) throws -> (copied: Int, literal: Int) {
        var at = 0
        var filled = 0
        var copied = 0
        func take(_ n: Int) throws(ProtocolError) -> UnsafeRawBufferPointer {
            guard n >= 0, patch.count - at >= n else { throw ProtocolError(.badMessage, "a patch ends in an op") }
            defer { at += n }
            return UnsafeRawBufferPointer(rebasing: patch[at..<(at + n)])
        }
        func number(_ bytes: Int) throws(ProtocolError) -> UInt64 {
            var value: UInt64 = 0
            for byte in try take(bytes) { value = value << 8 | UInt64(byte) }
            return value
        }
        guard length <= output.count else { throw ProtocolError(.badMessage, "a patched chunk is too long") }
        while at < patch.count {
            let tag = try take(1)[0]
            switch tag {
            case PatchOp.copyTag:
                let offset = try number(8)
                let n = Int(try number(4))
                guard let basisSize else {
                    throw ProtocolError(.badMessage, "a patch copies from a basis this receiver did not offer")
                }
                guard n > 0, n <= length - filled, offset <= basisSize, UInt64(n) <= basisSize - offset else {
                    throw ProtocolError(
                        .badMessage, "a patch copies \(n) bytes at \(offset), outside the \(basisSize)-byte basis")
                }
                let destination = UnsafeMutableRawBufferPointer(rebasing: output[filled..<(filled + n)])
                let got = try read(destination, offset)
                guard got == n else { throw DeltaBasisChanged() }
                filled += n
                copied += n
            case PatchOp.literalTag:
                let n = Int(try number(4))
                guard n > 0, n <= length - filled else {
                    throw ProtocolError(.badMessage, "a patch's literal of \(n) bytes overruns its chunk")
                }
                let bytes = try take(n)
                UnsafeMutableRawBufferPointer(rebasing: output[filled..<(filled + n)]).copyMemory(from: bytes)
                filled += n
            default:
                throw ProtocolError(.badMessage, "a patch op of unknown kind \(tag)")
            }
        }
        guard filled == length else {
            throw ProtocolError(.badMessage, "a patch makes \(filled) bytes of a \(length)-byte chunk")
        }
        return (copied, length - copied)
    }
}

/// The basis could not be read as indexed (it became shorter): the chunk is redone whole.
public struct DeltaBasisChanged: Error {
    public init() {}
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

/// The sender's plan for a delta: which bytes of the new version the basis holds, and where.
public struct DeltaPlan {
    /// A run of the new version: copied from the basis at `basisOffset`, or literal (nil).
    public struct Piece: Sendable, Equatable {
        public var offset: UInt64
        public var length: Int
        public var basisOffset: UInt64?
    }

    private struct Run {
        var offset: UInt64
        var length: UInt64
        /// The basis offset; `pending` for a group whose chunks are matched later, `literal` for new bytes.
        var basis: UInt64
    }
    private static let pending = UInt64.max
    private static let literal = UInt64.max - 1

    private let basis: BasisIndex
    private let basisOffsets: [UInt64]
    private var basisByID: [UInt64: Int] = [:]
    private var usedBasis: Set<Int> = []
    private var runs: [Run] = []
    /// Groups of the new version the basis does not hold as a whole: their chunks, matched one by one later.
    private var unmatched: [(offset: UInt64, chunks: [DeltaEntry])] = []
    /// Chunk id (its low 32 bits) → basis offset and length, for the basis groups described.
    private var chunksInBasis: [UInt32: (offset: UInt64, length: UInt32)] = [:]
    /// Literal regions of the new version whose blocks the basis may hold: `count` blocks of 2^`bits` bytes from
    /// `sender`, to compare with the basis blocks from `basis`, whose sums are `sums[first...]`. Ordered by `sender`,
    /// and so by where they end.
    private struct Blocks {
        var sender: UInt64
        var basis: UInt64
        var bits: Int
        var count: Int
        var first: Int
        var end: UInt64 { sender + UInt64(count << bits) }
    }
    private var blocks: [Blocks] = []
    private var sums: [UInt32] = []
    /// The most new groups kept for matching chunk by chunk; further ones are sent as they are.
    private static let maxUnmatched = 64 << 10
    public private(set) var matchedBytes: UInt64 = 0

    public init(basis: BasisIndex, size: UInt64) {
        self.basis = basis
        basisOffsets = basis.offsets()
        for (index, group) in basis.groups.enumerated() where basisByID[group.id] == nil {
            basisByID[group.id] = index
        }
    }

    /// A group of the new version, at `offset`, with its chunks.
    public mutating func add(offset: UInt64, group: DeltaEntry, chunks: [DeltaEntry]) {
        if let index = basisByID[group.id], basis.groups[index].length == group.length {
            usedBasis.insert(index)
            append(Run(offset: offset, length: UInt64(group.length), basis: basisOffsets[index]))
        } else if unmatched.count < Self.maxUnmatched {
            unmatched.append((offset, chunks))
            append(Run(offset: offset, length: UInt64(group.length), basis: Self.pending))
        } else {
            append(Run(offset: offset, length: UInt64(group.length), basis: Self.literal))
        }
    }

    private mutating func append(_ run: Run) {
        if run.basis < Self.literal { matchedBytes += run.length }
        if var last = runs.last, last.offset + last.length == run.offset,
            last.basis == run.basis && run.basis >= Self.literal
                || last.basis < Self.literal && run.basis < Self.literal && last.basis + last.length == run.basis
        {
            last.length += run.length
            runs[runs.count - 1] = last
        } else {
            runs.append(run)
        }
    }

    /// The basis groups to ask the chunks of: those no group of the new version matched (the changed regions), at
    /// most `Delta.maxQueriedGroups`. None when every group of the new version was found.
    public func query(item: String) -> BasisQuery {
        guard !unmatched.isEmpty else { return BasisQuery(item: item, groups: []) }
        var wanted: [Int] = []
        for index in basis.groups.indices where !usedBasis.contains(index) {
            wanted.append(index)
            if wanted.count == Delta.maxQueriedGroups(basis.parameters) { break }
        }
        return BasisQuery(item: item, groups: ChunkMath.ranges(wanted))
    }

    /// The receiver's chunks of the asked groups.
    public mutating func learn(_ detail: BasisDetail, asked: [ChunkRange]) {
        var groups = detail.groups.makeIterator()
        for range in asked {
            for index in range.start..<range.end {
                guard let chunks = groups.next() else { return }
                var offset = basisOffsets[index]
                for chunk in chunks {
                    let id = UInt32(truncatingIfNeeded: chunk.id)
                    if chunksInBasis[id] == nil { chunksInBasis[id] = (offset, chunk.length) }
                    offset += UInt64(chunk.length)
                }
            }
        }
    }

    /// Matches the chunks of the unmatched groups against the basis chunks learned.
    public mutating func finish() {
        var pending = unmatched.makeIterator()
        var next = pending.next()
        let old = runs
        runs = []
        matchedBytes = 0
        for run in old {
            guard run.basis == Self.pending else {
                append(run)
                continue
            }
            // The run holds consecutive unmatched groups.
            let end = run.offset + run.length
            while let group = next, group.offset < end {
                var offset = group.offset
                for chunk in group.chunks {
                    if let found = chunksInBasis[UInt32(truncatingIfNeeded: chunk.id)], found.length == chunk.length {
                        append(Run(offset: offset, length: UInt64(chunk.length), basis: found.offset))
                    } else {
                        append(Run(offset: offset, length: UInt64(chunk.length), basis: Self.literal))
                    }
                    offset += UInt64(chunk.length)
                }
                next = pending.next()
            }
        }
        unmatched = []
        chunksInBasis = [:]
    }

    /// The block sums to ask for, after `finish`: for each literal region between two copied ones, the basis bytes
    /// between those two copies — laid from their start (the bytes before an edit) and, when the region and the gap
    /// differ in length, also from their end (the bytes after an insertion or a removal). Blocks of about twice the
    /// square root of the gap: its sums and the bytes a partly changed block costs are then about even.
    public mutating func blockQuery(item: String) -> BlockQuery {
        var ranges: [BlockQuery.Range] = []
        var asked: [Blocks] = []
        var count = 0
        var total: UInt64 = 0
        func add(_ run: Run, basisStart: UInt64, length: UInt64, fromEnd: Bool) {
            let length = Int(min(length, UInt64(BlockQuery.maxRangeLength)))
            guard length >= 1 << BlockQuery.allowedBlockBits.lowerBound else { return }
            let log = Int.bitWidth - 1 - length.leadingZeroBitCount
            let bits = min(max(1 + (log + 1) / 2, BlockQuery.allowedBlockBits.lowerBound), log, 12)
            let range = BlockQuery.Range(offset: basisStart, length: length, fromEnd: fromEnd, blockBits: bits)
            guard ranges.count < Delta.maxBlockRanges, count + range.blocks <= Delta.maxBlockSums,
                total + UInt64(length) <= basis.size * 2
            else { return }
            let sender = fromEnd ? run.offset + run.length - UInt64(range.blocks << bits) : run.offset
            asked.append(Blocks(sender: sender, basis: range.firstBlock, bits: bits, count: range.blocks, first: count))
            ranges.append(range)
            count += range.blocks
            total += UInt64(length)
        }
        for (index, run) in runs.enumerated() where run.basis == Self.literal {
            let before =
                index > 0 && runs[index - 1].basis < Self.literal
                ? runs[index - 1].basis + runs[index - 1].length : nil
            let after = index + 1 < runs.count && runs[index + 1].basis < Self.literal ? runs[index + 1].basis : nil
            if let before, let after, after >= before {
                let gap = after - before
                guard gap > 0 else { continue }
                let length = min(gap, run.length)
                add(run, basisStart: before, length: length, fromEnd: false)
                if gap != run.length { add(run, basisStart: after - length, length: length, fromEnd: true) }
            } else {
                if let before, before < basis.size {
                    add(run, basisStart: before, length: min(run.length, basis.size - before), fromEnd: false)
                }
                if let after, after > 0 {
                    let length = min(run.length, after)
                    add(run, basisStart: after - length, length: length, fromEnd: true)
                }
            }
        }
        blocks = asked
        sums = []
        return BlockQuery(item: item, ranges: ranges)
    }

    /// The receiver's sums of the blocks asked for.
    public mutating func learn(_ answer: BlockSums) {
        sums = answer.sums
    }

    /// The patch of the chunk of the new version `data`, which starts at `start`: copies for the runs the basis
    /// holds and for the blocks of literal regions whose sums match, the bytes for the rest (adjacent ops joined).
    /// Returns it with how many of its bytes are literal.
    public func patch(start: UInt64, data: UnsafeRawBufferPointer) -> (bytes: [UInt8], literal: Int) {
        var ops: [(basis: UInt64?, at: Int, length: Int)] = []
        func emit(_ basis: UInt64?, _ at: Int, _ length: Int) {
            if let last = ops.last, last.at + last.length == at {
                let joins: Bool
                switch (last.basis, basis) {
                case (nil, nil): joins = true
                case (let from?, let to?): joins = from + UInt64(last.length) == to
                default: joins = false
                }
                if joins {
                    ops[ops.count - 1].length += length
                    return
                }
            }
            ops.append((basis, at, length))
        }
        let haveSums = !sums.isEmpty
        for piece in pieces(from: start, length: data.count) {
            let at = Int(piece.offset - start)
            if let offset = piece.basisOffset {
                emit(offset, at, piece.length)
                continue
            }
            var position = piece.offset
            let end = piece.offset + UInt64(piece.length)
            if haveSums {
                var low = 0
                var high = blocks.count
                while low < high {
                    let mid = (low + high) / 2
                    if blocks[mid].end <= position { low = mid + 1 } else { high = mid }
                }
                var index = low
                while index < blocks.count, blocks[index].sender < end {
                    let range = blocks[index]
                    let size = UInt64(1) << UInt64(range.bits)
                    var block =
                        position > range.sender ? Int((position - range.sender + size - 1) >> UInt64(range.bits)) : 0
                    while block < range.count {
                        let from = range.sender + UInt64(block) << UInt64(range.bits)
                        guard from + size <= end else { break }
                        let local = Int(from - start)
                        let sum = BlockQuery.sum(UnsafeRawBufferPointer(rebasing: data[local..<(local + Int(size))]))
                        if sum == sums[range.first + block] {
                            if from > position { emit(nil, Int(position - start), Int(from - position)) }
                            emit(range.basis + UInt64(block) << UInt64(range.bits), local, Int(size))
                            position = from + size
                        }
                        block += 1
                    }
                    index += 1
                }
            }
            if position < end { emit(nil, Int(position - start), Int(end - position)) }
        }
        var wire = DeltaWire()
        var literal = 0
        for op in ops {
            if let basis = op.basis {
                wire.u8(PatchOp.copyTag)
                wire.u64(basis)
                wire.u32(UInt32(op.length))
            } else {
                wire.u8(PatchOp.literalTag)
                wire.u32(UInt32(op.length))
                wire.bytes += UnsafeRawBufferPointer(rebasing: data[op.at..<(op.at + op.length)])
                literal += op.length
            }
        }
        return (wire.bytes, literal)
    }

    /// The runs covering `length` bytes of the new version from `start`.
    public func pieces(from start: UInt64, length: Int) -> [Piece] {
        var low = 0
        var high = runs.count
        while low < high {
            let mid = (low + high) / 2
            if runs[mid].offset + runs[mid].length <= start { low = mid + 1 } else { high = mid }
        }
        var result: [Piece] = []
        let end = start + UInt64(length)
        var index = low
        while index < runs.count, runs[index].offset < end {
            let run = runs[index]
            let from = max(run.offset, start)
            let to = min(run.offset + run.length, end)
            let basisOffset = run.basis < Self.literal ? run.basis + (from - run.offset) : nil
            result.append(Piece(offset: from, length: Int(to - from), basisOffset: basisOffset))
            index += 1
        }
        return result
    }
}

/// XXH64 (Yann Collet's xxHash, 64-bit, seed 0): the ids of chunks and groups. Ids only find bytes the other end may
/// already hold; every chunk made from them is checked against its digest, so a collision costs a chunk sent again,
/// never a wrong byte kept — and this hash runs at several GB/s where a cryptographic one would halve the index's
/// speed.
public enum XXH64 {
    static let p1: UInt64 = 0x9E37_79B1_85EB_CA87
    static let p2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    static let p3: UInt64 = 0x1656_67B1_9E37_79F9
    static let p4: UInt64 = 0x85EB_CA77_C2B2_AE63
    static let p5: UInt64 = 0x27D4_EB2F_1656_67C5

    @inline(__always) static func rotl(_ x: UInt64, _ r: UInt64) -> UInt64 { (x &<< r) | (x &>> (64 - r)) }

    @inline(__always) static func round(_ acc: UInt64, _ input: UInt64) -> UInt64 {
        rotl(acc &+ input &* p2, 31) &* p1
    }

    @inline(__always) static func merge(_ acc: UInt64, _ value: UInt64) -> UInt64 {
        (acc ^ round(0, value)) &* p1 &+ p4
    }

    public static func hash(_ bytes: UnsafeRawBufferPointer, seed: UInt64 = 0) -> UInt64 {
        let count = bytes.count
        guard let base = bytes.baseAddress else { return avalanche(seed &+ p5) }
        var at = 0
        var h: UInt64
        if count >= 32 {
            var v1 = seed &+ p1 &+ p2
            var v2 = seed &+ p2
            var v3 = seed
            var v4 = seed &- p1
            while at + 32 <= count {
                v1 = round(v1, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: at, as: UInt64.self)))
                v2 = round(v2, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: at + 8, as: UInt64.self)))
                v3 = round(v3, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: at + 16, as: UInt64.self)))
                v4 = round(v4, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: at + 24, as: UInt64.self)))
                at += 32
            }
            h = rotl(v1, 1) &+ rotl(v2, 7) &+ rotl(v3, 12) &+ rotl(v4, 18)
            h = merge(h, v1)
            h = merge(h, v2)
            h = merge(h, v3)
            h = merge(h, v4)
        } else {
            h = seed &+ p5
        }
        h = h &+ UInt64(count)
        while at + 8 <= count {
            h ^= round(0, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: at, as: UInt64.self)))
            h = rotl(h, 27) &* p1 &+ p4
            at += 8
        }
        if at + 4 <= count {
            h ^= UInt64(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: at, as: UInt32.self))) &* p1
            h = rotl(h, 23) &* p2 &+ p3
            at += 4
        }
        while at < count {
            h ^= UInt64(base.load(fromByteOffset: at, as: UInt8.self)) &* p5
            h = rotl(h, 11) &* p1
            at += 1
        }
        return avalanche(h)
    }

    @inline(__always) static func avalanche(_ value: UInt64) -> UInt64 {
        var h = value
        h ^= h >> 33
        h = h &* p2
        h ^= h >> 29
        h = h &* p3
        h ^= h >> 32
        return h
    }
}
