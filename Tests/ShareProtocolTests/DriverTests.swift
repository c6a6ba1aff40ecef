import CoreTransferable
import Foundation
import ShareTLS
import Testing

@testable import ShareProtocol

/// The one sender driver and the one receiver driver, joined by an in-memory stream pair: no sockets, no processes.
@Suite struct DriverTests {
    static let chunk = 64 << 10

    /// Runs a sender over `items` and a receiver into `sink` at once; returns both outcomes and their events.
    func transfer(
        _ items: [ItemSource], sink: MemorySink, accept: [AcceptedType] = [AcceptedType(.item)],
        policy: ReceiverMachine.Policy = .init(), codec: ChunkCodec? = nil,
        tamper: ((Int, [UInt8]) -> [UInt8])? = nil, decide: ((Offer) throws -> [Choice])? = nil,
        digest: DigestAlgorithm = .sha256
    ) -> (sent: Result<TransferSummary, Error>, received: Result<TransferSummary, Error>, events: [TransferEvent]) {
        let (a, b) = MemoryStream.pair()
        a.outgoing.tamper = tamper
        let events = Box<[TransferEvent]>([])
        let done = DispatchSemaphore(value: 0)
        let received = Box<Result<TransferSummary, Error>?>(nil)
        nonisolated(unsafe) let (codec, decide, sink) = (codec, decide, sink)
        Thread {
            let driver = ReceiverDriver(channel: FrameChannel(stream: b), hasher: TestSHA().make(digest), codec: codec)
            {
                events.value.append($0)
            }
            let machine = ReceiverMachine(
                negotiator: Negotiator(accept: AcceptList(accept), table: .system), policy: policy)
            received.value = Result { try driver.run(machine: machine, sink: sink, decide: decide) }
            b.close()
            done.signal()
        }.start()
        let sender = SenderDriver(
            channel: FrameChannel(stream: a), chunkSize: Self.chunk, hasher: TestSHA().make(digest), codec: codec)
        let sent = Result { try sender.run(items) }
        a.close()
        done.wait()
        return (sent, received.value!, events.value)
    }

    func fileOffer(_ id: String, size: UInt64?, type: String = "public.data", kind: OfferedRepresentation.Kind = .file)
        -> OfferItem
    {
        OfferItem(
            id: id, label: id, representations: [OfferedRepresentation(contentType: type, kind: kind, size: size)],
            version: "v1")
    }

    /// Protocol 4: the receiver announces items ahead and the sender streams each without waiting for the
    /// acknowledgement of the one before. The link holds back every `ack` until the sender has sent the `done` of
    /// the last item: a sender that waited for an `ack` would never get there (with a window of one it cannot, and
    /// the test says so rather than hang).
    @Test(arguments: [ReceiverMachine.pipelineWindow, 1])
    func manyItemsCostOneRoundTripNotOneEach(window: Int) throws {
        let count = 200  // within the window
        let payloads = (0..<count).map { randomBytes(100 + $0) }
        let items = payloads.enumerated().map { index, bytes in
            FixedItem(
                fileOffer("photo-\(index)", size: UInt64(bytes.count)),
                [{ .positional(MemorySource(bytes)) }])
        }
        let (a, b) = MemoryStream.pair()
        let dones = Box(0)
        let answers = b.outgoing
        // Every frame the receiver writes is one write; an `ack` starts with its type byte.
        answers.holdFrom = { $0.first == FrameType.ack.rawValue }
        a.outgoing.tamper = { _, data in
            // A whole `done` frame: its type, then its length, which is what follows.
            if data.first == FrameType.done.rawValue, data.count > 5,
                Int(data[1]) << 24 | Int(data[2]) << 16 | Int(data[3]) << 8 | Int(data[4]) == data.count - 5
            {
                dones.value += 1
                if dones.value == count { answers.release() }
            }
            return data
        }
        let sink = MemorySink()
        let finished = DispatchSemaphore(value: 0)
        let received = Box<Result<TransferSummary, Error>?>(nil)
        nonisolated(unsafe) let sinkRef = sink
        Thread {
            let machine = ReceiverMachine(
                negotiator: Negotiator(accept: AcceptList([AcceptedType(.item)]), table: .system), window: window)
            let driver = ReceiverDriver(channel: FrameChannel(stream: b), hasher: TestSHA())
            received.value = Result { try driver.run(machine: machine, sink: sinkRef) }
            b.close()
            finished.signal()
        }.start()
        let sending = DispatchSemaphore(value: 0)
        let sent = Box<Result<TransferSummary, Error>?>(nil)
        nonisolated(unsafe) let sources = items
        Thread {
            sent.value = Result {
                try SenderDriver(channel: FrameChannel(stream: a), chunkSize: Self.chunk, hasher: TestSHA()).run(
                    sources)
            }
            a.close()
            sending.signal()
        }.start()
        let completed = sending.wait(timeout: .now() + 5) == .success
        if !completed {
            // Stuck waiting for an acknowledgement the link holds back: end both sides.
            a.close()
            b.close()
            _ = sending.wait(timeout: .now() + 5)
        }
        _ = finished.wait(timeout: .now() + 5)
        if window == 1 {
            #expect(!completed, "a sender cannot get past the first item while the receiver announces one at a time")
            return
        }
        #expect(completed, "the sender waited for an acknowledgement")
        #expect(dones.value == count)
        let summary = try #require(try sent.value?.get())
        #expect(summary.delivered.count == count)
        _ = try #require(try received.value?.get())
        for (index, bytes) in payloads.enumerated() { #expect(sink.items["photo-\(index)"] == bytes) }
    }

    @Test func itemsOfEveryKindArriveIdenticalAndOnlyTheChosenRepresentationIsProduced() throws {
        let big = randomBytes(5 * Self.chunk + 123)
        let stream = randomBytes(3 * Self.chunk + 7)
        let text = Array("Dinner at eight?".utf8)
        let file = FixedItem(
            fileOffer("big", size: UInt64(big.count)),
            [{ .positional(MemorySource(big)) }])
        let archive = FixedItem(
            fileOffer("stream", size: UInt64(stream.count), type: "public.tar-archive", kind: .archive),
            [{ .sequential(PiecesSource(stream, announced: true)) }])
        let note = FixedItem(

            OfferItem(
                id: "note", label: "note",
                representations: [
                    OfferedRepresentation(contentType: "public.png", kind: .data),
                    OfferedRepresentation(contentType: "public.utf8-plain-text", kind: .data),
                ]),
            [
                { .positional(MemorySource([0xFF])) },
                { .positional(MemorySource(text)) },
            ])
        let sink = MemorySink()
        let result = transfer(
            [file, archive, note], sink: sink,
            accept: [AcceptedType(.plainText), AcceptedType(identifier: "public.data")])
        let sent = try result.sent.get()
        _ = try result.received.get()
        #expect(sink.items["big"] == big)
        #expect(sink.items["stream"] == stream)
        #expect(sink.items["note"] == text)
        #expect(note.produced == [1], "only the chosen representation is produced")
        #expect(sent.delivered.count == 3 && sent.bytes == UInt64(big.count + stream.count + text.count))
        let chosen = result.events.compactMap { event -> String? in
            if case .chosen(_, let label, _, let type, _) = event { return "\(label)=\(type)" }
            return nil
        }
        #expect(chosen == ["big=public.data", "stream=public.tar-archive", "note=public.utf8-plain-text"])
    }

    @Test func aResumeSendsOnlyTheMissingChunksAndTheWholeDigestStillMatches() throws {
        let bytes = randomBytes(6 * Self.chunk + 10)
        for sequential in [false, true] {
            let sink = MemorySink()
            // Chunks 0–2 held from an earlier session; for a stream the held part is a prefix.
            sink.heldBytes["x"] = Dictionary(
                uniqueKeysWithValues: (0..<3).map { ($0, Array(bytes[($0 * Self.chunk)..<(($0 + 1) * Self.chunk)])) })
            let item = FixedItem(
                fileOffer("x", size: UInt64(bytes.count)),
                [
                    {
                        sequential
                            ? .sequential(PiecesSource(bytes, announced: true))
                            : .positional(MemorySource(bytes))
                    }
                ])
            let result = transfer([item], sink: sink)
            let sent = try result.sent.get()
            #expect(sink.items["x"] == bytes)
            #expect(sent.bytes == UInt64(bytes.count - 3 * Self.chunk), "sent \(sent.bytes)")
            #expect(sent.held == UInt64(3 * Self.chunk))
        }
    }

    /// Two ends that agreed on BLAKE3: chunks and the whole item are checked with it, and a byte changed in flight is
    /// still caught.
    @Test func underBLAKE3ItemsArriveIdenticalAndAChangedByteIsCaught() throws {
        let bytes = randomBytes(5 * Self.chunk + 3)
        let sink = MemorySink()
        let result = transfer(
            [FixedItem(fileOffer("b", size: UInt64(bytes.count)), [{ .positional(MemorySource(bytes)) }])], sink: sink,
            digest: .blake3)
        _ = try result.sent.get()
        #expect(sink.items["b"] == bytes)
        #expect(sink.openedDigests["b"] == .blake3)
        let tampered = MemorySink()
        let bad = transfer(
            [FixedItem(fileOffer("b", size: UInt64(bytes.count)), [{ .positional(MemorySource(bytes)) }])],
            sink: tampered,
            tamper: { offset, data in
                var data = data
                let target = 3 * Self.chunk
                if offset <= target && target < offset + data.count { data[target - offset] ^= 0x01 }
                return data
            }, digest: .blake3)
        let received = #expect(throws: ProtocolError.self) { try bad.received.get() }
        #expect(received?.code == .digestMismatch)
        #expect(tampered.items.isEmpty)
    }

    /// A partial recorded with SHA-256 (by an earlier version) resumes in a BLAKE3 session: its `resume` names
    /// SHA-256, the sender hashes that item with it, and only the missing chunks are sent. One recorded with BLAKE3
    /// in a session that has only SHA-256 (an older peer) starts over.
    @Test(arguments: [DigestAlgorithm.sha256, .blake3])
    func aPartialKeepsTheDigestItWasRecordedWith(recorded: DigestAlgorithm) throws {
        let bytes = randomBytes(6 * Self.chunk + 10)
        let session: DigestAlgorithm = recorded == .sha256 ? .blake3 : .sha256
        let sink = MemorySink()
        sink.heldDigest = recorded
        sink.heldBytes["x"] = Dictionary(
            uniqueKeysWithValues: (0..<3).map { ($0, Array(bytes[($0 * Self.chunk)..<(($0 + 1) * Self.chunk)])) })
        let item = FixedItem(fileOffer("x", size: UInt64(bytes.count)), [{ .positional(MemorySource(bytes)) }])
        let sent = try transfer([item], sink: sink, digest: session).sent.get()
        #expect(sink.items["x"] == bytes)
        if recorded == .sha256 {
            #expect(sink.openedDigests["x"] == .sha256)
            #expect(sent.bytes == UInt64(bytes.count - 3 * Self.chunk), "sent \(sent.bytes)")
        } else {
            #expect(sink.openedDigests["x"] == .sha256)
            #expect(sent.bytes == UInt64(bytes.count), "sent \(sent.bytes)")
        }
    }

    /// A receiver whose `resume` names a digest the session did not agree on (BLAKE3 in a SHA-256 session) is
    /// answered with `bad-message`, and nothing of the item is sent.
    @Test func aResumeNamingADigestTheSessionDidNotAgreeOnIsRefused() throws {
        let (a, b) = MemoryStream.pair()
        let bytes = randomBytes(3 * Self.chunk)
        let item = FixedItem(fileOffer("x", size: UInt64(bytes.count)), [{ .positional(MemorySource(bytes)) }])
        nonisolated(unsafe) let hostile = FrameChannel(stream: b)
        let answered = Box<(ProtocolError?, Bool)>((nil, false))
        let done = DispatchSemaphore(value: 0)
        Thread {
            do {
                let offer = try hostile.receive(.offer, as: Offer.self)
                try hostile.send(
                    .select, Select(choices: [Choice(item: offer.items[0].id, representation: 0, reason: "")]))
                try hostile.send(.resume, Resume(item: offer.items[0].id, verified: [], digest: .blake3))
                while true {
                    let frame = try hostile.receive()
                    if frame.type == .chunk || frame.type == .zchunk {
                        // A sender that went along: the link is cut, so the test ends either way.
                        answered.value.1 = true
                        break
                    }
                    if frame.type == .error {
                        answered.value.0 = MessageCoding.peerError(from: frame)
                        break
                    }
                }
            } catch {}
            b.close()
            done.signal()
        }.start()
        let sender = SenderDriver(channel: FrameChannel(stream: a), chunkSize: Self.chunk, hasher: TestSHA())
        let error = #expect(throws: ProtocolError.self) { try sender.run([item]) }
        a.close()
        done.wait()
        #expect(error?.code == .badMessage)
        #expect(answered.value.0?.code == .badMessage, "the receiver hears why")
        #expect(!answered.value.1, "no chunk was sent")
    }

    @Test func aByteChangedInFlightIsCaughtByTheChunkDigestAndReportedToTheSender() throws {
        let bytes = randomBytes(4 * Self.chunk)
        let item = FixedItem(
            fileOffer("x", size: UInt64(bytes.count)),
            [{ .positional(MemorySource(bytes)) }])
        let sink = MemorySink()
        // Past the offer, somewhere in the second chunk's data.
        let target = 2 * Self.chunk
        let result = transfer(
            [item], sink: sink,
            tamper: { offset, data in
                var data = data
                if offset <= target && target < offset + data.count { data[target - offset] ^= 0x40 }
                return data
            })
        let received = #expect(throws: ProtocolError.self) { try result.received.get() }
        #expect(received?.code == .digestMismatch)
        let sent = #expect(throws: ProtocolError.self) { try result.sent.get() }
        #expect(sent?.code == .digestMismatch, "the sender hears the receiver's reason")
        #expect(sink.items.isEmpty)
        #expect(sink.suspended == ["x"], "what was verified is kept for a resume")
    }

    /// A hostile sender announces 16 KiB chunks and sends 64 KiB ones: the first chunk of the large item is refused
    /// by its frame's length, before its data is read into the writer's buffer.
    @Test func aChunkLongerThanTheOfferedChunkSizeIsRefusedBeforeItIsRead() throws {
        let bytes = randomBytes(4 * Self.chunk)
        let item = FixedItem(
            fileOffer("x", size: UInt64(bytes.count)),
            [{ .positional(MemorySource(bytes)) }])
        let sink = MemorySink()
        let (honest, lie) = (Array("\"chunkSize\":\(Self.chunk)".utf8), Array("\"chunkSize\":16384".utf8))
        #expect(honest.count == lie.count)
        var lied = false
        let result = transfer(
            [item], sink: sink,
            tamper: { _, data in
                guard !lied, let at = data.firstRange(of: honest) else { return data }
                lied = true
                var data = data
                data.replaceSubrange(at, with: lie)
                return data
            })
        #expect(lied, "the offer was not found on the wire")
        let received = #expect(throws: ProtocolError.self) { try result.received.get() }
        #expect(received?.code == .frameTooLarge, "\(String(describing: received))")
        #expect(sink.items.isEmpty)
    }

    @Test func anItemWithoutASizeIsCutAtItsAcceptLimitAndAtTheFreeSpace() throws {
        let bytes = randomBytes(5 * Self.chunk)
        func unsized() -> FixedItem {
            FixedItem(
                fileOffer("png", size: nil, type: "public.png", kind: .data),
                [{ .sequential(PiecesSource(bytes, announced: false)) }])
        }
        let limited = transfer(
            [unsized()], sink: MemorySink(), accept: [AcceptedType(.png, maxSize: UInt64(2 * Self.chunk))])
        let refused = #expect(throws: ProtocolError.self) { try limited.received.get() }
        #expect(refused?.code == .refused && refused?.message.contains("exceeds") == true, "\(refused?.message ?? "")")
        let full = transfer(
            [unsized()], sink: MemorySink(), policy: .init(freeSpace: UInt64(3 * Self.chunk)))
        let storage = #expect(throws: ProtocolError.self) { try full.received.get() }
        #expect(storage?.code == .storage, "\(storage?.message ?? "")")
        #expect((try? full.sent.get()) == nil)
    }

    @Test func aFileURLNeverLeavesTheSender() throws {
        let link = Array("file:///home/ana/holiday.mp4".utf8)
        let item = FixedItem(

            OfferItem(
                id: "u", label: "u", representations: [OfferedRepresentation(contentType: "public.url", kind: .data)]),
            [{ .positional(MemorySource(link)) }])
        let sink = MemorySink()
        let result = transfer([item], sink: sink)
        let error = #expect(throws: ProtocolError.self) { try result.sent.get() }
        #expect(error?.code == .refused)
        #expect(sink.items.isEmpty)
    }

    @Test func compressedChunksArriveIdentical() throws {
        let text = Array(String(repeating: "a line of a log that repeats itself\n", count: 20_000).utf8)
        let item = FixedItem(
            fileOffer("log", size: UInt64(text.count)),
            [{ .positional(MemorySource(text)) }])
        let sink = MemorySink()
        let result = transfer([item], sink: sink, codec: TestZstd())
        let sent = try result.sent.get()
        #expect(sink.items["log"] == text)
        #expect(sent.wireBytes < sent.bytes / 4, "wire \(sent.wireBytes) of \(sent.bytes)")
    }

    @Test func choicesMadeElsewhereReplaceTheNegotiation() throws {
        let item = FixedItem(

            OfferItem(
                id: "p", label: "profile",
                representations: [
                    OfferedRepresentation(contentType: "public.json", kind: .data),
                    OfferedRepresentation(contentType: "public.utf8-plain-text", kind: .data),
                ]),
            [
                { .positional(MemorySource(Array("{}".utf8))) },
                { .positional(MemorySource(Array("Ana".utf8))) },
            ])
        let sink = MemorySink()
        let result = transfer(
            [item], sink: sink,
            decide: { offer in
                [Choice(item: offer.items[0].id, representation: 1, reason: "the far device takes text only")]
            })
        _ = try result.sent.get()
        #expect(sink.items["p"] == Array("Ana".utf8))
        #expect(item.produced == [1])
    }

    @Test func aSelectForTenThousandRefusalsWithLongReasonsFitsItsLimit() throws {
        let long = String(repeating: "com.example.a-long-type-name ", count: 200)
        let choices = (0..<10_000).map { index in
            Choice(
                item: "item-\(index)", representation: nil, reason: long,
                refusal: ProtocolError(.noCommonRepresentation, long))
        }
        let select = Select(choices: choices).fitting(Limits.maxOfferPayload)
        #expect(MessageCoding.frame(.select, select).payload.count <= Limits.maxOfferPayload)
        #expect(select.choices.count == 10_000 && select.choices[0].refusal?.code == .noCommonRepresentation)
    }
}

/// A value shared with a thread.
final class Box<Value>: @unchecked Sendable {  // written by one thread, read after it signals
    var value: Value
    init(_ value: Value) { self.value = value }
}
