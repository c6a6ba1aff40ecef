import CoreTransferable

/// The one sending side of every transfer: offers items from their sources, produces only what the receiver chose,
/// streams the chunks it lacks (each hashed once, as it goes), and reports typed events. It runs `SenderMachine` over
/// a `FrameChannel`; the CLI, the agent, the watch, the clipboard and watch forwarding give it sources, nothing more.
public final class SenderDriver {
    public let channel: FrameChannel
    public let chunkSize: Int
    let hasher: ChunkHasher
    /// Compresses chunks when the receiver decodes them (nil: never).
    let codec: ChunkCodec?
    let events: TransferEvents
    var buffer: [UInt8]
    var summary = TransferSummary()
    var machine = SenderMachine(offer: Offer(items: [], chunkSize: 1 << 20))
    var items: [ItemSource] = []
    /// Actions still to carry out, in order (a `resume` or `ack` read while an item streams adds to them).
    var queued: [SenderMachine.Action] = []

    /// Each item waits for the previous one's acknowledgement (see `SenderMachine.oneAtATime`).
    public var oneAtATime = false
    /// How many chunks of a large item may be read and hashed ahead of the sending: enough that a busy neighbour
    /// holding up one thread for a few milliseconds does not stall the other. A client short of memory asks for fewer.
    public var readAhead = 8
    /// Whether this sender said it speaks delta transfer (its hello lists `Delta.feature`): a receiver may then
    /// describe an earlier version of an item, and the missing chunks go as patches against it.
    public var delta = false
    /// The indexes of the earlier versions receivers hold, by item id, until the item is streamed, and their bytes.
    var bases: [String: (index: BasisIndex, bytes: Int)] = [:]
    var basesBytes = 0
    /// How fast the link takes bytes, measured as chunks are written.
    let meter = LinkMeter()
    /// One for the whole session: what it learned of the link and the content carries from item to item.
    lazy var compressor: AdaptiveCompressor? = codec.map { AdaptiveCompressor(codec: $0, meter: meter) }

    public init(
        channel: FrameChannel, chunkSize: Int = 1 << 20, hasher: ChunkHasher, codec: ChunkCodec? = nil,
        events: @escaping TransferEvents = { _ in }
    ) {
        self.channel = channel
        self.chunkSize = chunkSize
        self.hasher = hasher
        self.codec = codec
        self.events = events
        buffer = [UInt8](repeating: 0, count: chunkSize)
    }

    /// Offers `items` and streams what the receiver chooses, until it has acknowledged every accepted item (then
    /// `bye`). A failure of the peer arrives as its `ProtocolError`.
    public func run(_ items: [ItemSource]) throws -> TransferSummary {
        do {
            return try drive(items)
        } catch let error as ProtocolError where !channel.errorExchanged {
            // The receiver hears why (a source that changed makes it discard its partial).
            try? channel.send(.error, error)
            throw error
        }
    }

    func drive(_ items: [ItemSource]) throws -> TransferSummary {
        let offer = Offer(items: items.map(\.offer), chunkSize: chunkSize).trimmingPreviews()
        try offer.validate()
        self.items = items
        machine = SenderMachine(offer: offer, oneAtATime: oneAtATime)
        queued = machine.peerReady()
        while true {
            while !queued.isEmpty {
                let action = queued.removeFirst()
                if try perform(action) { return summary }
            }
            if machine.state == .finished { return summary }
            let frame = try channel.receive()
            if frame.type == .basis {
                try takeBasis(frame)
                continue
            }
            if frame.type == .held, machine.state == .awaitingSelect {
                // The receiver's user decides first: nothing more in this session; the caller offers again later.
                throw try MessageCoding.decode(OfferHeld.self, from: frame)
            }
            queued += try machine.received(frame: frame)
            if frame.type == .select { events(.answered(machine.choices)) }
        }
    }

    /// Carries out one action; true once `bye` is sent.
    func perform(_ action: SenderMachine.Action) throws -> Bool {
        switch action {
        case .sendOffer(let offer):
            events(.offered(offer.items))
            try send { try channel.send(.offer, offer) }
        case .refused(let index, let choice):
            summary.refused.append((items[index].offer.label, choice.reason))
            events(
                .refused(
                    item: index, label: items[index].offer.label,
                    offered: items[index].offer.representations.map(\.contentType), reason: choice.reason))
        case .stream(let index, let representation, let verified):
            let item = items[index].offer
            events(
                .chosen(
                    item: index, label: item.label, offered: item.representations.map(\.contentType),
                    contentType: item.representations[representation].contentType,
                    reason: machine.choices[index].reason))
            let done = try stream(
                items[index], index: index, representation: representation, held: verified, number: index + 1)
            // `sendDone` comes first, then the next item if its `resume` is already in.
            queued = try machine.finishedStreaming(done) + queued
        case .sendDone(let done):
            // Between items too: a receiver answering many small items must never wait on a full socket.
            try readAnswers()
            try send { try channel.send(.done, done) }
        case .delivered(let index, let ack):
            summary.delivered.append((items[index].offer.label, ack))
            events(.delivered(item: index, label: items[index].offer.label, ack: ack))
        case .sendBye:
            try send { try channel.send(.bye, Bye()) }
            return true
        }
        return false
    }

    /// Produces the chosen representation and streams the chunks not in `held`; returns the item's `done`.
    func stream(_ source: ItemSource, index: Int, representation: Int, held: Set<Int>, number: Int) throws
        -> Done
    {
        let offered = source.offer.representations[representation]
        // The session's digest, or SHA-256 when the receiver's partial of this item was recorded with it; a receiver
        // naming any other digest than these two is not following the protocol.
        let named = machine.itemDigests[index]
        if let named, named != .sha256, named != self.hasher.algorithm {
            throw ProtocolError(
                .badMessage, "the receiver asked for \(named.rawValue) digests, which this session did not agree on")
        }
        let hasher = named.map { self.hasher.make($0) } ?? self.hasher
        let produced = try source.produce(representation: representation)
        switch produced {
        case .positional(let bytes):
            defer { bytes.close() }
            var done = try streamPositional(
                bytes, item: source.offer, index: index, offered: offered, held: held, number: number, hasher: hasher)
            if offered.suggestedFileName == nil, let name = bytes.fileName, name.utf8.count <= Done.maxFileName,
                !name.contains("/" as Character)
            {
                done.fileName = name
            }
            return done
        case .sequential(let stream):
            defer { stream.close() }
            return try streamSequential(
                stream, item: source.offer, index: index, offered: offered, held: held, number: number, hasher: hasher)
        }
    }

    /// Reads what the receiver said meanwhile, without waiting: the `resume` of items ahead and the `ack` of items
    /// before (protocol 4), or an `error` that stops the transfer (a full disk, a limit).
    func readAnswers() throws {
        while channel.hasIncomingData {
            let frame = try channel.receive()
            try takeAnswer(frame)
        }
    }

    /// A frame from the receiver while an item streams: `resume`, `ack`, a `basis`, or its `error`.
    func takeAnswer(_ frame: Frame) throws {
        if frame.type == .error { throw MessageCoding.peerError(from: frame) }
        if frame.type == .basis { return try takeBasis(frame) }
        guard frame.type == .resume || frame.type == .ack else {
            throw ProtocolError(.badMessage, "the receiver sent \(frame.type) in the middle of an item")
        }
        for action in try machine.received(frame: frame) {
            if case .delivered(let index, let ack) = action {
                summary.delivered.append((items[index].offer.label, ack))
                events(.delivered(item: index, label: items[index].offer.label, ack: ack))
            } else {
                queued.append(action)
            }
        }
    }

    /// A receiver's index of an earlier version of an offered item (only when this sender speaks delta).
    func takeBasis(_ frame: Frame) throws {
        guard delta else { throw ProtocolError(.badMessage, "the receiver sent a basis, though delta was not agreed") }
        let index = try BasisIndex.decode(frame.payload)
        guard machine.offer.items.contains(where: { $0.id == index.item }), bases[index.item] == nil else {
            throw ProtocolError(.badMessage, "a basis for item \(index.item), which is not offered or has one")
        }
        // What a receiver announces ahead is held in bounded memory: past the budget an item simply goes whole (the
        // receiver takes its chunks as it takes any).
        guard basesBytes + frame.payload.count <= Delta.maxHeldBases else { return }
        basesBytes += frame.payload.count
        bases[index.item] = (index, frame.payload.count)
    }

    /// The basis of `item`, if the receiver sent one; it is let go of as the item streams.
    func takeBasis(for item: String) -> BasisIndex? {
        guard let held = bases.removeValue(forKey: item) else { return nil }
        basesBytes -= held.bytes
        return held.index
    }

    /// Waits for the receiver's `type` frame, taking its other answers meanwhile.
    func awaitFrame(_ type: FrameType) throws -> Frame {
        while true {
            let frame = try channel.receive()
            if frame.type == type { return frame }
            try takeAnswer(frame)
        }
    }

    /// Sends one verified chunk, as its compressed form when there is one. Before each chunk it reads what the
    /// receiver said meanwhile.
    func sendChunk(_ bytes: UnsafeRawBufferPointer, index: Int, digest: [UInt8], packed: [UInt8]?) throws {
        try readAnswers()
        let header = ChunkHeader(index: index, digest: digest)
        let start = ContinuousClock.now
        if let packed {
            try send { try packed.withUnsafeBytes { try channel.sendBinary(.zchunk, header: header, data: $0) } }
            summary.wireBytes += UInt64(packed.count)
        } else {
            try send { try channel.sendBinary(.chunk, header: header, data: bytes) }
            summary.wireBytes += UInt64(bytes.count)
        }
        meter.record(bytes: packed?.count ?? bytes.count, seconds: (ContinuousClock.now - start).seconds)
        summary.bytes += UInt64(bytes.count)
        events(.progress(bytes: bytes.count))
    }

    /// A write that fails because the receiver went away reports the receiver's reason when it sent one.
    func send(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch let error as ProtocolError {
            throw error
        } catch {
            throw channel.pendingPeerError() ?? error
        }
    }

    func length(of chunk: Int, size: UInt64) -> Int {
        let start = UInt64(chunk) * UInt64(chunkSize)
        return Int(min(UInt64(chunkSize), size - min(size, start)))
    }
}
