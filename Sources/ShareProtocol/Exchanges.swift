import FoundationEssentials

/// The frame body of `trustNotices`: signed notices (the trust module's type) for the receiver to judge one by one.
public struct TrustNoticesMessage<Notice: Codable>: Codable {
    public var notices: [Notice]
    public init(notices: [Notice]) { self.notices = notices }
}

/// The frame body of `trustNoticesTaken`: how many were new to the receiver.
public struct TrustNoticesTaken: Codable, Sendable, Equatable {
    public var taken: Int
    public init(taken: Int) { self.taken = taken }
}

/// Every short exchange of share's protocol besides the transfer (whose order is `SenderMachine` and
/// `ReceiverMachine`): who speaks first, what answers what, and what an unexpected frame means. The rest of the
/// project calls these and never writes the order of messages itself; a new message or a new protocol version is an
/// edit here.
public enum Exchange {
    // MARK: Hello

    /// The connecting side: its hello, then the peer's (checked).
    public static func openHello(_ channel: FrameChannel, _ hello: Hello) throws -> Hello {
        try channel.send(.hello, hello)
        let peer = try channel.receive(.hello, as: Hello.self)
        try peer.validate()
        return peer
    }

    /// The accepting side: the peer's hello (checked), which `answerHello` answers.
    public static func receiveHello(_ channel: FrameChannel) throws -> Hello {
        let peer = try channel.receive(.hello, as: Hello.self)
        try peer.validate()
        return peer
    }

    /// The accepting side's own hello, after the peer's.
    public static func answerHello(_ channel: FrameChannel, _ hello: Hello) throws {
        try channel.send(.hello, hello)
    }

    // MARK: Ping

    /// One ping and its pong (which must carry the same nonce); returns the round trip in seconds.
    @discardableResult
    public static func ping(_ channel: FrameChannel) throws -> Double {
        let nonce = UInt64.random(in: 0...UInt64.max)
        let start = ContinuousClock.now
        try channel.send(.ping, Ping(nonce: nonce))
        let pong = try channel.receive(.pong, as: Ping.self)
        guard pong.nonce == nonce else { throw ProtocolError(.badMessage, "the peer answered another ping") }
        return (ContinuousClock.now - start).seconds
    }

    /// The end of a ping session.
    public static func bye(_ channel: FrameChannel) throws {
        try channel.send(.bye, Bye())
    }

    /// Answers pings until the peer says bye (nil) or sends anything else, which is returned unhandled; a peer's
    /// error is thrown.
    public static func answerPings(_ channel: FrameChannel) throws -> Frame? {
        while true {
            let frame = try channel.receive()
            switch frame.type {
            case .ping: try answerPing(channel, frame)
            case .bye: return nil
            case .error: throw MessageCoding.peerError(from: frame)
            default: return frame
            }
        }
    }

    /// Answers one `ping` frame with its pong.
    public static func answerPing(_ channel: FrameChannel, _ frame: Frame) throws {
        try channel.send(.pong, try MessageCoding.decode(Ping.self, from: frame))
    }

    // MARK: Clipboard

    /// What the peer has copied, without producing it.
    public static func peekClipboard(_ channel: FrameChannel) throws -> ClipboardInfo {
        try channel.send(.clipboardRequest, ClipboardRequest(peek: true))
        let frame = try channel.receive()
        switch frame.type {
        case .clipboardInfo: return try MessageCoding.decode(ClipboardInfo.self, from: frame)
        case .error: throw MessageCoding.peerError(from: frame)
        default: throw ProtocolError(.badMessage, "the peer answered a clipboard request with \(frame.type)")
        }
    }

    /// Asks for the peer's copied item: it answers as a sender does (an offer), received as any transfer.
    public static func requestClipboard(_ channel: FrameChannel) throws {
        try channel.send(.clipboardRequest, ClipboardRequest())
    }

    /// The request a session opened with.
    public static func clipboardRequest(in first: Frame) throws -> ClipboardRequest {
        try MessageCoding.decode(ClipboardRequest.self, from: first)
    }

    /// The answer to a peek.
    public static func answerPeek(_ channel: FrameChannel, _ info: ClipboardInfo) throws {
        try channel.send(.clipboardInfo, info)
    }

    // MARK: Trust notices

    /// Delivers `notices`; returns how many were new to the peer.
    @discardableResult
    public static func deliverNotices<Notice: Codable>(_ channel: FrameChannel, _ notices: [Notice]) throws -> Int {
        try channel.send(.trustNotices, TrustNoticesMessage(notices: notices))
        return try channel.receive(.trustNoticesTaken, as: TrustNoticesTaken.self).taken
    }

    /// The notices a session opened with.
    public static func notices<Notice: Codable>(in first: Frame, as: Notice.Type) throws -> [Notice] {
        try MessageCoding.decode(TrustNoticesMessage<Notice>.self, from: first).notices
    }

    /// Says how many of the delivered notices were new.
    public static func answerNotices(_ channel: FrameChannel, taken: Int) throws {
        try channel.send(.trustNoticesTaken, TrustNoticesTaken(taken: taken))
    }

    // MARK: Pairing

    /// Commit, then reveal: each side's nonce is revealed only once the other side's commitment has arrived (either
    /// side may speak first). Returns the code both users compare.
    public static func pairCommitments(
        _ channel: FrameChannel, machine: inout PairingMachine, hasher: ChunkHasher
    ) throws -> String {
        try channel.send(.pairCommit, machine.commitment(using: hasher))
        var frame = try channel.receive()
        if frame.type == .error { throw MessageCoding.peerError(from: frame) }
        switch frame.type {
        case .pairCommit:
            let reveal = try machine.received(MessageCoding.decode(PairCommit.self, from: frame))
            try channel.send(.pairReveal, reveal)
        case .pairReveal:
            _ = try machine.received(MessageCoding.decode(PairReveal.self, from: frame), using: hasher)
        default:
            throw ProtocolError(.badMessage, "expected the other device's commitment, it sent \(frame.type)")
        }
        frame = try channel.receive()
        if frame.type == .error { throw MessageCoding.peerError(from: frame) }
        guard frame.type == .pairReveal else {
            throw ProtocolError(.badMessage, "expected the other device's nonce, it sent \(frame.type)")
        }
        return try machine.received(MessageCoding.decode(PairReveal.self, from: frame), using: hasher)
    }

    /// This side's answer to "the same code?".
    public static func sendPairDecision(_ channel: FrameChannel, accept: Bool) throws {
        try channel.send(.pairDecision, PairDecision(accept: accept))
    }

    /// The other side's answer.
    public static func receivePairDecision(_ channel: FrameChannel) throws -> Bool {
        try channel.receive(.pairDecision, as: PairDecision.self).accept
    }

    // MARK: Offers held for an answer (ask first)

    /// The offer `frame` carries, decoded and checked; nil when it is not a well-formed offer (the driver then
    /// reports it as any other).
    public static func offer(in frame: Frame) -> Offer? {
        guard frame.type == .offer, let offer = try? MessageCoding.decode(Offer.self, from: frame),
            (try? offer.validate()) != nil
        else { return nil }
        return offer
    }

    /// The offer a session opened with, decoded and checked; a malformed one is an error.
    public static func requireOffer(in frame: Frame) throws -> Offer {
        let offer = try MessageCoding.decode(Offer.self, from: frame)
        try offer.validate()
        return offer
    }

    /// Whether a peer speaking `agreedVersion` understands `held` (protocol 3 and later); an older one is refused
    /// instead.
    public static func canHold(agreedVersion: Int) -> Bool { agreedVersion >= 3 }

    /// Tells the sender its offer waits for the user's answer (the session then ends).
    public static func hold(_ channel: FrameChannel, _ held: OfferHeld) throws {
        try channel.send(.held, held)
    }

    // MARK: A watch's link

    /// What an agent says on a watch's link.
    public enum LinkEvent {
        /// A keepalive ping, answered.
        case keepalive
        /// An offer of items for the watch.
        case offer(Frame)
        /// The end of one exchange; the link stays.
        case bye

        /// Whether it shows the link is up (the agent speaks first, with a ping or an offer, once it took the watch:
        /// a refusal would have come instead).
        public var saysAttached: Bool {
            if case .bye = self { return false }
            return true
        }
    }

    /// The next thing the agent says on a watch's link; a peer's error is thrown, anything else is a protocol error.
    public static func nextOnWatchLink(_ channel: FrameChannel) throws -> LinkEvent {
        let frame = try channel.receive()
        switch frame.type {
        case .ping:
            try answerPing(channel, frame)
            return .keepalive
        case .offer: return .offer(frame)
        case .bye: return .bye
        case .error: throw MessageCoding.peerError(from: frame)
        default: throw ProtocolError(.badMessage, "the agent sent \(frame.type) to a watch waiting for items")
        }
    }

    /// The frame a receiving session opens with (`first`, when it was read already) and the offer it carries when
    /// it is a well-formed one.
    public static func opening(_ channel: FrameChannel, first: Frame?) throws -> (frame: Frame, offer: Offer?) {
        let frame = try first ?? channel.receive()
        return (frame, offer(in: frame))
    }
}
