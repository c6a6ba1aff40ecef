import CoreTransferable
import Foundation
import ShareProtocol
import ShareTLS

/// Watch forwarding, from a watch to one of the owner's devices: the agent receives the watch's items with the
/// receiver driver and, at the same time, sends them on with the sender driver. The far device negotiates with its
/// own accept list (its choices answer the watch), every chunk is verified here and streamed on through a small
/// bounded pipe (never kept whole), and the far device's acknowledgement of each item is the watch's.
/// (Not to be confused with relays: servers that carry a TLS session between two devices.)
final class ForwardingBridge: @unchecked Sendable {  // all state guarded by `condition`
    private let condition = NSCondition()
    private var choices: [Choice]?
    private var acks: [Int: Ack] = [:]
    private var failure: Error?
    private var pipes: [Int: ChunkPipe] = [:]
    private var farEnded = false

    /// The pipe of item `index` (made on first use by either side).
    func pipe(_ index: Int) -> ChunkPipe {
        condition.withLock {
            if let pipe = pipes[index] { return pipe }
            let pipe = ChunkPipe()
            pipes[index] = pipe
            if let failure { pipe.fail(failure) }
            return pipe
        }
    }

    /// The far device answered the offer.
    func chosen(_ choices: [Choice]) {
        condition.withLock {
            self.choices = choices
            condition.broadcast()
        }
    }

    /// The far device acknowledged item `index`.
    func delivered(_ index: Int, _ ack: Ack) {
        condition.withLock {
            acks[index] = ack
            condition.broadcast()
        }
    }

    /// The far side ended, well or not; its error (if any) stops the near side.
    func farFinished(_ error: Error?) {
        condition.withLock {
            farEnded = true
            if let error, failure == nil { failure = error }
            for pipe in pipes.values { pipe.fail(failure ?? StreamEnded("the far device ended the session")) }
            condition.broadcast()
        }
    }

    /// The near side stopped: the far side's sources fail.
    func nearFailed(_ error: Error) {
        condition.withLock {
            if failure == nil { failure = error }
            for pipe in pipes.values { pipe.fail(error) }
            condition.broadcast()
        }
    }

    /// Waits for the far device's choices (or its failure).
    func awaitChoices() throws -> [Choice] {
        try condition.withLock {
            while choices == nil && failure == nil && !farEnded { condition.wait() }
            if let choices { return choices }
            throw failure ?? ProtocolError(.cancelled, "the far device ended the session before choosing")
        }
    }

    /// Waits for the far device's acknowledgement of item `index`.
    func awaitAck(_ index: Int) throws -> Ack {
        try condition.withLock {
            while acks[index] == nil && failure == nil && !farEnded { condition.wait() }
            if let ack = acks[index] { return ack }
            throw failure ?? ProtocolError(.cancelled, "the far device ended the session before acknowledging")
        }
    }
}

/// Chunks of one item on their way from the receiver driver to the sender driver: at most four at a time.
final class ChunkPipe: @unchecked Sendable {  // guarded by `condition`
    private let condition = NSCondition()
    private var queue: [[UInt8]] = []
    private var ended = false
    private var failure: Error?
    static let capacity = 4

    func push(_ bytes: UnsafeRawBufferPointer) throws {
        try condition.withLock {
            while queue.count >= Self.capacity && failure == nil { condition.wait() }
            if let failure { throw failure }
            queue.append(Array(bytes))
            condition.broadcast()
        }
    }

    func finish() {
        condition.withLock {
            ended = true
            condition.broadcast()
        }
    }

    func fail(_ error: Error) {
        condition.withLock {
            if failure == nil { failure = error }
            condition.broadcast()
        }
    }

    /// The next piece; nil at the end.
    func pull() throws -> [UInt8]? {
        try condition.withLock {
            while queue.isEmpty && !ended && failure == nil { condition.wait() }
            if !queue.isEmpty {
                condition.broadcast()
                return queue.removeFirst()
            }
            if let failure { throw failure }
            return nil
        }
    }
}

/// The far side's view of a forwarded item: the near item, naming its origin, streamed from its pipe.
final class ForwardedSource: ItemSource, SequentialSource {
    let offer: OfferItem
    private let pipe: ChunkPipe

    init(_ item: OfferItem, origin: String, pipe: ChunkPipe) {
        var forwarded = item
        forwarded.origin = origin
        // What a watch sends is made on request and cannot be resumed: no version, so no partial is kept for it.
        forwarded.version = nil
        offer = forwarded
        self.pipe = pipe
    }

    func produce(representation index: Int) throws -> ProducedChunks { .sequential(self) }

    /// Sizes are not announced: the far device counts the bytes against its limits as they arrive.
    var size: UInt64? { nil }

    func produce(_ emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        while let piece = try pipe.pull() {
            try piece.withUnsafeBytes { try emit($0) }
        }
    }

    func close() {}
}

/// The near side's sink: each verified chunk goes into the item's pipe; completing an item waits for the far
/// device's acknowledgement, which becomes the watch's.
final class ForwardingSink: ItemSink {
    let bridge: ForwardingBridge
    let target: String
    private var index: [String: Int] = [:]

    init(bridge: ForwardingBridge, target: String, offer: Offer) {
        self.bridge = bridge
        self.target = target
        for (position, item) in offer.items.enumerated() { index[item.id] = position }
    }

    /// Forwarded items are streamed on as they arrive; nothing is kept to resume.
    func held(item: OfferItem, representation: OfferedRepresentation, chunkSize: Int) -> HeldChunks { .nothing }

    func open(item: OfferItem, representation: OfferedRepresentation, chunkSize: Int, digest: DigestAlgorithm)
        throws -> IncomingPayload
    {
        guard let position = index[item.id] else { throw ProtocolError(.internalError, "unknown item \(item.id)") }
        return Forwarded(pipe: bridge.pipe(position), position: position, item: item, bridge: bridge, target: target)
    }

    final class Forwarded: IncomingPayload {
        let pipe: ChunkPipe
        let position: Int
        let item: OfferItem
        let bridge: ForwardingBridge
        let target: String
        let held: [Int: [UInt8]] = [:]

        init(pipe: ChunkPipe, position: Int, item: OfferItem, bridge: ForwardingBridge, target: String) {
            self.pipe = pipe
            self.position = position
            self.item = item
            self.bridge = bridge
            self.target = target
        }

        func write(index: Int, bytes: UnsafeRawBufferPointer, digest: [UInt8]) throws { try pipe.push(bytes) }

        func complete(done: Done) throws -> Ack {
            pipe.finish()
            let far = try bridge.awaitAck(position)
            return Ack(item: item.id, outcome: "\(far.outcome) on \(target)", savedAs: far.savedAs)
        }

        func discard() { pipe.fail(ProtocolError(.digestMismatch, "\(item.label) did not match its digest")) }
        func suspend() { pipe.fail(ProtocolError(.cancelled, "the watch's session ended")) }
    }
}
