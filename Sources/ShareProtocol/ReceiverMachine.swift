import CoreTransferable
import ShareText

/// The receiving side of a transfer session, as events in and actions out; the driver does the I/O.
///
/// It negotiates each offered item against the accept list, then announces what it already holds of the accepted
/// items with `resume`, up to `window` items ahead of the one being received (protocol 4; one at a time with a
/// version-3 sender, which expects the next `resume` only after each `ack`). Items arrive one after another in offer
/// order; every chunk is checked (index in range, in ascending order, not already held, within size and limits)
/// before the driver writes it.
public struct ReceiverMachine: Sendable {
    /// Two byte counts as a person reads them (`1.2 GiB`); exact when rounding would make them look the same.
    static func readable(_ a: UInt64, _ b: UInt64) -> (String, String) {
        let (x, y) = (Format.bytes(a), Format.bytes(b))
        return x == y && a != b ? ("\(a) bytes", "\(b) bytes") : (x, y)
    }

    public enum State: Sendable, Equatable {
        case awaitingOffer
        /// Items are being announced and received.
        case transferring
        case awaitingBye, finished, failed
    }

    public enum Action: Sendable, Equatable {
        case sendSelect(Select)
        /// Look up what is already held of this item (nothing is kept open); answer with `prepared(verified:)`.
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
        /// Bytes of the chosen representation a partial already holds on the receiver (a resume needs only the
        /// rest of the free space).
        public var held: (@Sendable (OfferItem, OfferedRepresentation) -> UInt64)?
        public init(
            maxItemSize: UInt64? = nil, freeSpace: UInt64? = nil, refuse: (@Sendable (OfferItem) -> String?)? = nil,
            held: (@Sendable (OfferItem, OfferedRepresentation) -> UInt64)? = nil
        ) {
            self.maxItemSize = maxItemSize
            self.freeSpace = freeSpace
            self.refuse = refuse
            self.held = held
        }
    }

    /// How many items a protocol-4 receiver announces ahead of the one it receives: enough that a sender never waits
    /// for an answer on a link with a long round trip, whatever the items' sizes (10,000 texts across a 40 ms round
    /// trip wait for 10 windows, not 40). An announced item costs the receiver a lookup, nothing kept open.
    public static let pipelineWindow = 1024

    /// The window for a session at `version`: items are pipelined from protocol 4 on.
    public static func window(forVersion version: Int) -> Int { version >= 4 ? pipelineWindow : 1 }

    public let negotiator: Negotiator
    public let policy: Policy
    /// Items announced (`resume` sent) and not yet acknowledged, at most.
    public let window: Int
    public private(set) var state: State = .awaitingOffer
    public private(set) var offer: Offer?
    public private(set) var choices: [Choice] = []
    /// Accepted items not announced yet, in offer order.
    private var pending: [Int] = []
    /// The item being looked up for its `resume`.
    private var preparing: Int?
    /// Announced items in order: the first is the one being received.
    private var announced: [Int] = []
    /// Per announced item: the chunks it already held.
    private var heldByItem: [Int: Set<Int>] = [:]
    /// The first announced item's bytes have all arrived and its digest is being compared.
    private var verifying = false
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
    /// Chunks of the current item whose patch did not give their digest: sent whole after the patches.
    private var redo: Set<Int> = []
    /// After the patches: the only chunks of the current item still to come (those its patches did not make).
    private var missingOnly: Set<Int>?
    /// Items announced with an index of their earlier version (`resume.basis`), and the questions the sender asked
    /// about the current one's: each kind at most once, and only about an item with a basis.
    private var withBasis: Set<Int> = []
    private var asked: Set<BasisQuestion> = []

    /// What a sender may ask about the basis of the item it streams as patches.
    public enum BasisQuestion: Sendable, Hashable {
        /// `basisQuery`: the chunks of some of the basis's groups.
        case groups
        /// `blockQuery`: the sums of some blocks of the basis.
        case blockSums
    }

    /// `window`: items announced ahead (`pipelineWindow` with a protocol-4 sender, 1 with an earlier one).
    public init(negotiator: Negotiator, policy: Policy = Policy(), window: Int = 1) {
        self.negotiator = negotiator
        self.policy = policy
        self.window = max(1, window)
    }

    /// The item whose chunks arrive now (the first announced one), if any.
    public var currentItem: Int? { state == .transferring && !verifying ? announced.first : nil }

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
        state = .transferring
        var actions: [Action] = [.sendSelect(Select(choices: choices).fitting(Limits.maxOfferPayload))]
        actions += fill()
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
                    let (sized, most) = Self.readable(size, max)
                    let reason = "\(item.label) is \(sized); this receiver accepts at most \(most)"
                    choices.append(
                        Choice(
                            item: item.id, representation: nil, reason: reason, refusal: ProtocolError(.refused, reason)
                        ))
                    continue
                }
                // What a partial already holds is on the disk already: only the rest must fit.
                let needed = size.map { size in
                    size - min(size, policy.held?(item, item.representations[choice.representationIndex]) ?? 0)
                }
                if let needed, let free = policy.freeSpace,
                    committed.addingReportingOverflow(needed).partialValue > free
                {
                    let (wanted, left) = Self.readable(needed, free - min(free, committed))
                    let reason =
                        "\(item.label) needs \(wanted); only \(left) are free on the receiver (free some space there and send again)"
                    choices.append(
                        Choice(
                            item: item.id, representation: nil, reason: reason, refusal: ProtocolError(.storage, reason)
                        ))
                    continue
                }
                committed += needed ?? 0
                if let limit = negotiator.accept.entries[choice.acceptIndex].maxSize { acceptLimits[index] = limit }
                choices.append(Choice(item: item.id, representation: choice.representationIndex, reason: choice.reason))
                pending.append(index)
            }
        }
    }

    /// The driver found `verified` chunks already held for the item being prepared: it is announced, with the
    /// item's digest when it is not the session's.
    public mutating func prepared(verified: Set<Int>, digest: DigestAlgorithm? = nil, basis: Bool = false)
        throws(ProtocolError) -> [Action]
    {
        guard state == .transferring, let item = preparing, let offer else {
            throw fail(.internalError, "prepared out of order")
        }
        preparing = nil
        let representation = offer.items[item].representations[choices[item].representation!]
        let count = representation.size.map { ChunkMath.count(size: $0, chunkSize: offer.chunkSize) }
        let valid: Set<Int> = count.map { count in verified.filter { $0 < count } } ?? []
        heldByItem[item] = valid
        if basis { withBasis.insert(item) }
        announced.append(item)
        if announced.count == 1 { begin(item) }
        return [
            .sendResume(
                Resume(
                    item: offer.items[item].id, verified: ChunkMath.ranges(Array(valid)), digest: digest,
                    basis: basis ? true : nil))
        ]
            + fill()
    }

    /// Sets up the checks for the item whose chunks come next.
    private mutating func begin(_ item: Int) {
        guard let offer else { return }
        let representation = offer.items[item].representations[choices[item].representation!]
        expectedChunks = representation.size.map { ChunkMath.count(size: $0, chunkSize: offer.chunkSize) }
        held = heldByItem[item] ?? []
        arrived = 0
        lastIndex = -1
        receivedBytes = 0
        itemLimit = min(representation.size ?? .max, policy.maxItemSize ?? .max, acceptLimits[item] ?? .max)
        currentSized = representation.size != nil
        redo = []
        missingOnly = nil
        asked = []
    }

    /// The sender asks `question` about the basis of the item `id` (the one whose chunks come now): the item's
    /// position in the offer. Asked about another item, one announced without a basis, or twice: refused.
    public mutating func asked(_ question: BasisQuestion, about id: String) throws(ProtocolError) -> Int {
        guard let item = currentItem, let offer, offer.items[item].id == id, withBasis.contains(item),
            expectedChunks != nil
        else { throw fail(.badMessage, "a question about the basis of \(id), which is not the item being sent") }
        guard asked.insert(question).inserted else {
            throw fail(.badMessage, "a second question of one kind about the basis of \(id)")
        }
        return item
    }

    /// The length chunk `index` of the item being received must have, when its size is known (nil otherwise, or
    /// when the index is out of range).
    public func expectedLength(of index: Int) -> Int? {
        guard let item = currentItem, let offer, let expected = expectedChunks, index >= 0, index < expected,
            let size = offer.items[item].representations[choices[item].representation!].size
        else { return nil }
        return index == expected - 1 ? Int(size - UInt64(index) * UInt64(offer.chunkSize)) : offer.chunkSize
    }

    /// A chunk header and its data length arrived for the current item.
    public mutating func receivedChunk(index: Int, length: Int) throws(ProtocolError) -> [Action] {
        guard let item = currentItem, let offer else { throw fail(.badMessage, "a chunk outside an item") }
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
            guard missingOnly?.contains(index) ?? !held.contains(index) else {
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
                "\(offer.items[item].label) exceeds \(Format.bytes(itemLimit)), the most this receiver takes; it was not kept"
            )
        }
        if !currentSized {
            // An item that did not say its size counts against the free space as it arrives.
            streamed += UInt64(length)
            if let free = policy.freeSpace, committed + streamed > free {
                throw fail(
                    .storage,
                    "\(offer.items[item].label) outgrew the receiver's free space (\(Format.bytes(free))); it was not kept"
                )
            }
        }
        lastIndex = index
        arrived += 1
        return [.write(index: index)]
    }

    /// A chunk of the current item arrived as a patch against the basis: checked as any chunk; when the chunk it made
    /// did not match its digest (the basis changed), nothing is written and the chunk is asked for whole at the end of
    /// the patches.
    public mutating func receivedPatch(index: Int, length: Int, matched: Bool) throws(ProtocolError) -> [Action] {
        guard expectedChunks != nil else { throw fail(.badMessage, "a patch for an item of unknown size") }
        let actions = try receivedChunk(index: index, length: length)
        guard !matched else { return actions }
        arrived -= 1
        receivedBytes -= UInt64(length)
        redo.insert(index)
        return []
    }

    /// The sender ended the current item's patches: the chunks to send whole. When there are any, they arrive next,
    /// in order, as chunks of the same item, before its `done`.
    public mutating func patchesEnded(item id: String) throws(ProtocolError) -> [ChunkRange] {
        guard let item = currentItem, let offer, offer.items[item].id == id, expectedChunks != nil else {
            throw fail(.badMessage, "the end of patches outside their item")
        }
        defer { redo = [] }
        guard !redo.isEmpty else { return [] }
        // Everything else arrived: only the chunks to redo are missing (no set of every chunk is made).
        missingOnly = redo
        arrived = 0
        lastIndex = -1
        return ChunkMath.ranges(Array(redo))
    }

    public mutating func received(_ done: Done) throws(ProtocolError) -> [Action] {
        guard let item = currentItem, let offer else { throw fail(.badMessage, "done outside an item") }
        guard done.item == offer.items[item].id else { throw fail(.badMessage, "done for item \(done.item)") }
        if let name = done.fileName,
            name.utf8.count > Done.maxFileName || name.contains("/" as Character) || name.utf8.contains(0)
                || name == "."
                || name == ".."
        {
            throw fail(.badMessage, "done for \(offer.items[item].label) names a file that is not a plain name")
        }
        if let expected = expectedChunks {
            let missing = missingOnly.map { $0.count - arrived } ?? expected - held.count - arrived
            guard missing == 0 else {
                throw fail(.badMessage, "done for \(offer.items[item].label) with \(missing) chunks never sent")
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
        verifying = true
        return [.verify(item: item, done)]
    }

    /// The driver compared the digest and stored the item (or failed to).
    public mutating func verified(_ ack: Ack) throws(ProtocolError) -> [Action] {
        guard state == .transferring, verifying, let item = announced.first else {
            throw fail(.internalError, "verified out of order")
        }
        verifying = false
        announced.removeFirst()
        heldByItem[item] = nil
        withBasis.remove(item)
        if let next = announced.first { begin(next) }
        return [.sendAck(ack)] + fill()
    }

    /// The sender said goodbye.
    public mutating func receivedBye() throws(ProtocolError) -> [Action] {
        guard state == .awaitingBye else { throw fail(.badMessage, "the sender left before every item was sent") }
        state = .finished
        return [.complete]
    }

    public mutating func failed() { state = .failed }

    /// Announces the next item while the window has room; with nothing left to announce or receive, waits for bye.
    private mutating func fill() -> [Action] {
        guard state == .transferring, preparing == nil else { return [] }
        if !pending.isEmpty, announced.count < window {
            let item = pending.removeFirst()
            preparing = item
            return [.prepare(item: item, representation: choices[item].representation!)]
        }
        if pending.isEmpty, announced.isEmpty { state = .awaitingBye }
        return []
    }

    private mutating func fail(_ code: ProtocolError.Code, _ message: String) -> ProtocolError {
        state = .failed
        return ProtocolError(code, message)
    }
}
