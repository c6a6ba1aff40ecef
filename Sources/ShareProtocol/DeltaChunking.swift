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
