import CoreTransferable
import Foundation
import Testing

@testable import ShareProtocol

@Suite struct StateMachineTests {
    static let chunk = 4096

    func offer(sizes: [UInt64?], types: [String] = ["public.data"]) -> Offer {
        Offer(
            items: sizes.enumerated().map { index, size in
                OfferItem(
                    id: "item-\(index)", label: "item \(index)",
                    representations: types.map { OfferedRepresentation(contentType: $0, kind: .file, size: size) },
                    version: "v1")
            },
            chunkSize: Self.chunk)
    }

    func receiver(accept: [String] = ["public.item"], maxSize: UInt64? = nil, free: UInt64? = nil) -> ReceiverMachine {
        ReceiverMachine(
            negotiator: Negotiator(accept: AcceptList(accept.map { AcceptedType(identifier: $0) }), table: .system),
            policy: .init(maxItemSize: maxSize, freeSpace: free))
    }

    @Test func senderWalksHelloOfferSelectResumeDoneAck() throws {
        var sender = SenderMachine(offer: offer(sizes: [10_000]))
        #expect(sender.peerReady() == [.sendOffer(sender.offer)])
        #expect(sender.peerReady().isEmpty)
        #expect(try sender.received(Select(choices: [Choice(item: "item-0", representation: 0, reason: "ok")])).isEmpty)
        #expect(sender.state == .transferring && sender.streaming == nil)
        let resume = try sender.received(Resume(item: "item-0", verified: [ChunkRange(0, 1)]))
        #expect(resume == [.stream(item: 0, representation: 0, verified: [0])])
        let done = Done(item: "item-0", size: 10_000, chunks: 3, digest: "ab")
        #expect(try sender.finishedStreaming(done) == [.sendDone(done)])
        let ack = Ack(item: "item-0", outcome: "saved", savedAs: "x")
        #expect(try sender.received(ack) == [.delivered(item: 0, ack), .sendBye])
        #expect(sender.state == .finished)
    }

    @Test func senderRejectsMessagesOutOfOrderOrAboutOtherItems() {
        var sender = SenderMachine(offer: offer(sizes: [10]))
        #expect(throws: ProtocolError.self) { try sender.received(Ack(item: "item-0", outcome: "saved")) }
        var second = SenderMachine(offer: offer(sizes: [10]))
        _ = second.peerReady()
        #expect(throws: ProtocolError.self) { try second.received(Select(choices: [])) }
        var third = SenderMachine(offer: offer(sizes: [10]))
        _ = third.peerReady()
        #expect(throws: ProtocolError.self) {
            try third.received(Select(choices: [Choice(item: "item-0", representation: 5, reason: "")]))
        }
        var fourth = SenderMachine(offer: offer(sizes: [10_000]))
        _ = fourth.peerReady()
        _ = try? fourth.received(Select(choices: [Choice(item: "item-0", representation: 0, reason: "")]))
        // A resume range past the end of the item is a bad message.
        #expect(throws: ProtocolError.self) {
            try fourth.received(Resume(item: "item-0", verified: [ChunkRange(0, 99)]))
        }
    }

    @Test func receiverNegotiatesAndRefusesWithReasons() throws {
        var machine = receiver(accept: ["public.image", "public.plain-text"], maxSize: 5000)
        let offered = Offer(
            items: [
                OfferItem(
                    id: "a", label: "photo",
                    representations: [OfferedRepresentation(contentType: "public.png", kind: .file, size: 100)]),
                OfferItem(
                    id: "b", label: "movie",
                    representations: [OfferedRepresentation(contentType: "public.mpeg-4", kind: .file, size: 100)]),
                OfferItem(
                    id: "c", label: "huge",
                    representations: [OfferedRepresentation(contentType: "public.png", kind: .file, size: 9000)]),
            ], chunkSize: Self.chunk)
        let actions = try machine.received(offered)
        guard case .sendSelect(let select) = actions.first else {
            Issue.record("expected a select")
            return
        }
        #expect(select.choices.map(\.representation) == [0, nil, nil])
        #expect(select.choices[1].refusal?.code == .noCommonRepresentation)
        #expect(select.choices[1].reason.contains("public.mpeg-4"))
        #expect(select.choices[2].refusal?.code == .refused)
        #expect(actions.last == .prepare(item: 0, representation: 0))
    }

    @Test func receiverRefusesWhatDoesNotFitOnDisk() throws {
        var machine = receiver(free: 15_000)
        let actions = try machine.received(offer(sizes: [10_000, 10_000]))
        guard case .sendSelect(let select) = actions.first else { return }
        #expect(select.choices[0].representation == 0)
        #expect(select.choices[1].refusal?.code == .storage)
        // Said as a person reads sizes, with what to do.
        #expect(
            select.choices[1].reason
                == "item 1 needs 9.8 KiB; only 4.9 KiB are free on the receiver (free some space there and send again)")
        var large = receiver(maxSize: 3 << 30)
        guard case .sendSelect(let over) = try large.received(offer(sizes: [5 << 30])).first else { return }
        #expect(over.choices[0].reason == "item 0 is 5.0 GiB; this receiver accepts at most 3.0 GiB")
        // Sizes that would read the same are given exactly.
        var close = receiver(maxSize: 1_000_000_000)
        guard case .sendSelect(let near) = try close.received(offer(sizes: [1_000_000_001])).first else { return }
        #expect(near.choices[0].reason == "item 0 is 1000000001 bytes; this receiver accepts at most 1000000000 bytes")
    }

    @Test func receiverCountsOnlyWhatAPartialDoesNotHoldAgainstTheFreeSpace() throws {
        let held: @Sendable (OfferItem, OfferedRepresentation) -> UInt64 = { item, _ in item.id == "item-0" ? 8_000 : 0
        }
        var machine = ReceiverMachine(
            negotiator: Negotiator(accept: AcceptList([AcceptedType(identifier: "public.item")]), table: .system),
            policy: .init(freeSpace: 13_000, held: held))
        let actions = try machine.received(offer(sizes: [10_000, 10_000, 1]))
        guard case .sendSelect(let select) = actions.first else { return }
        // 2,000 bytes still to come for the first, 10,000 for the second: 12,000 of 13,000; the third still fits.
        #expect(select.choices.map(\.representation) == [0, 0, 0])
        var whole = receiver(free: 13_000)
        guard case .sendSelect(let refused) = try whole.received(offer(sizes: [10_000, 10_000])).first else { return }
        #expect(refused.choices[1].refusal?.code == .storage)
    }

    /// A delta round's questions, as the receiving machine takes them: about the item whose chunks come now, only
    /// when it was announced with a basis, each kind once.
    @Test func receiverTakesEachBasisQuestionOnceAboutTheItemBeingSent() throws {
        var machine = receiver()
        let actions = try machine.received(offer(sizes: [10_000, 10_000]))
        #expect(actions.contains(.prepare(item: 0, representation: 0)))
        _ = try machine.prepared(verified: [], basis: true)
        #expect(throws: ProtocolError.self) {
            var copy = machine; _ = try copy.asked(.groups, about: "item-1")
        }
        #expect(throws: ProtocolError.self) {
            var copy = machine; _ = try copy.asked(.groups, about: "elsewhere")
        }
        #expect(try machine.asked(.groups, about: "item-0") == 0)
        #expect(throws: ProtocolError.self) {
            var copy = machine; _ = try copy.asked(.groups, about: "item-0")
        }
        #expect(try machine.asked(.blockSums, about: "item-0") == 0)
        #expect(throws: ProtocolError.self) {
            var copy = machine; _ = try copy.asked(.blockSums, about: "item-0")
        }
        for chunk in 0..<3 { _ = try machine.receivedChunk(index: chunk, length: chunk == 2 ? 1808 : 4096) }
        let done = Done(item: "item-0", size: 10_000, chunks: 3, digest: "x")
        _ = try machine.received(done)
        #expect(
            try machine.verified(Ack(item: "item-0", outcome: "saved")).contains(.prepare(item: 1, representation: 0)))
        _ = try machine.prepared(verified: [], basis: false)
        // The second item was announced without a basis: no question about it is taken.
        #expect(machine.currentItem == 1)
        #expect(throws: ProtocolError.self) {
            var copy = machine; _ = try copy.asked(.groups, about: "item-1")
        }
        #expect(throws: ProtocolError.self) {
            var copy = machine; _ = try copy.asked(.blockSums, about: "item-1")
        }
    }

    @Test func receiverChecksEveryChunk() throws {
        var machine = receiver()
        _ = try machine.received(offer(sizes: [10_000]))  // 3 chunks: 4096, 4096, 1808
        let resume = try machine.prepared(verified: [1])
        #expect(resume == [.sendResume(Resume(item: "item-0", verified: [ChunkRange(1, 2)]))])
        #expect(throws: ProtocolError.self) {
            var copy = machine; _ = try copy.receivedChunk(index: 1, length: 4096)
        }  // already held
        #expect(throws: ProtocolError.self) {
            var copy = machine; _ = try copy.receivedChunk(index: 3, length: 10)
        }  // past the end
        #expect(throws: ProtocolError.self) {
            var copy = machine; _ = try copy.receivedChunk(index: 0, length: 100)
        }  // wrong length
        #expect(try machine.receivedChunk(index: 0, length: 4096) == [.write(index: 0)])
        #expect(throws: ProtocolError.self) {
            var copy = machine; _ = try copy.receivedChunk(index: 0, length: 4096)
        }  // duplicate
        // Done before the last chunk is a lie.
        #expect(throws: ProtocolError.self) {
            var copy = machine; _ = try copy.received(Done(item: "item-0", size: 10_000, chunks: 3, digest: ""))
        }
        #expect(try machine.receivedChunk(index: 2, length: 1808) == [.write(index: 2)])
        #expect(throws: ProtocolError.self) {
            var copy = machine; _ = try copy.received(Done(item: "item-0", size: 9_999, chunks: 3, digest: ""))
        }
        let done = Done(item: "item-0", size: 10_000, chunks: 3, digest: "x")
        #expect(try machine.received(done) == [.verify(item: 0, done)])
        let ack = Ack(item: "item-0", outcome: "saved")
        #expect(try machine.verified(ack) == [.sendAck(ack)])
        #expect(try machine.receivedBye() == [.complete])
    }

    /// A sender names the produced file in `done`: a path, a parent, or an oversized name is refused, never used.
    @Test func aDoneNamingAPathOrParentIsRefused() throws {
        var machine = receiver()
        _ = try machine.received(offer(sizes: [100]))
        _ = try machine.prepared(verified: [])
        _ = try machine.receivedChunk(index: 0, length: 100)
        for hostile in ["../../.bashrc", "a/b", "..", ".", "x\0y", String(repeating: "n", count: 256)] {
            #expect(throws: ProtocolError.self, "\(hostile.prefix(20))") {
                var copy = machine
                _ = try copy.received(Done(item: "item-0", size: 100, chunks: 1, digest: "x", fileName: hostile))
            }
        }
        let done = Done(item: "item-0", size: 100, chunks: 1, digest: "x", fileName: "clip.mov")
        #expect(try machine.received(done) == [.verify(item: 0, done)])
    }

    @Test func unknownSizeStreamsMustBeSequentialAndWithinLimits() throws {
        var machine = receiver(maxSize: 6000)
        _ = try machine.received(offer(sizes: [nil]))
        _ = try machine.prepared(verified: [])
        #expect(try machine.receivedChunk(index: 0, length: 4096) == [.write(index: 0)])
        #expect(throws: ProtocolError.self) {
            var copy = machine; _ = try copy.receivedChunk(index: 2, length: 10)
        }
        #expect(throws: ProtocolError.self) {
            var copy = machine; _ = try copy.receivedChunk(index: 1, length: 4096)
        }  // over max size
    }

    @Test func byeBeforeEveryItemIsAnError() throws {
        var machine = receiver()
        _ = try machine.received(offer(sizes: [10]))
        #expect(throws: ProtocolError.self) { try machine.receivedBye() }
    }

    @Test func offersAreValidated() {
        #expect(throws: ProtocolError.self) { try Offer(items: [], chunkSize: 4096).validate() }
        #expect(throws: ProtocolError.self) { try offer(sizes: [1]).withChunkSize(100).validate() }
        let duplicate = Offer(items: offer(sizes: [1]).items + offer(sizes: [1]).items, chunkSize: 4096)
        #expect(throws: ProtocolError.self) { try duplicate.validate() }
        var badID = offer(sizes: [1])
        badID.items[0].id = "../x"
        #expect(throws: ProtocolError.self) { try badID.validate() }
        let tooMany = Offer(
            items: (0...Offer.maxItems).map {
                OfferItem(
                    id: "i\($0)", label: "",
                    representations: [OfferedRepresentation(contentType: "public.data", kind: .data)])
            }, chunkSize: 4096)
        #expect(throws: ProtocolError.self) { try tooMany.validate() }
    }

    @Test func hostileSizesAndResumesAreRefusedWithoutHugeAllocations() throws {
        #expect(throws: ProtocolError.self) { try offer(sizes: [UInt64.max]).validate() }
        #expect(throws: ProtocolError.self) { try offer(sizes: [Limits.maxItemSize + 1]).validate() }
        // A receiver claiming to hold chunks of an item of unknown size.
        var sender = SenderMachine(offer: offer(sizes: [nil]))
        _ = sender.peerReady()
        _ = try sender.received(Select(choices: [Choice(item: "item-0", representation: 0, reason: "")]))
        #expect(throws: ProtocolError.self) {
            try sender.received(Resume(item: "item-0", verified: [ChunkRange(0, Int(Int32.max))]))
        }
        // Overlapping ranges cannot inflate the count.
        #expect(throws: ProtocolError.self) { try ChunkMath.indices([ChunkRange(0, 3), ChunkRange(1, 3)], limit: 4) }
        // The largest allowed item is negotiated without building per-chunk state.
        var machine = receiver()
        _ = try machine.received(offer(sizes: [Limits.maxItemSize]))
        #expect(try machine.prepared(verified: []).count == 1)
    }

    @Test func chunkMath() throws {
        #expect(ChunkMath.count(size: 0, chunkSize: 10) == 1)
        #expect(ChunkMath.count(size: 10, chunkSize: 10) == 1)
        #expect(ChunkMath.count(size: 11, chunkSize: 10) == 2)
        #expect(ChunkMath.ranges([5, 1, 2, 3, 7, 8]) == [ChunkRange(1, 4), ChunkRange(5, 6), ChunkRange(7, 9)])
        #expect(try ChunkMath.indices([ChunkRange(1, 4)], limit: 4) == [1, 2, 3])
        #expect(throws: ProtocolError.self) { try ChunkMath.indices([ChunkRange(3, 2)], limit: 9) }
        #expect(throws: ProtocolError.self) { try ChunkMath.indices([ChunkRange(-1, 2)], limit: 9) }
        let header = ChunkHeader(index: 77, digest: Array(repeating: 9, count: 32))
        #expect(try ChunkHeader.parse(header.encoded()[...]) == header)
        #expect(throws: ProtocolError.self) { try ChunkHeader.parse(Array(repeating: 0, count: 39)[...]) }
    }

    /// Both machines joined back to back (no I/O): every action of one becomes the other's event.
    @Test func bothMachinesJoinedEndToEnd() throws {
        let sizes: [UInt64?] = [0, 4096, 10_000, nil]
        var sender = SenderMachine(offer: offer(sizes: sizes))
        var machine = receiver()
        var delivered: [Int] = []
        var senderActions = sender.peerReady()
        var steps = 0
        while !senderActions.isEmpty, steps < 100 {
            steps += 1
            var next: [SenderMachine.Action] = []
            for action in senderActions {
                switch action {
                case .sendOffer(let offer):
                    var receiverActions = try machine.received(offer)
                    while let action = receiverActions.first {
                        receiverActions.removeFirst()
                        switch action {
                        case .sendSelect(let select): next += try sender.received(select)
                        case .prepare: receiverActions = try machine.prepared(verified: []) + receiverActions
                        case .sendResume(let resume): next += try sender.received(resume)
                        default: break
                        }
                    }
                case .stream(let item, _, let verified):
                    #expect(verified.isEmpty)
                    let size = sizes[item] ?? 5000
                    let chunks = ChunkMath.count(size: size, chunkSize: Self.chunk)
                    for index in 0..<chunks {
                        let length = Int(min(UInt64(Self.chunk), size - UInt64(index * Self.chunk)))
                        #expect(try machine.receivedChunk(index: index, length: length) == [.write(index: index)])
                    }
                    next += try sender.finishedStreaming(
                        Done(item: "item-\(item)", size: size, chunks: chunks, digest: "d"))
                case .sendDone(let done):
                    var receiverActions = try machine.received(done)
                    while let action = receiverActions.first {
                        receiverActions.removeFirst()
                        switch action {
                        case .verify(let item, _):
                            receiverActions =
                                try machine.verified(Ack(item: "item-\(item)", outcome: "saved")) + receiverActions
                        case .sendAck(let ack): next += try sender.received(ack)
                        case .prepare: receiverActions = try machine.prepared(verified: []) + receiverActions
                        case .sendResume(let resume): next += try sender.received(resume)
                        default: break
                        }
                    }
                case .delivered(let item, _): delivered.append(item)
                case .sendBye: #expect(try machine.receivedBye() == [.complete])
                case .refused: Issue.record("nothing should be refused")
                }
            }
            senderActions = next
        }
        #expect(delivered == [0, 1, 2, 3])
        #expect(sender.state == .finished && machine.state == .finished)
    }
}

extension Offer {
    func withChunkSize(_ size: Int) -> Offer { Offer(items: items, chunkSize: size) }
}
