import CoreTransferable
import Foundation
import ShareTLS
import Testing

@testable import ShareProtocol

/// Delta transfer: content-defined chunking, the index and its messages, and the two drivers sending a new version
/// against a basis the receiver holds — over an in-memory link that counts the bytes.
@Suite struct DeltaTests {
    static let chunk = 64 << 10

    // MARK: Chunking

    /// Cut points depend on the content only: the same bytes fed in any pieces give the same chunks and groups,
    /// every chunk within its minimum and maximum (the last may be shorter), every group within its limit.
    @Test func cutsDoNotDependOnHowBytesArrive() {
        let bytes = randomBytes(3 << 20)
        func cuts(pieces: [Int]) -> [(UInt64, Bool)] {
            var chunker = ContentChunker(DeltaParameters.forSize(UInt64(bytes.count)))
            var out: [(UInt64, Bool)] = []
            var offset = 0
            var piece = pieces.makeIterator()
            bytes.withUnsafeBytes { raw in
                while offset < bytes.count {
                    let n = min(piece.next() ?? 65536, bytes.count - offset)
                    chunker.feed(UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + n)])) { out.append(($0, $1)) }
                    offset += n
                }
            }
            chunker.finish { out.append(($0, $1)) }
            return out
        }
        let whole = cuts(pieces: [bytes.count])
        let odd = cuts(pieces: (0..<100_000).map { $0 % 7 == 0 ? 1 : 1 + ($0 * 7919) % 9000 })
        #expect(whole.map(\.0) == odd.map(\.0))
        #expect(whole.map(\.1) == odd.map(\.1))
        #expect(whole.last?.0 == UInt64(bytes.count))
        #expect(whole.last?.1 == true)
        let parameters = DeltaParameters.forSize(UInt64(bytes.count))
        var previous: UInt64 = 0
        var inGroup = 0
        for (index, (end, groupEnds)) in whole.enumerated() {
            let length = Int(end - previous)
            #expect(length <= parameters.maximum)
            if index < whole.count - 1 { #expect(length >= parameters.minimum) }
            inGroup += 1
            #expect(inGroup <= parameters.maxGroupChunks)
            if groupEnds { inGroup = 0 }
            previous = end
        }
        // About the average: normalized chunking keeps most lengths near it.
        let mean = Double(bytes.count) / Double(whole.count)
        #expect(mean > Double(parameters.average) * 0.6 && mean < Double(parameters.average) * 1.6, "\(mean)")
    }

    /// An insertion near the start shifts every later byte; the groups after it are found all the same.
    @Test func groupsAfterAnInsertionAreFound() throws {
        let old = randomBytes(4 << 20)
        var new = old
        new.insert(contentsOf: randomBytes(1024), at: 5000)
        let a = try index(old)
        let b = try index(new)
        let ids = Set(a.groups.map(\.id))
        let shared = b.groups.filter { ids.contains($0.id) }.reduce(0) { $0 + Int($1.length) }
        #expect(shared > new.count * 9 / 10, "\(shared) of \(new.count) bytes in shared groups")
        // About 12 bytes per group of ~32 KiB (2 KiB chunks at this size).
        #expect(a.encoded().count < old.count / 1000)
    }

    func index(_ bytes: [UInt8]) throws -> BasisIndex {
        let source = MemorySource(bytes)
        return try BasisIndex.build(item: "x", size: UInt64(bytes.count)) {
            try source.read(into: $0, at: $1)
        }
    }

    // MARK: Messages from a peer

    @Test func anIndexIsCheckedBeforeItIsUsed() throws {
        let good = try index(randomBytes(1 << 20))
        #expect(try BasisIndex.decode(good.encoded()) == good)
        var lying = good
        lying.size += 1
        #expect(throws: ProtocolError.self) { try BasisIndex.decode(lying.encoded()) }
        var huge = good
        huge.groups[0].length = UInt32(good.parameters.maxGroupLength + 1)
        huge.size = huge.groups.reduce(0) { $0 + UInt64($1.length) }
        #expect(throws: ProtocolError.self) { try BasisIndex.decode(huge.encoded()) }
        #expect(throws: ProtocolError.self) { try BasisIndex.decode(Array(good.encoded().dropLast())) }
        var bits = good.encoded()
        bits[1] = 30
        #expect(throws: ProtocolError.self) { try BasisIndex.decode(bits) }
    }

    @Test func queriesAndDetailsStayWithinTheIndex() throws {
        let query = BasisQuery(item: "x", groups: [ChunkRange(0, 2), ChunkRange(5, 6)])
        let parameters = DeltaParameters(fineBits: 10)
        #expect(try BasisQuery.decode(query.encoded(), groupCount: 6, parameters: parameters) == query)
        #expect(throws: ProtocolError.self) {
            try BasisQuery.decode(query.encoded(), groupCount: 5, parameters: parameters)
        }
        let backwards = BasisQuery(item: "x", groups: [ChunkRange(5, 6), ChunkRange(0, 2)])
        #expect(throws: ProtocolError.self) {
            try BasisQuery.decode(backwards.encoded(), groupCount: 6, parameters: parameters)
        }
        // No more groups than their chunks' description fits one frame.
        let folder = DeltaParameters.forSize(1 << 30, archive: true)
        let most = Delta.maxQueriedGroups(folder)
        #expect(most * (folder.maxGroupChunks * 6 + 2) < Delta.maxPayload)
        let greedy = BasisQuery(item: "x", groups: [ChunkRange(0, most + 1)])
        #expect(throws: ProtocolError.self) {
            try BasisQuery.decode(greedy.encoded(), groupCount: most + 1, parameters: folder)
        }
        let asked = [DeltaEntry(length: 3000, id: 1)]
        let detail = BasisDetail(
            item: "x", groups: [[DeltaEntry(length: 1000, id: 2), DeltaEntry(length: 2000, id: 3)]])
        #expect(try BasisDetail.decode(detail.encoded(), asked: asked, parameters: parameters) == detail)
        let short = BasisDetail(item: "x", groups: [[DeltaEntry(length: 1000, id: 2)]])
        #expect(throws: ProtocolError.self) {
            try BasisDetail.decode(short.encoded(), asked: asked, parameters: parameters)
        }
    }

    /// A block query names only bytes of the basis, in blocks it holds, and no more than its answer may carry.
    @Test func blockQueriesStayWithinTheBasis() throws {
        func decode(_ ranges: [BlockQuery.Range], basisSize: UInt64 = 100_000) throws -> BlockQuery {
            try BlockQuery.decode(BlockQuery(item: "x", ranges: ranges).encoded(), basisSize: basisSize)
        }
        let fine = [
            BlockQuery.Range(offset: 0, length: 5000, fromEnd: false, blockBits: 7),
            BlockQuery.Range(offset: 95_000, length: 5000, fromEnd: true, blockBits: 5),
        ]
        #expect(try decode(fine).ranges == fine)
        #expect(fine[1].firstBlock == 95_000 + 5000 - UInt64(fine[1].blocks * 32))
        for bad in [
            BlockQuery.Range(offset: 95_001, length: 5000, fromEnd: false, blockBits: 7),
            BlockQuery.Range(offset: UInt64.max - 10, length: 5000, fromEnd: false, blockBits: 7),
            BlockQuery.Range(offset: 0, length: 100, fromEnd: false, blockBits: 7),
            BlockQuery.Range(offset: 0, length: 5000, fromEnd: false, blockBits: 13),
            BlockQuery.Range(offset: 0, length: 5000, fromEnd: false, blockBits: 4),
        ] {
            #expect(throws: ProtocolError.self, "\(bad)") { try decode([bad]) }
        }
        // The same bytes asked for again and again: no more than twice the basis in all.
        let again = [BlockQuery.Range](
            repeating: BlockQuery.Range(offset: 0, length: 100_000, fromEnd: false, blockBits: 12), count: 3)
        #expect(throws: ProtocolError.self) { try decode(again) }
        let query = BlockQuery(item: "x", ranges: fine)
        let sums = BlockSums(item: "x", sums: (0..<(fine[0].blocks + fine[1].blocks)).map { UInt32($0) })
        #expect(try BlockSums.decode(sums.encoded(), query: query) == sums)
        #expect(throws: ProtocolError.self) {
            try BlockSums.decode(BlockSums(item: "x", sums: [1, 2]).encoded(), query: query)
        }
    }

    /// A patch names only bytes of the basis the receiver described, and makes exactly its chunk.
    @Test func patchesOutsideTheBasisAreRefused() throws {
        let basis = randomBytes(10_000)
        var output = [UInt8](repeating: 0, count: 4096)
        func apply(_ ops: [UInt8], basisSize: UInt64? = 10_000, length: Int = 100) throws {
            try ops.withUnsafeBytes { patch in
                try output.withUnsafeMutableBytes { out in
                    _ = try Patch.apply(patch, basisSize: basisSize, length: length, into: out) { buffer, offset in
                        try MemorySource(basis).read(into: buffer, at: offset)
                    }
                }
            }
        }
        func copy(_ offset: UInt64, _ length: UInt32) -> [UInt8] {
            var wire = DeltaWire()
            wire.u8(PatchOp.copyTag)
            wire.u64(offset)
            wire.u32(length)
            return wire.bytes
        }
        try apply(copy(9900, 100))
        #expect(Array(output[0..<100]) == Array(basis[9900..<10_000]))
        #expect(throws: ProtocolError.self) { try apply(copy(9901, 100)) }
        #expect(throws: ProtocolError.self) { try apply(copy(UInt64.max - 10, 100)) }
        #expect(throws: ProtocolError.self) { try apply(copy(0, 100), basisSize: nil) }
        #expect(throws: ProtocolError.self) { try apply(copy(0, 50)) }
        #expect(throws: ProtocolError.self) { try apply(copy(0, 50) + copy(0, 51)) }
        #expect(throws: ProtocolError.self) { try apply([2, 0, 0, 0, 100] + [UInt8](repeating: 1, count: 99)) }
        #expect(throws: ProtocolError.self) { try apply([9]) }
    }

    // MARK: Both drivers

    /// A receiver on its own thread over one end of an in-memory link; `wait` returns its outcome once it ended.
    func startReceiver(sink: MemorySink, delta: Bool, stream: MemoryStream) -> () -> Result<TransferSummary, Error> {
        let done = DispatchSemaphore(value: 0)
        let received = Box<Result<TransferSummary, Error>?>(nil)
        nonisolated(unsafe) let sinkRef = sink
        Thread {
            let driver = ReceiverDriver(channel: FrameChannel(stream: stream), hasher: TestSHA())
            driver.delta = delta
            let machine = ReceiverMachine(negotiator: Negotiator(accept: AcceptList([AcceptedType(.item)])))
            received.value = Result { try driver.run(machine: machine, sink: sinkRef) }
            stream.close()
            done.signal()
        }.start()
        return {
            done.wait()
            return received.value!
        }
    }

    func transfer(
        _ bytes: [UInt8], basis: [UInt8]?, basisAfterIndex: [UInt8]? = nil, senderDelta: Bool = true,
        receiverDelta: Bool = true
    ) -> (sent: Result<TransferSummary, Error>, received: Result<TransferSummary, Error>, sink: MemorySink, wire: Int) {
        let sink = MemorySink()
        if let basis { sink.bases["file"] = basis }
        if let basisAfterIndex { sink.basesAfterIndex["file"] = basisAfterIndex }
        let (a, b) = MemoryStream.pair()
        let received = startReceiver(sink: sink, delta: receiverDelta, stream: b)
        let sender = SenderDriver(channel: FrameChannel(stream: a), chunkSize: Self.chunk, hasher: TestSHA())
        sender.delta = senderDelta
        let offer = OfferItem(
            id: "file", label: "file.bin",
            representations: [
                OfferedRepresentation(contentType: "public.data", kind: .file, size: UInt64(bytes.count))
            ],
            version: "v2")
        let sent = Result { try sender.run([FixedItem(offer, [{ .positional(MemorySource(bytes)) }])]) }
        a.close()
        return (sent, received(), sink, a.outgoing.total)
    }

    /// The edits the benchmark makes, each far cheaper than the whole file, and the result identical.
    @Test func aNewVersionCrossesAsWhatChanged() throws {
        let old = randomBytes(3 << 20)
        var edits: [(String, [UInt8], Int)] = []
        edits.append(("append", old + randomBytes(100_000), 120_000))
        var inserted = old
        inserted.insert(contentsOf: randomBytes(1024), at: 3000)
        edits.append(("insert", inserted, 40_000))
        var block = old
        block.replaceSubrange(1_500_000..<1_600_000, with: randomBytes(100_000))
        edits.append(("block", block, 140_000))
        var scattered = old
        for n in 0..<8 { scattered.replaceSubrange((n * 380_000)..<(n * 380_000 + 4096), with: randomBytes(4096)) }
        edits.append(("scattered", scattered, 8 * 4096 + 120_000))
        edits.append(("same", old, 20_000))
        for (name, new, budget) in edits {
            let (sent, received, sink, wire) = transfer(new, basis: old)
            let summary = try sent.get()
            _ = try received.get()
            #expect(sink.items["file"] == new, "\(name)")
            #expect(sink.indexed == ["file"])
            #expect(wire < budget, "\(name): \(wire) bytes on the wire, budget \(budget)")
            #expect(summary.patchedBytes > 0, "\(name)")
            #expect(summary.redone == 0)
        }
    }

    /// Small edits cost about what they changed, not the content-defined chunks around them: the bytes left literal
    /// after the chunks are matched are narrowed by block sums (an overwrite, an insertion, a removal).
    @Test func anEditCostsAboutWhatItChanged() throws {
        let old = randomBytes(3 << 20)
        var overwrite = old
        overwrite.replaceSubrange(1_000_000..<1_000_100, with: randomBytes(100))
        var insert = old
        insert.insert(contentsOf: randomBytes(300), at: 2_000_000)
        var remove = old
        remove.removeSubrange(500_000..<505_000)
        for (name, new, changed) in [("overwrite", overwrite, 100), ("insert", insert, 300), ("remove", remove, 0)] {
            let (sent, received, sink, _) = transfer(new, basis: old)
            let summary = try sent.get()
            _ = try received.get()
            #expect(sink.items["file"] == new, "\(name)")
            // A copy for each 64 KiB chunk of the grid; then the changed bytes, at most a block either side (blocks
            // of 512 bytes for the largest region two chunks may leave), and a few ops. The chunks around the edit
            // alone would be several KiB.
            let copies = ChunkMath.count(size: UInt64(new.count), chunkSize: Self.chunk) * 13
            #expect(
                summary.wireBytes < UInt64(copies + changed + 1100), "\(name): \(summary.wireBytes) bytes of patches")
        }
    }

    /// A sender that did not say it speaks delta is never sent a basis: the file crosses whole.
    @Test func aPeerWithoutDeltaGetsTheWholeFile() throws {
        let old = randomBytes(1 << 20)
        var new = old
        new[500_000] ^= 1
        let (sent, _, sink, wire) = transfer(new, basis: old, senderDelta: false, receiverDelta: false)
        _ = try sent.get()
        #expect(sink.items["file"] == new)
        #expect(sink.indexed.isEmpty)
        #expect(wire > new.count)
    }

    /// The basis changes between its index and the patches: the chunks it no longer gives are found by their
    /// digests, asked for again and sent whole; the result is the new version, never a mix.
    @Test func aBasisChangedAfterItsIndexIsRedoneWhole() throws {
        let old = randomBytes(2 << 20)
        var new = old
        new.replaceSubrange(100_000..<101_000, with: randomBytes(1000))
        var changed = old
        for offset in stride(from: 0, to: changed.count, by: 4096) { changed[offset] ^= 0xFF }
        let (sent, received, sink, _) = transfer(new, basis: old, basisAfterIndex: changed)
        let summary = try sent.get()
        _ = try received.get()
        #expect(sink.items["file"] == new)
        // Every chunk patched from the changed basis is redone (a chunk with nothing to copy went whole at once).
        #expect(summary.redone > ChunkMath.count(size: UInt64(new.count), chunkSize: Self.chunk) / 2)
    }

    /// The sending side's round, without a link: it asks what the basis leaves open in order, takes only the answer
    /// it waits for, and makes patches only after the answers.
    @Test func theSendersRoundAsksInOrderAndTakesOnlyTheAnswerItAwaits() throws {
        let old = randomBytes(1 << 20)
        var new = old
        new.replaceSubrange(300_000..<300_100, with: randomBytes(4000))
        let basis = try index(old)
        var round = SenderDeltaRound(basis: basis, size: UInt64(new.count), chunkSize: Self.chunk, item: "x")
        var indexer = DeltaIndexer(parameters: basis.parameters, keepChunks: true)
        new.withUnsafeBytes { raw in
            indexer.feed(raw) { offset, group, parts in round.add(offset: offset, group: group, chunks: parts) }
        }
        indexer.finish { offset, group, parts in round.add(offset: offset, group: group, chunks: parts) }
        var question = round.indexed()
        #expect(question?.type == .basisQuery && round.awaiting == .basisDetail)
        // An answer it does not wait for ends the round.
        var wrong = round
        #expect(throws: ProtocolError.self) {
            _ = try wrong.answered(Frame(type: .blockSums, payload: BlockSums(item: "x", sums: []).encoded()))
        }
        // The receiver's answers, made as a receiver makes them from the basis bytes.
        while let asked = question {
            switch asked.type {
            case .basisQuery:
                let query = try BasisQuery.decode(
                    asked.payload, groupCount: basis.groups.count, parameters: basis.parameters)
                let offsets = basis.offsets()
                let groups = query.groups.flatMap { range in
                    (range.start..<range.end).map { group in
                        old[Int(offsets[group])..<Int(offsets[group]) + Int(basis.groups[group].length)]
                            .withUnsafeBytes { DeltaIndexer.chunks(parameters: basis.parameters, bytes: $0) }
                    }
                }
                question = try round.answered(
                    Frame(type: .basisDetail, payload: BasisDetail(item: "x", groups: groups).encoded()))
            default:
                let query = try BlockQuery.decode(asked.payload, basisSize: basis.size)
                let sums = query.ranges.flatMap { range in
                    (0..<range.blocks).map { block in
                        let start = Int(range.firstBlock) + block << range.blockBits
                        return old[start..<start + 1 << range.blockBits].withUnsafeBytes { BlockQuery.sum($0) }
                    }
                }
                question = try round.answered(
                    Frame(type: .blockSums, payload: BlockSums(item: "x", sums: sums).encoded()))
            }
        }
        #expect(round.step == .patching && round.awaiting == nil)
        // The unchanged chunk before the edit is one copy of the basis; the edited one mostly copies too.
        let literal = new.withUnsafeBytes { raw in
            (0..<ChunkMath.count(size: UInt64(new.count), chunkSize: Self.chunk)).reduce(0) { total, chunk in
                let start = chunk * Self.chunk
                let data = UnsafeRawBufferPointer(rebasing: raw[start..<min(raw.count, start + Self.chunk)])
                return total + round.patch(start: UInt64(start), data: data).literal
            }
        }
        #expect(literal < 16 << 10, "\(literal) literal bytes for a 4,000-byte edit")
        #expect(round.end() == DeltaEnd(item: "x"))
        #expect(round.awaiting == .deltaResult)
        var other = round
        #expect(throws: ProtocolError.self) {
            _ = try other.result(MessageCoding.frame(.deltaResult, DeltaResult(item: "y", redo: [])), held: [])
        }
        let redo = try round.result(
            MessageCoding.frame(.deltaResult, DeltaResult(item: "x", redo: [ChunkRange(2, 4)])), held: [3])
        #expect(redo == [2] && round.step == .finished)
    }

    /// A hostile sender's patch naming bytes beyond the basis ends the session: nothing is written.
    /// A hostile sender's session up to the receiver's `resume`: the receiver holds `old` as the item's basis.
    func hostileSession(old: [UInt8]) throws -> (
        channel: FrameChannel, stream: MemoryStream, sink: MemorySink, basis: BasisIndex,
        received: () -> Result<TransferSummary, Error>
    ) {
        let sink = MemorySink()
        sink.bases["file"] = old
        let (a, b) = MemoryStream.pair()
        let received = startReceiver(sink: sink, delta: true, stream: b)
        let channel = FrameChannel(stream: a)
        let size = UInt64(old.count)
        let offer = Offer(
            items: [
                OfferItem(
                    id: "file", label: "file.bin",
                    representations: [OfferedRepresentation(contentType: "public.data", kind: .file, size: size)])
            ], chunkSize: Self.chunk)
        try channel.send(.offer, offer)
        #expect(try channel.receive().type == .select)
        let basisFrame = try channel.receive()
        #expect(basisFrame.type == .basis)
        let basis = try BasisIndex.decode(basisFrame.payload)
        #expect(basis.size == size)
        #expect(try channel.receive().type == .resume)
        return (channel, a, sink, basis, received)
    }

    @Test func aPatchBeyondTheBasisEndsTheSessionWithNothingWritten() throws {
        let old = randomBytes(1 << 20)
        let (channel, a, sink, _, received) = try hostileSession(old: old)
        let size = UInt64(old.count)
        // Chunk 0, said to be made from basis bytes that do not exist.
        var wire = DeltaWire()
        wire.u8(PatchOp.copyTag)
        wire.u64(size - 10)
        wire.u32(UInt32(Self.chunk))
        try wire.bytes.withUnsafeBytes {
            try channel.sendBinary(
                .patch, header: ChunkHeader(index: 0, digest: [UInt8](repeating: 0, count: 32)), data: $0)
        }
        let answer = try channel.receive()
        #expect(answer.type == .error)
        a.close()
        #expect(throws: ProtocolError.self) { try received().get() }
        #expect(sink.items.isEmpty)
        #expect(sink.suspended == ["file"])
    }

    /// A hostile sender asks about the basis again and again (each answer reads basis bytes): the second question
    /// ends the session.
    @Test func aSecondBasisQuestionEndsTheSession() throws {
        let (channel, a, sink, basis, received) = try hostileSession(old: randomBytes(1 << 20))
        let query = BasisQuery(item: "file", groups: [ChunkRange(0, basis.groups.count)])
        try channel.send(Frame(type: .basisQuery, payload: query.encoded()))
        #expect(try channel.receive().type == .basisDetail)
        try channel.send(Frame(type: .basisQuery, payload: query.encoded()))
        #expect(try channel.receive().type == .error)
        a.close()
        #expect(throws: ProtocolError.self) { try received().get() }
        #expect(sink.items.isEmpty)
    }

    @Test func aSecondBlockQuestionEndsTheSession() throws {
        let (channel, a, sink, basis, received) = try hostileSession(old: randomBytes(1 << 20))
        let query = BlockQuery(
            item: "file", ranges: [BlockQuery.Range(offset: 0, length: Int(basis.size), fromEnd: false, blockBits: 12)])
        try channel.send(Frame(type: .blockQuery, payload: query.encoded()))
        let answer = try channel.receive()
        #expect(answer.type == .blockSums)
        #expect(try BlockSums.decode(answer.payload, query: query).sums.count == Int(basis.size) >> 12)
        try channel.send(Frame(type: .blockQuery, payload: query.encoded()))
        #expect(try channel.receive().type == .error)
        a.close()
        #expect(throws: ProtocolError.self) { try received().get() }
        #expect(sink.items.isEmpty)
    }
}
