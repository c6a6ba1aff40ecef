/// The sending side of a transfer session, as events in and actions out; the driver does the I/O.
///
/// Order: our hello → their hello (with the accept list) → `offer` → `select` → for each accepted item:
/// `resume` → chunks → `done` → `ack` → … → `bye`.
public struct SenderMachine: Sendable {
    public enum State: Sendable, Equatable {
        case awaitingPeer, awaitingSelect, awaitingResume(item: Int), streaming(item: Int), awaitingAck(item: Int),
            finished, failed
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
    private var pending: [Int] = []
    private var streamingItem: Int?

    public init(offer: Offer) {
        self.offer = offer
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
                pending.append(index)
            } else {
                actions.append(.refused(item: index, choice))
            }
        }
        choices = select.choices
        actions += advance()
        return actions
    }

    public mutating func received(_ resume: Resume) throws(ProtocolError) -> [Action] {
        guard case .awaitingResume(let item) = state else { throw unexpected("resume") }
        guard resume.item == offer.items[item].id else {
            throw fail(.badMessage, "resume for item \(resume.item), expected \(offer.items[item].id)")
        }
        let chosen = choices[item].representation!
        let size = offer.items[item].representations[chosen].size
        // An item of unknown size was never held in part: it is always sent whole.
        let limit = size.map { ChunkMath.count(size: $0, chunkSize: offer.chunkSize) } ?? 0
        let verified: Set<Int>
        do {
            verified = try ChunkMath.indices(resume.verified, limit: limit)
        } catch {
            throw fail(error.code, error.message)
        }
        state = .streaming(item: item)
        return [.stream(item: item, representation: chosen, verified: verified)]
    }

    /// The driver has streamed every missing chunk of the current item.
    public mutating func finishedStreaming(_ done: Done) throws(ProtocolError) -> [Action] {
        guard case .streaming(let item) = state, done.item == offer.items[item].id else { throw unexpected("done") }
        state = .awaitingAck(item: item)
        return [.sendDone(done)]
    }

    public mutating func received(_ ack: Ack) throws(ProtocolError) -> [Action] {
        guard case .awaitingAck(let item) = state else { throw unexpected("ack") }
        guard ack.item == offer.items[item].id else {
            throw fail(.badMessage, "ack for item \(ack.item), expected \(offer.items[item].id)")
        }
        return [.delivered(item: item, ack)] + advance()
    }

    /// The peer reported an error: the session is over.
    public mutating func received(_ error: ProtocolError) -> ProtocolError {
        state = .failed
        return error
    }

    private mutating func advance() -> [Action] {
        if pending.isEmpty {
            state = .finished
            return [.sendBye]
        }
        state = .awaitingResume(item: pending.removeFirst())
        return []
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
