/// One item's delta round on the sending side, as frames in and frames out; the driver reads the item and does the
/// I/O. Order, after the receiver's `basis` for the item: every chunk of the new version is indexed (`add`), then
/// `basisQuery` → `basisDetail` when the basis has groups the new version lacks, `blockQuery` → `blockSums` when
/// literal regions are left, then the patches (and chunks sent whole), `deltaEnd` → `deltaResult`: the chunks whose
/// patch did not give their digest, sent whole before `done`.
public struct SenderDeltaRound {
    public enum Step: Sendable, Equatable {
        case indexing, awaitingDetail, awaitingSums, patching, awaitingResult, finished
    }

    public let item: String
    public let basis: BasisIndex
    public let chunks: Int
    public private(set) var step = Step.indexing
    private var plan: DeltaPlan
    private var groupQuery: BasisQuery?
    private var blockQuery: BlockQuery?

    public init(basis: BasisIndex, size: UInt64, chunkSize: Int, item: String) {
        self.item = item
        self.basis = basis
        chunks = ChunkMath.count(size: size, chunkSize: chunkSize)
        plan = DeltaPlan(basis: basis, size: size)
    }

    /// A group of the new version, with its chunks where the basis has no such group.
    public mutating func add(offset: UInt64, group: DeltaEntry, chunks: [DeltaEntry]) {
        precondition(step == .indexing, "a group added after the indexing")
        plan.add(offset: offset, group: group, chunks: chunks)
    }

    /// The frame the receiver answers next, while the round waits for one.
    public var awaiting: FrameType? {
        switch step {
        case .awaitingDetail: return .basisDetail
        case .awaitingSums: return .blockSums
        case .awaitingResult: return .deltaResult
        default: return nil
        }
    }

    /// The new version is indexed: the first question to ask the receiver, or nil when the patches can be made now.
    public mutating func indexed() -> Frame? {
        precondition(step == .indexing, "indexed twice")
        let query = plan.query(item: item)
        guard query.groups.isEmpty else {
            groupQuery = query
            step = .awaitingDetail
            return Frame(type: .basisQuery, payload: query.encoded())
        }
        return askForSums()
    }

    /// The receiver's answer to the question asked: the next question, or nil when the patches can be made now.
    public mutating func answered(_ frame: Frame) throws(ProtocolError) -> Frame? {
        switch (step, frame.type) {
        case (.awaitingDetail, .basisDetail):
            let query = groupQuery!
            let asked = query.groups.flatMap { range in (range.start..<range.end).map { basis.groups[$0] } }
            plan.learn(
                try BasisDetail.decode(frame.payload, asked: asked, parameters: basis.parameters), asked: query.groups)
            return askForSums()
        case (.awaitingSums, .blockSums):
            plan.learn(try BlockSums.decode(frame.payload, query: blockQuery!))
            step = .patching
            return nil
        default:
            throw ProtocolError(.badMessage, "the receiver sent \(frame.type) while the delta of \(item) was \(step)")
        }
    }

    /// Chunk bytes starting at `start` as a patch against the basis, and how many of them are literal.
    public func patch(start: UInt64, data: UnsafeRawBufferPointer) -> (bytes: [UInt8], literal: Int) {
        precondition(step == .patching, "a patch before the questions were answered")
        return plan.patch(start: start, data: data)
    }

    /// Every patch is sent: the message that ends them.
    public mutating func end() -> DeltaEnd {
        precondition(step == .patching, "the patches ended twice")
        step = .awaitingResult
        return DeltaEnd(item: item)
    }

    /// The receiver's `deltaResult`: the chunks to send whole (those it does not hold already).
    public mutating func result(_ frame: Frame, held: Set<Int>) throws(ProtocolError) -> Set<Int> {
        guard step == .awaitingResult, frame.type == .deltaResult else {
            throw ProtocolError(.badMessage, "the receiver sent \(frame.type) while the delta of \(item) was \(step)")
        }
        let result = try MessageCoding.decode(DeltaResult.self, from: frame)
        guard result.item == item else {
            throw ProtocolError(.badMessage, "the receiver ended the patches of \(result.item), not \(item)")
        }
        step = .finished
        return try ChunkMath.indices(result.redo, limit: chunks).subtracting(held)
    }

    private mutating func askForSums() -> Frame? {
        plan.finish()
        let query = plan.blockQuery(item: item)
        guard !query.ranges.isEmpty else {
            step = .patching
            return nil
        }
        blockQuery = query
        step = .awaitingSums
        return Frame(type: .blockQuery, payload: query.encoded())
    }
}
