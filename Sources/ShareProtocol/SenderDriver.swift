import CoreTransferable

/// The one sending side of every transfer: offers items from their sources, produces only what the receiver chose,
/// streams the chunks it lacks (each hashed once, as it goes), and reports typed events. It runs `SenderMachine` over
/// a `FrameChannel`; the CLI, the agent, the watch, the clipboard and watch forwarding give it sources, nothing more.
public final class SenderDriver {
    public let channel: FrameChannel
    public let chunkSize: Int
    private let hasher: ChunkHasher
    /// Compresses chunks when the receiver decodes them (nil: never).
    private let codec: ChunkCodec?
    private let events: TransferEvents
    private var buffer: [UInt8]
    private var summary = TransferSummary()
    private var machine = SenderMachine(offer: Offer(items: [], chunkSize: 1 << 20))
    private var items: [ItemSource] = []
    /// Actions still to carry out, in order (a `resume` or `ack` read while an item streams adds to them).
    private var queued: [SenderMachine.Action] = []

    /// Each item waits for the previous one's acknowledgement (see `SenderMachine.oneAtATime`).
    public var oneAtATime = false
    /// How many chunks of a large item may be read and hashed ahead of the sending: enough that a busy neighbour
    /// holding up one thread for a few milliseconds does not stall the other. A client short of memory asks for fewer.
    public var readAhead = 8
    /// Whether this sender said it speaks delta transfer (its hello lists `Delta.feature`): a receiver may then
    /// describe an earlier version of an item, and the missing chunks go as patches against it.
    public var delta = false
    /// The indexes of the earlier versions receivers hold, by item id, until the item is streamed, and their bytes.
    private var bases: [String: (index: BasisIndex, bytes: Int)] = [:]
    private var basesBytes = 0
    /// How fast the link takes bytes, measured as chunks are written.
    private let meter = LinkMeter()
    /// One for the whole session: what it learned of the link and the content carries from item to item.
    private lazy var compressor: AdaptiveCompressor? = codec.map { AdaptiveCompressor(codec: $0, meter: meter) }

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

    private func drive(_ items: [ItemSource]) throws -> TransferSummary {
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
    private func perform(_ action: SenderMachine.Action) throws -> Bool {
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
    private func stream(_ source: ItemSource, index: Int, representation: Int, held: Set<Int>, number: Int) throws
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

    /// Items with more chunks to send than this are read, hashed and compressed on a thread of their own (see
    /// `ChunkProducer`); smaller ones on the sending thread, where a thread would cost more than it saves.
    static let producerThreshold = 2

    private func streamPositional(
        _ source: PositionalSource, item: OfferItem, index: Int, offered: OfferedRepresentation,
        held verified: Set<Int>, number: Int, hasher: ChunkHasher
    ) throws -> Done {
        let size = source.size
        if let expected = offered.size, expected != size {
            throw ProtocolError(
                .sourceChanged,
                "\(item.label) changed size since it was offered; run the command again to send the new version")
        }
        try checkNotURLToAFile(offered, source: source)
        if let basis = takeBasis(for: item.id), offered.size != nil {
            return try streamDelta(
                .positional(source), size: size, basis: basis, item: item, index: index, held: verified,
                number: number, hasher: hasher)
        }
        let chunks = ChunkMath.count(size: size, chunkSize: chunkSize)
        let held = verified.filter { $0 < chunks }.sorted()
        let heldBytes = held.reduce(UInt64(0)) { $0 + UInt64(length(of: $1, size: size)) }
        summary.held += heldBytes
        events(.started(item: index, label: item.label, number: number, total: size, held: heldBytes))
        let background = held.isEmpty ? nil : source.hashHeld(held, chunkSize: chunkSize, hasher: hasher.another())
        // Whatever ends this item, the hashing of held chunks stops before the source closes.
        defer { background?.cancel() }
        let compressor = offered.size != nil ? self.compressor : nil
        let heldSet = Set(held)
        var digests = ItemDigest(chunks: chunks)
        let size64 = size
        let chunkSize = chunkSize
        let label = item.label
        let read = { (chunk: Int, buffer: UnsafeMutableRawBufferPointer) throws -> Int in
            let start = UInt64(chunk) * UInt64(chunkSize)
            let wanted = Int(min(UInt64(chunkSize), size64 - min(size64, start)))
            let got = try source.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<wanted]), at: start)
            guard got == wanted else {
                throw ProtocolError(
                    .sourceChanged, "\(label) became shorter while it was being sent; run the command again")
            }
            return got
        }
        if chunks - held.count > Self.producerThreshold {
            let producer = ChunkProducer(
                chunkSize: chunkSize, depth: readAhead, hasher: hasher.another(), compressor: compressor,
                held: { heldSet.contains($0) }
            ) { emitter in
                for chunk in 0..<chunks where !heldSet.contains(chunk) {
                    try emitter.chunk(chunk) { try read(chunk, $0) }
                }
            }
            defer { producer.stop() }
            _ = try consume(producer, into: &digests, limit: chunks, label: label)
        } else {
            for chunk in 0..<chunks where !heldSet.contains(chunk) {
                let count = try buffer.withUnsafeMutableBytes { try read(chunk, $0) }
                try hashAndSend(
                    count, index: chunk, into: &digests, send: true, compressor: compressor, hasher: hasher)
            }
        }
        if let background {
            for (chunk, digest) in try background.wait() { digests.record(chunk, digest) }
        }
        events(.finished(item: index))
        try source.checkUnchanged()
        guard let root = digests.root(using: hasher) else {
            throw ProtocolError(.internalError, "a digest of \(item.label) is missing")
        }
        return Done(item: item.id, size: size, chunks: chunks, digest: root)
    }

    /// The bytes of an item, chunk by chunk, as many times as a delta needs them: read from a positional source,
    /// or made again by a sequential one (an archive's stream is the same bytes every time).
    private enum DeltaBytes {
        case positional(PositionalSource)
        case sequential(SequentialSource)
    }

    /// Calls `body` with each chunk of `bytes` in order (`wanted` says which: the others are skipped where they can
    /// be); throws `sourceChanged` when the item is not `size` bytes any more.
    private func eachChunk(
        _ bytes: DeltaBytes, size: UInt64, label: String, wanted: (Int) -> Bool,
        _ body: (Int, UnsafeRawBufferPointer) throws -> Void
    ) throws {
        let chunks = ChunkMath.count(size: size, chunkSize: chunkSize)
        let chunkSize = chunkSize
        switch bytes {
        case .positional(let source):
            try buffer.withUnsafeMutableBytes { raw in
                for chunk in 0..<chunks where wanted(chunk) {
                    let count = length(of: chunk, size: size)
                    let got = try source.read(
                        into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<count]),
                        at: UInt64(chunk) * UInt64(chunkSize))
                    guard got == count else {
                        throw ProtocolError(
                            .sourceChanged, "\(label) became shorter while it was being sent; run the command again")
                    }
                    try body(chunk, UnsafeRawBufferPointer(rebasing: raw[0..<count]))
                }
            }
        case .sequential(let source):
            var fill = 0
            var next = 0
            var total: UInt64 = 0
            try buffer.withUnsafeMutableBytes { raw in
                try source.produce { piece in
                    var offset = 0
                    while offset < piece.count {
                        let n = min(chunkSize - fill, piece.count - offset)
                        raw.baseAddress!.advanced(by: fill).copyMemory(
                            from: piece.baseAddress!.advanced(by: offset), byteCount: n)
                        fill += n
                        offset += n
                        total += UInt64(n)
                        if fill == chunkSize {
                            guard next < chunks else { throw Self.grew(label) }
                            if wanted(next) { try body(next, UnsafeRawBufferPointer(rebasing: raw[0..<fill])) }
                            next += 1
                            fill = 0
                        }
                    }
                }
                if fill > 0 || next == 0 {
                    guard next < chunks else { throw Self.grew(label) }
                    if wanted(next) { try body(next, UnsafeRawBufferPointer(rebasing: raw[0..<fill])) }
                    next += 1
                }
            }
            guard total == size, next == chunks else {
                throw ProtocolError(
                    .sourceChanged, "\(label) changed while it was being sent; run the command again to send it")
            }
        }
    }

    /// Streams the missing chunks of an item as patches against the receiver's basis (see `Delta`): the new version
    /// is read once, cut and named as the basis was; the chunks of the basis groups it did not find are asked for,
    /// then the sums of the basis blocks around what is still literal; then each missing chunk goes as basis ranges
    /// and literal bytes (the chunk's own bytes, read again). The receiver checks each chunk it makes against its
    /// digest and names those to send whole (its basis changed), which go before `done`.
    private func streamDelta(
        _ bytes: DeltaBytes, size: UInt64, basis: BasisIndex, item: OfferItem, index: Int, held verified: Set<Int>,
        number: Int, hasher: ChunkHasher
    ) throws -> Done {
        let chunks = ChunkMath.count(size: size, chunkSize: chunkSize)
        let held = verified.filter { $0 < chunks }
        let heldBytes = held.reduce(UInt64(0)) { $0 + UInt64(length(of: $1, size: size)) }
        summary.held += heldBytes
        events(.started(item: index, label: item.label, number: number, total: size, held: heldBytes))
        var plan = DeltaPlan(basis: basis, size: size)
        var digests = ItemDigest(chunks: chunks)
        // One pass over the new version: every chunk's digest, and its groups (with their chunks where the basis
        // has no such group).
        var indexer = DeltaIndexer(parameters: basis.parameters, keepChunks: true)
        try eachChunk(bytes, size: size, label: item.label, wanted: { _ in true }) { chunk, data in
            digests.record(chunk, hasher.digest(data))
            indexer.feed(data) { offset, group, parts in plan.add(offset: offset, group: group, chunks: parts) }
        }
        indexer.finish { offset, group, parts in plan.add(offset: offset, group: group, chunks: parts) }
        let query = plan.query(item: item.id)
        if !query.groups.isEmpty {
            try send { try channel.send(Frame(type: .basisQuery, payload: query.encoded())) }
            let frame = try awaitFrame(.basisDetail)
            let asked = query.groups.flatMap { range in (range.start..<range.end).map { basis.groups[$0] } }
            let detail = try BasisDetail.decode(frame.payload, asked: asked, parameters: basis.parameters)
            plan.learn(detail, asked: query.groups)
        }
        plan.finish()
        // The literal regions left, narrowed by block sums of the basis bytes around them.
        let blockQuery = plan.blockQuery(item: item.id)
        if !blockQuery.ranges.isEmpty {
            try send { try channel.send(Frame(type: .blockQuery, payload: blockQuery.encoded())) }
            plan.learn(try BlockSums.decode(awaitFrame(.blockSums).payload, query: blockQuery))
        }
        let chunkSize = chunkSize
        try eachChunk(bytes, size: size, label: item.label, wanted: { !held.contains($0) }) { chunk, data in
            let start = UInt64(chunk) * UInt64(chunkSize)
            let (patch, literal) = plan.patch(start: start, data: data)
            // A chunk that changed since its digest was taken makes the receiver ask for it again (below).
            guard let digest = digests.chunks[chunk] else {
                throw ProtocolError(.internalError, "a digest of \(item.label) is missing")
            }
            if literal == data.count || patch.count > chunkSize {
                // Nothing to copy: the chunk goes as it is (compressed when that pays).
                try sendChunk(data, index: chunk, digest: digest, packed: compressor?.compress(data))
                return
            }
            try readAnswers()
            try send {
                try patch.withUnsafeBytes {
                    try channel.sendBinary(.patch, header: ChunkHeader(index: chunk, digest: digest), data: $0)
                }
            }
            summary.wireBytes += UInt64(patch.count)
            summary.bytes += UInt64(data.count)
            summary.patchedBytes += UInt64(data.count - literal)
            events(.progress(bytes: data.count))
        }
        try send { try channel.send(.deltaEnd, DeltaEnd(item: item.id)) }
        let result = try MessageCoding.decode(DeltaResult.self, from: try awaitFrame(.deltaResult))
        guard result.item == item.id else {
            throw ProtocolError(.badMessage, "the receiver ended the patches of \(result.item), not \(item.id)")
        }
        let redo = try ChunkMath.indices(result.redo, limit: chunks).subtracting(held)
        if !redo.isEmpty {
            try eachChunk(bytes, size: size, label: item.label, wanted: { redo.contains($0) }) { chunk, data in
                let digest = hasher.digest(data)
                guard digest == digests.chunks[chunk] else {
                    throw ProtocolError(
                        .sourceChanged, "\(item.label) changed while it was being sent; run the command again")
                }
                try sendChunk(data, index: chunk, digest: digest, packed: compressor?.compress(data))
            }
        }
        summary.redone += redo.count
        events(.finished(item: index))
        if case .positional(let source) = bytes { try source.checkUnchanged() }
        guard let root = digests.root(using: hasher) else {
            throw ProtocolError(.internalError, "a digest of \(item.label) is missing")
        }
        return Done(item: item.id, size: size, chunks: chunks, digest: root)
    }

    private func streamSequential(
        _ source: SequentialSource, item: OfferItem, index: Int, offered: OfferedRepresentation,
        held verified: Set<Int>, number: Int, hasher: ChunkHasher
    ) throws -> Done {
        if let expected = offered.size, let size = source.size, expected != size {
            throw ProtocolError(
                .sourceChanged, "\(item.label) changed since it was offered; run the command again to send it")
        }
        let size = offered.size ?? source.size
        if let basis = takeBasis(for: item.id), let size, offered.size != nil {
            return try streamDelta(
                .sequential(source), size: size, basis: basis, item: item, index: index, held: verified,
                number: number, hasher: hasher)
        }
        let chunks = size.map { ChunkMath.count(size: $0, chunkSize: chunkSize) }
        let held = chunks.map { count in verified.filter { $0 < count } } ?? []
        let heldBytes = size.map { size in held.reduce(UInt64(0)) { $0 + UInt64(length(of: $1, size: size)) } } ?? 0
        summary.held += heldBytes
        events(.started(item: index, label: item.label, number: number, total: size, held: heldBytes))
        let compressor = size != nil ? self.compressor : nil
        var digests = ItemDigest(chunks: chunks ?? 0)
        let sent: (chunks: Int, bytes: UInt64)
        if let chunks, chunks - held.count > Self.producerThreshold {
            let producer = ChunkProducer(
                chunkSize: chunkSize, depth: readAhead, hasher: hasher.another(), compressor: compressor,
                held: { held.contains($0) }
            ) { emitter in
                try source.produce { try emitter.append($0) }
                try emitter.flush()
            }
            defer { producer.stop() }
            sent = try consume(producer, into: &digests, limit: chunks, label: item.label)
        } else {
            var fill = 0
            var next = 0
            var total: UInt64 = 0
            func emitChunk() throws {
                if let chunks, next >= chunks { throw Self.grew(item.label) }
                try hashAndSend(
                    fill, index: next, into: &digests, send: !held.contains(next), compressor: compressor,
                    hasher: hasher)
                next += 1
                fill = 0
            }
            try source.produce { bytes in
                var offset = 0
                while offset < bytes.count {
                    let n = min(chunkSize - fill, bytes.count - offset)
                    buffer.withUnsafeMutableBytes { destination in
                        destination.baseAddress!.advanced(by: fill).copyMemory(
                            from: bytes.baseAddress!.advanced(by: offset), byteCount: n)
                    }
                    fill += n
                    offset += n
                    total += UInt64(n)
                    if fill == chunkSize { try emitChunk() }
                }
            }
            if fill > 0 || next == 0 { try emitChunk() }
            sent = (next, total)
        }
        if let size, sent.bytes != size || sent.chunks != chunks {
            throw ProtocolError(
                .sourceChanged, "\(item.label) changed while it was being sent; run the command again to send it")
        }
        events(.finished(item: index))
        guard let root = digests.root(using: hasher) else {
            throw ProtocolError(.internalError, "a digest of \(item.label) is missing")
        }
        return Done(item: item.id, size: sent.bytes, chunks: sent.chunks, digest: root)
    }

    private static func grew(_ label: String) -> ProtocolError {
        ProtocolError(.sourceChanged, "\(label) grew after it was offered; run the command again to send it")
    }

    /// Sends what a producer made, in order, recording every digest (of held chunks too); returns how many chunks
    /// and bytes it made.
    private func consume(_ producer: ChunkProducer, into digests: inout ItemDigest, limit: Int, label: String)
        throws -> (chunks: Int, bytes: UInt64)
    {
        var chunks = 0
        var bytes: UInt64 = 0
        while let chunk = try producer.next() {
            guard chunk.index < limit else { throw Self.grew(label) }
            digests.record(chunk.index, chunk.digest)
            if chunk.send {
                try sendChunk(
                    UnsafeRawBufferPointer(rebasing: chunk.buffer.bytes[0..<chunk.count]), index: chunk.index,
                    digest: chunk.digest, packed: chunk.packed)
            }
            chunks = chunk.index + 1
            bytes += UInt64(chunk.count)
            producer.recycle(chunk.buffer)
        }
        return (chunks, bytes)
    }

    /// Hashes the first `count` bytes of the buffer as chunk `index` (each byte is hashed once, here), records the
    /// digest and, unless the receiver holds the chunk, sends it.
    private func hashAndSend(
        _ count: Int, index: Int, into digests: inout ItemDigest, send: Bool, compressor: AdaptiveCompressor?,
        hasher: ChunkHasher
    ) throws {
        try buffer.withUnsafeBytes { raw in
            let bytes = UnsafeRawBufferPointer(rebasing: raw[0..<count])
            let digest = hasher.digest(bytes)
            digests.record(index, digest)
            if send { try sendChunk(bytes, index: index, digest: digest, packed: compressor?.compress(bytes)) }
        }
    }

    /// Reads what the receiver said meanwhile, without waiting: the `resume` of items ahead and the `ack` of items
    /// before (protocol 4), or an `error` that stops the transfer (a full disk, a limit).
    private func readAnswers() throws {
        while channel.hasIncomingData {
            let frame = try channel.receive()
            try takeAnswer(frame)
        }
    }

    /// A frame from the receiver while an item streams: `resume`, `ack`, a `basis`, or its `error`.
    private func takeAnswer(_ frame: Frame) throws {
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
    private func takeBasis(_ frame: Frame) throws {
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
    private func takeBasis(for item: String) -> BasisIndex? {
        guard let held = bases.removeValue(forKey: item) else { return nil }
        basesBytes -= held.bytes
        return held.index
    }

    /// Waits for the receiver's `type` frame, taking its other answers meanwhile.
    private func awaitFrame(_ type: FrameType) throws -> Frame {
        while true {
            let frame = try channel.receive()
            if frame.type == type { return frame }
            try takeAnswer(frame)
        }
    }

    /// Sends one verified chunk, as its compressed form when there is one. Before each chunk it reads what the
    /// receiver said meanwhile.
    private func sendChunk(_ bytes: UnsafeRawBufferPointer, index: Int, digest: [UInt8], packed: [UInt8]?) throws {
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
    private func send(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch let error as ProtocolError {
            throw error
        } catch {
            throw channel.pendingPeerError() ?? error
        }
    }

    private func length(of chunk: Int, size: UInt64) -> Int {
        let start = UInt64(chunk) * UInt64(chunkSize)
        return Int(min(UInt64(chunkSize), size - min(size, start)))
    }

    /// The engine's rule: no representation that crosses to another machine is a `file:` URL. Such a URL names a
    /// file on this machine only, and tells the receiver where the sender keeps it.
    private func checkNotURLToAFile(_ offered: OfferedRepresentation, source: PositionalSource) throws {
        guard source.size <= 1 << 16, URLRule.mayBeURL(offered.contentType) else { return }
        var head = [UInt8](repeating: 0, count: 16)
        let n = try head.withUnsafeMutableBytes { try source.read(into: $0, at: 0) }
        if URLRule.isFileURL(Array(head[0..<n])) {
            throw ProtocolError(.refused, "a file: URL names a file on this machine only; it is never sent")
        }
    }
}

/// `file:` URLs never leave the machine.
public enum URLRule {
    /// Whether a representation of this type might carry a URL.
    public static func mayBeURL(_ contentType: String) -> Bool {
        let lower = contentType.lowercased()
        return lower == "public.url" || lower == "public.file-url" || lower.hasSuffix("url")
    }

    /// Whether the bytes start a `file:` URL (ignoring case and leading white space).
    public static func isFileURL(_ bytes: [UInt8]) -> Bool {
        let text = String(decoding: bytes, as: UTF8.self).drop { $0.isWhitespace }.lowercased()
        return text.hasPrefix("file:")
    }
}
