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
