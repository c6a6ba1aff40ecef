import CoreTransferable

/// The receiving side of a transfer session, as events in and actions out; the driver does the I/O.
///
/// It negotiates each offered item against the accept list, then for each accepted item asks the driver what is
/// already verified, announces it with `resume`, and checks every chunk (index in range, in ascending order, not
/// already held, within size) before the driver writes it.
public struct ReceiverMachine: Sendable {
    public enum State: Sendable, Equatable {
        case awaitingOffer, preparing(item: Int), receiving(item: Int), verifying(item: Int), awaitingBye, finished,
            failed
    }

    public enum Action: Sendable, Equatable {
        case sendSelect(Select)
        /// Look up what is already held for this item; answer with `prepared(verified:)`.
        case prepare(item: Int, representation: Int)
        case sendResume(Resume)
        /// Write this chunk (its digest already checked by the driver) at `index * chunkSize`.
        case write(index: Int)
        /// Compare the whole-item digest and finish the item; answer with `verified(_:)`.
        case verify(item: Int, Done)
        case sendAck(Ack)
        /// Every item is done.
        case complete
    }

    /// Limits a receiver applies on top of negotiation.
    public struct Policy: Sendable {
        /// Largest item accepted, in bytes.
        public var maxItemSize: UInt64?
        /// Bytes free where items are written; items of known size that do not fit are refused.
        public var freeSpace: UInt64?
        /// Says why an item may not be received at all (nil: it may), before any negotiation.
        public var refuse: (@Sendable (OfferItem) -> String?)?
        public init(
            maxItemSize: UInt64? = nil, freeSpace: UInt64? = nil, refuse: (@Sendable (OfferItem) -> String?)? = nil
        ) {
            self.maxItemSize = maxItemSize
            self.freeSpace = freeSpace
            self.refuse = refuse
        }
    }

    public let negotiator: Negotiator
    public let policy: Policy
    public private(set) var state: State = .awaitingOffer
    public private(set) var offer: Offer?
    public private(set) var choices: [Choice] = []
    private var pending: [Int] = []
    // The item being received: chunks held before this session, and how many arrived since (chunks arrive in
    // ascending order and never one already held, so the two counts tell when the item is complete; no set of every
    // missing index is ever built, whatever size a peer announces).
    private var held: Set<Int> = []
    private var arrived = 0
    private var expectedChunks: Int?
    private var lastIndex = -1
    private var receivedBytes: UInt64 = 0
    private var itemLimit: UInt64 = .max
    /// Per accepted item: the size limit of the accept-list entry it matched.
    private var acceptLimits: [Int: UInt64] = [:]
    /// Bytes promised to items of known size, and bytes streamed so far for items of unknown size: together they
    /// must fit in the free space.
    private var committed: UInt64 = 0
    private var streamed: UInt64 = 0
    /// Whether the current item's size was announced.
    private var currentSized = true

    public init(negotiator: Negotiator, policy: Policy = Policy()) {
        self.negotiator = negotiator
        self.policy = policy
    }

    /// An offer arrived: negotiated against the accept list and the policy, or, with `decided`, answered with
    /// choices made elsewhere (an agent forwarding for its watch lets the far device choose).
    public mutating func received(_ offer: Offer, decided: [Choice]? = nil) throws(ProtocolError) -> [Action] {
        guard state == .awaitingOffer else { throw fail(.badMessage, "a second offer in one session") }
        do {
            try offer.validate()
        } catch {
            throw fail(error.code, error.message)
        }
        self.offer = offer
        if let decided {
            guard decided.count == offer.items.count else {
                throw fail(.internalError, "\(decided.count) choices for \(offer.items.count) items")
            }
            for (index, choice) in decided.enumerated() {
                guard choice.item == offer.items[index].id,
                    choice.representation.map({ offer.items[index].representations.indices.contains($0) }) ?? true
                else { throw fail(.internalError, "choice \(index + 1) does not fit the offer") }
                choices.append(choice)
                if choice.representation != nil { pending.append(index) }
            }
        } else {
            negotiate(offer)
        }
        var actions: [Action] = [.sendSelect(Select(choices: choices).fitting(Limits.maxOfferPayload))]
        actions += advance()
        return actions
    }

    private mutating func negotiate(_ offer: Offer) {
        for (index, item) in offer.items.enumerated() {
            if let reason = policy.refuse?(item) {
                choices.append(
                    Choice(item: item.id, representation: nil, reason: reason, refusal: ProtocolError(.refused, reason))
                )
                continue
            }
            switch negotiator.choose(from: item.representations, senderDeclarations: item.declarations) {
            case .failure(let failure):
                choices.append(
                    Choice(
                        item: item.id, representation: nil, reason: failure.description,
                        refusal: ProtocolError(.noCommonRepresentation, failure.description)))
            case .success(let choice):
                let size = item.representations[choice.representationIndex].size
                if let size, let max = policy.maxItemSize, size > max {
                    let reason = "\(item.label) is \(size) bytes; this receiver accepts at most \(max)"
                    choices.append(
                        Choice(
                            item: item.id, representation: nil, reason: reason, refusal: ProtocolError(.refused, reason)
                        ))
                    continue
                }
                if let size, let free = policy.freeSpace, committed.addingReportingOverflow(size).partialValue > free {
                    let reason =
                        "\(item.label) needs \(size) bytes; only \(free - min(free, committed)) are free on the receiver"
                    choices.append(
                        Choice(
                            item: item.id, representation: nil, reason: reason, refusal: ProtocolError(.storage, reason)
                        ))
                    continue
                }
                committed += size ?? 0
                if let limit = negotiator.accept.entries[choice.acceptIndex].maxSize { acceptLimits[index] = limit }
                choices.append(Choice(item: item.id, representation: choice.representationIndex, reason: choice.reason))
                pending.append(index)
            }
        }
    }

    /// The driver found `verified` chunks already held for the item being prepared.
    public mutating func prepared(verified: Set<Int>) throws(ProtocolError) -> [Action] {
        guard case .preparing(let item) = state, let offer else { throw fail(.internalError, "prepared out of order") }
        let representation = offer.items[item].representations[choices[item].representation!]
        expectedChunks = representation.size.map { ChunkMath.count(size: $0, chunkSize: offer.chunkSize) }
        let valid: Set<Int> = expectedChunks.map { count in verified.filter { $0 < count } } ?? []
        held = valid
        arrived = 0
        lastIndex = -1
        receivedBytes = 0
        itemLimit = min(representation.size ?? .max, policy.maxItemSize ?? .max, acceptLimits[item] ?? .max)
        currentSized = representation.size != nil
        state = .receiving(item: item)
        return [.sendResume(Resume(item: offer.items[item].id, verified: ChunkMath.ranges(Array(valid))))]
    }

    /// A chunk header and its data length arrived for the current item.
    /// The length chunk `index` of the item being received must have, when its size is known (nil otherwise, or
    /// when the index is out of range).
    public func expectedLength(of index: Int) -> Int? {
        guard case .receiving(let item) = state, let offer, let expected = expectedChunks, index >= 0,
            index < expected, let size = offer.items[item].representations[choices[item].representation!].size
        else { return nil }
        return index == expected - 1 ? Int(size - UInt64(index) * UInt64(offer.chunkSize)) : offer.chunkSize
    }

    public mutating func receivedChunk(index: Int, length: Int) throws(ProtocolError) -> [Action] {
        guard case .receiving(let item) = state, let offer else { throw fail(.badMessage, "a chunk outside an item") }
        guard index > lastIndex else {
            throw fail(
                .badMessage,
                "chunk \(index) of \(offer.items[item].label) arrived after chunk \(lastIndex): duplicate or out of order"
            )
        }
        if let expected = expectedChunks {
            guard index < expected else {
                throw fail(
                    .badMessage, "chunk \(index) is past the end of \(offer.items[item].label) (\(expected) chunks)")
            }
            guard !held.contains(index) else {
                throw fail(
                    .badMessage, "chunk \(index) of \(offer.items[item].label) is already held and was not asked for")
            }
            let isLast = index == expected - 1
            let size = offer.items[item].representations[choices[item].representation!].size!
            let expectedLength = isLast ? Int(size - UInt64(index) * UInt64(offer.chunkSize)) : offer.chunkSize
            guard length == expectedLength else {
                throw fail(
                    .badMessage,
                    "chunk \(index) of \(offer.items[item].label) has \(length) bytes, expected \(expectedLength)")
            }
        } else {
            guard index == lastIndex + 1, length <= offer.chunkSize else {
                throw fail(.badMessage, "chunk \(index) of a stream of unknown size is out of order or oversized")
            }
        }
        receivedBytes += UInt64(length)
        guard receivedBytes <= itemLimit else {
            throw fail(
                .refused,
                "\(offer.items[item].label) exceeds \(itemLimit) bytes, the most this receiver takes; it was not kept")
        }
        if !currentSized {
            // An item that did not say its size counts against the free space as it arrives.
            streamed += UInt64(length)
            if let free = policy.freeSpace, committed + streamed > free {
                throw fail(
                    .storage,
                    "\(offer.items[item].label) outgrew the receiver's free space (\(free) bytes); it was not kept")
            }
        }
        lastIndex = index
        arrived += 1
        return [.write(index: index)]
    }

    public mutating func received(_ done: Done) throws(ProtocolError) -> [Action] {
        guard case .receiving(let item) = state, let offer else { throw fail(.badMessage, "done outside an item") }
        guard done.item == offer.items[item].id else { throw fail(.badMessage, "done for item \(done.item)") }
        if let expected = expectedChunks {
            guard held.count + arrived == expected else {
                throw fail(
                    .badMessage,
                    "done for \(offer.items[item].label) with \(expected - held.count - arrived) chunks never sent")
            }
            guard done.chunks == expected,
                done.size == offer.items[item].representations[choices[item].representation!].size
            else {
                throw fail(
                    .badMessage,
                    "done for \(offer.items[item].label) claims \(done.size) bytes in \(done.chunks) chunks; the offer said otherwise"
                )
            }
        } else {
            guard done.chunks == lastIndex + 1, done.size == receivedBytes else {
                throw fail(.badMessage, "done for \(offer.items[item].label) does not match the chunks sent")
            }
        }
        state = .verifying(item: item)
        return [.verify(item: item, done)]
    }

    /// The driver compared the digest and stored the item (or failed to).
    public mutating func verified(_ ack: Ack) throws(ProtocolError) -> [Action] {
        guard case .verifying = state else { throw fail(.internalError, "verified out of order") }
        return [.sendAck(ack)] + advance()
    }

    /// The sender said goodbye.
    public mutating func receivedBye() throws(ProtocolError) -> [Action] {
        guard state == .awaitingBye else { throw fail(.badMessage, "the sender left before every item was sent") }
        state = .finished
        return [.complete]
    }

    public mutating func failed() { state = .failed }

    private mutating func advance() -> [Action] {
        guard let offer, !pending.isEmpty else {
            state = .awaitingBye
            return []
        }
        let item = pending.removeFirst()
        state = .preparing(item: item)
        return [.prepare(item: item, representation: choices[item].representation!)]
    }

    private mutating func fail(_ code: ProtocolError.Code, _ message: String) -> ProtocolError {
        state = .failed
        return ProtocolError(code, message)
    }
}
