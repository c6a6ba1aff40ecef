/// The sending side of a transfer session, as events in and actions out; the driver does the I/O.
///
/// Order: our hello → their hello (with the accept list) → `offer` → `select` → then, for the accepted items in offer
/// order: `resume` → chunks → `done`, and `ack` → … → `bye` once every accepted item is acknowledged. Items are
/// pipelined: an item is streamed as soon as its `resume` has arrived, without waiting for the `ack` of the one
/// before (a protocol-4 receiver announces many items ahead; a version-3 receiver sends each `resume` after the
/// previous `ack`, and the same machine simply waits for it). `resume` and `ack` may arrive while an item streams.
public struct SenderMachine: Sendable {
    public enum State: Sendable, Equatable {
        case awaitingPeer, awaitingSelect
        /// Accepted items are being streamed and acknowledged.
        case transferring
        case finished, failed
    }

    public enum Action: Sendable, Equatable {
        case sendOffer(Offer)
        /// Produce the chosen representation and stream the chunks not in `verified`.
        case stream(item: Int, representation: Int, verified: Set<Int>)
        case sendDone(Done)
        /// The receiver refused or had nothing in common for this item.
        case refused(item: Int, Choice)
        /// The receiver verified and stored the item.
        case delivered(item: Int, Ack)
        case sendBye
    }

    public let offer: Offer
    public private(set) var state: State = .awaitingPeer
    public private(set) var choices: [Choice] = []
    /// The accepted items, in offer order.
    private var accepted: [Int] = []
    /// What each accepted item's `resume` said is held, until the item is streamed.
    private var resumes: [Int: Set<Int>] = [:]
    /// Items whose `resume` named a digest other than the session's (a partial recorded with it).
    public private(set) var itemDigests: [Int: DigestAlgorithm] = [:]
    /// Positions in `accepted`: of the next `resume` expected, the next item to stream, and the next `ack` expected.
    private var nextResume = 0
    private var nextStream = 0
    private var nextAck = 0
    /// The item being streamed now.
    public private(set) var streaming: Int?

    /// Whether the next item waits for the previous one's `ack` (an agent forwarding a watch's items: each one's
    /// bytes come only after the far device acknowledged the one before).
    public let oneAtATime: Bool

    public init(offer: Offer, oneAtATime: Bool = false) {
        self.offer = offer
        self.oneAtATime = oneAtATime
    }

    /// The receiver's hello has arrived: offer the items.
    public mutating func peerReady() -> [Action] {
        guard state == .awaitingPeer else { return [] }
        state = .awaitingSelect
        return [.sendOffer(offer)]
    }

    public mutating func received(_ select: Select) throws(ProtocolError) -> [Action] {
        guard state == .awaitingSelect else { throw unexpected("select") }
        guard select.choices.count == offer.items.count else {
            throw fail(.badMessage, "the receiver answered \(select.choices.count) items of \(offer.items.count)")
        }
        var actions: [Action] = []
        for (index, choice) in select.choices.enumerated() {
            guard choice.item == offer.items[index].id else {
                throw fail(.badMessage, "the receiver's choice \(index + 1) names item \(choice.item)")
            }
            if let representation = choice.representation {
                guard offer.items[index].representations.indices.contains(representation) else {
                    throw fail(
                        .badMessage,
                        "the receiver chose representation \(representation) of item \(choice.item), which does not exist"
                    )
                }
                accepted.append(index)
            } else {
                actions.append(.refused(item: index, choice))
            }
        }
        choices = select.choices
        state = .transferring
        if accepted.isEmpty {
            state = .finished
            actions.append(.sendBye)
        }
        return actions
    }

    public mutating func received(_ resume: Resume) throws(ProtocolError) -> [Action] {
        guard state == .transferring, nextResume < accepted.count else { throw unexpected("resume") }
        let item = accepted[nextResume]
        guard resume.item == offer.items[item].id else {
            throw fail(.badMessage, "resume for item \(resume.item), expected \(offer.items[item].id)")
        }
        let chosen = choices[item].representation!
        let size = offer.items[item].representations[chosen].size
        // An item of unknown size was never held in part: it is always sent whole.
        let limit = size.map { ChunkMath.count(size: $0, chunkSize: offer.chunkSize) } ?? 0
        do {
            resumes[item] = try ChunkMath.indices(resume.verified, limit: limit)
        } catch {
            throw fail(error.code, error.message)
        }
        if let digest = resume.digest { itemDigests[item] = digest }
        nextResume += 1
        return startNext()
    }

    /// The driver has streamed every missing chunk of the current item.
    public mutating func finishedStreaming(_ done: Done) throws(ProtocolError) -> [Action] {
        guard let item = streaming, done.item == offer.items[item].id else { throw unexpected("done") }
        streaming = nil
        nextStream += 1
        return [.sendDone(done)] + startNext()
    }

    public mutating func received(_ ack: Ack) throws(ProtocolError) -> [Action] {
        // An item is acknowledged only after its `done` was sent, and in order.
        guard state == .transferring, nextAck < nextStream else { throw unexpected("ack") }
        let item = accepted[nextAck]
        guard ack.item == offer.items[item].id else {
            throw fail(.badMessage, "ack for item \(ack.item), expected \(offer.items[item].id)")
        }
        nextAck += 1
        var actions: [Action] = [.delivered(item: item, ack)]
        if nextAck == accepted.count {
            state = .finished
            actions.append(.sendBye)
        } else if oneAtATime {
            actions += startNext()
        }
        return actions
    }

    /// The peer reported an error: the session is over.
    public mutating func received(_ error: ProtocolError) -> ProtocolError {
        state = .failed
        return error
    }

    /// Streams the next item when nothing streams and its `resume` is in.
    private mutating func startNext() -> [Action] {
        guard streaming == nil, nextStream < nextResume, !oneAtATime || nextAck == nextStream else { return [] }
        let item = accepted[nextStream]
        streaming = item
        let verified = resumes.removeValue(forKey: item) ?? []
        return [.stream(item: item, representation: choices[item].representation!, verified: verified)]
    }

    private mutating func unexpected(_ what: String) -> ProtocolError {
        fail(.badMessage, "the receiver sent \(what) out of order (state \(state))")
    }

    private mutating func fail(_ code: ProtocolError.Code, _ message: String) -> ProtocolError {
        state = .failed
        return ProtocolError(code, message)
    }
}

extension SenderMachine {
    /// A frame from the receiver, decoded and fed to the machine: `select`, `resume` or `ack`; an `error` frame is
    /// thrown as the receiver's error; anything else is out of place.
    public mutating func received(frame: Frame) throws(ProtocolError) -> [Action] {
        switch frame.type {
        case .select: return try received(MessageCoding.decode(Select.self, from: frame))
        case .resume: return try received(MessageCoding.decode(Resume.self, from: frame))
        case .ack: return try received(MessageCoding.decode(Ack.self, from: frame))
        case .error: throw received(MessageCoding.peerError(from: frame))
        default: throw ProtocolError(.badMessage, "the receiver sent \(frame.type) out of place")
        }
    }
}
