import ShareNet
import Synchronization
import CoreTransferable
import FoundationEssentials
import ShareThreads
import ShareArchive
import ShareDisk
import ShareProtocol
import ShareTLS
import ShareTrust
import ShareReach
import UniformTypeIdentifiers

/// What happened to each item of a send.
package struct SendReport: Sendable {
    package var delivered: [(label: String, ack: Ack)] = []
    package var refused: [(label: String, reason: String)] = []
    /// Chunk bytes sent in this session (resent bytes included).
    package var bytesSent: UInt64 = 0
    /// Bytes that went over the connection for those chunks (less than `bytesSent` when chunks were compressed).
    package var wireBytes: UInt64 = 0
    /// Bytes the receiver already held when each item started.
    package var bytesSkipped: UInt64 = 0
    /// Bytes the receiver made from the earlier version it held (delta transfer): counted in `bytesSent`, though
    /// only their description crossed.
    package var bytesFromBasis: UInt64 = 0
    /// Bytes that crossed the connection both ways for the items (framing included).
    package var linkBytes: UInt64 = 0
    package var seconds: Double = 0
    /// How the session went: `direct`, or `via relay HOST`.
    package var route: SessionRoute = .direct
    /// Nothing sent.
    package init() {}

    init(_ summary: TransferSummary, seconds: Double) {
        delivered = summary.delivered
        refused = summary.refused
        bytesSent = summary.bytes
        wireBytes = summary.wireBytes
        bytesSkipped = summary.held
        bytesFromBasis = summary.patchedBytes
        self.seconds = seconds
    }
}

package struct SendOptions: Sendable {
    /// Bytes per chunk (1 MiB: see docs/PROTOCOL.md for the measurements behind it).
    package var chunkSize = 1 << 20
    package var timeouts = SessionTimeouts()
    /// Compress chunks with zstd when the receiver decodes it and the content shrinks (see `AdaptiveCompressor`).
    package var compression = true
    /// Send only what changed when the receiver holds an earlier version of an item (false: every item whole, and
    /// the hello does not offer delta transfer).
    package var delta = true
    /// The items are for this device, to which the receiving agent forwards them (its watch).
    package var forwardTo: String?
    /// Lets another thread stop the send (`share cancel`).
    package var cancellation: SendCancellation?
    /// How long to keep offering again while the receiver's user has not answered (held offers); 0: report the
    /// hold at once (the agent's outbox retries on its own schedule).
    package var waitForAnswer: Double = 0
    /// Discovery servers and relays for reaching the device beyond the LAN (none: the LAN only).
    package var reach = ReachSettings()
    package init() {}
}

/// Stops a send from another thread: the connection is shut down, the blocked read or write returns, and the send
/// ends with "cancelled". The receiver keeps what it verified, as after any cut.
package final class SendCancellation: Sendable {
    private let state = Mutex<(cancelled: Bool, connection: PeerConnection?, peer: DeviceID?)>((false, nil, nil))

    package init() {}

    package var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// The device the send's connection reached, while it is open.
    package var peer: DeviceID? { state.withLock { $0.peer } }

    package func cancel() {
        let open = state.withLock {
            $0.cancelled = true
            return $0.connection
        }
        open?.interrupt()
    }

    /// The send's connection, once open, to `peer`: interrupted at once if the send was already cancelled.
    func attach(_ connection: PeerConnection, peer: DeviceID) {
        let interruptNow = state.withLock {
            $0.connection = connection
            $0.peer = peer
            return $0.cancelled
        }
        if interruptNow { connection.interrupt() }
    }

    func detach() {
        state.withLock {
            $0.connection = nil
            $0.peer = nil
        }
    }
}

/// A send: connects, hands the items to the sender driver, and reports. The items are built for the peer's
/// relation once the peer is known (visibility decides what may be offered to it).
package final class SendSession: Sendable {
    let device: LocalDevice
    let progress: ProgressReporter
    let options: SendOptions

    package init(device: LocalDevice, progress: ProgressReporter, options: SendOptions = SendOptions()) {
        self.device = device
        self.progress = progress
        self.options = options
    }

    /// Connects to `target` and sends the items `makeItems` builds for the peer's relation. An offer the receiver
    /// holds for its user's answer is offered again every few seconds, for at most `options.waitForAnswer`.
    package func run(to target: PeerTarget, trust: TrustStore, makeItems: (PeerRelation) throws -> [OutgoingItem])
        throws
        -> SendReport
    {
        let deadline = Date().addingTimeInterval(options.waitForAnswer)
        var told = false
        while true {
            do {
                return try attempt(to: target, trust: trust, makeItems: makeItems)
            } catch let held as OfferHeld {
                let name = target.expected?.name ?? target.place
                guard options.waitForAnswer > 0 else {
                    // The agent's outbox: the job waits and offers again when the receiver asked (its person's
                    // answer is learned then, and the receiver sees the offer is still wanted).
                    throw ShareFailure(.unavailable, held.message).retrying(after: held.retryAfter)
                }
                guard Date() < deadline, options.cancellation?.isCancelled != true else {
                    throw ShareFailure(
                        .refused, "\(name) did not answer within \(Int(options.waitForAnswer)) s; nothing was sent")
                }
                if !told {
                    progress.note(
                        "\(name) asks before accepting: \(held.message)", event: "waiting",
                        fields: ["id": held.id, "to": name])
                    told = true
                }
                Threads.sleep(seconds: min(max(held.retryAfter, 1), 30, max(0, deadline.timeIntervalSinceNow)))
            }
        }
    }

    private func attempt(
        to target: PeerTarget, trust: TrustStore, makeItems: (PeerRelation) throws -> [OutgoingItem]
    ) throws -> SendReport {
        let session = try Reach.connect(
            from: device, to: target, trust: trust,
            hello: Hello(
                name: device.name, role: .cli, forwardTo: options.forwardTo,
                features: options.delta ? [Delta.feature] : nil), timeouts: options.timeouts,
            settings: options.reach)
        options.cancellation?.attach(session.connection, peer: session.peerID)
        defer {
            options.cancellation?.detach()
            session.connection.close()
        }
        let peerName = trust.device(session.peerID)?.name ?? session.peerHello.name
        do {
            let visibility = AccessPolicy.visibility(for: trust.device(session.peerID))
            return try exchange(session, items: try makeItems(visibility), peerName: peerName)
        } catch let error as ShareFailure {
            throw error
        } catch let held as OfferHeld {
            session.connection.closeLingering()
            throw held
        } catch let error as ProtocolError where error.code == .sourceChanged {
            session.connection.closeLingering()
            throw ShareFailure(.interrupted, error.message)
        } catch {
            session.connection.closeLingering()
            if options.cancellation?.isCancelled == true {
                throw ShareFailure(.interrupted, "the send to \(peerName) was cancelled")
            }
            throw SessionErrors.describe(
                error, peer: "\(peerName) at \(session.connection.remoteAddress)", localID: device.id)
        }
    }

    /// Sends over a session the peer opened (an agent answering a paste, a watch's link): the same exchange.
    package func serve(_ session: Session, peerName: String, items: [OutgoingItem]) throws -> SendReport {
        try exchange(session, items: items, peerName: peerName)
    }

    private func exchange(_ session: Session, items: [OutgoingItem], peerName: String) throws -> SendReport {
        guard session.peerHello.accept != nil else {
            throw ProtocolError(.refused, "\(peerName) is not receiving items (no accept list in its hello)")
        }
        let start = ContinuousClock.now
        let channel = session.connection.channel
        let before = channel.bytesIn + channel.bytesOut
        let decodesZstd = options.compression && (session.peerHello.compression ?? []).contains("zstd")
        let driver = SenderDriver(
            channel: session.connection.channel, chunkSize: options.chunkSize, hasher: session.chunkHasher(),
            codec: decodesZstd ? ZstdChunkCodec() : nil, events: progress.senderEvents(peer: peerName))
        driver.delta = options.delta
        let summary = try driver.run(items.map(OutgoingItemSource.init))
        var report = SendReport(summary, seconds: (ContinuousClock.now - start).seconds)
        report.route = session.route
        report.linkBytes = channel.bytesIn + channel.bytesOut - before
        return report
    }
}

package struct ReceiveOptions: Sendable {
    /// Where items are saved.
    package var directory: URL
    /// What this receiver accepts, in order.
    package var accept: AcceptList
    /// Largest item accepted.
    package var maxSize: UInt64?
    /// Text and URLs up to this size are printed rather than saved.
    package var printLimit = 1 << 20
    /// Print received text exactly as it came (`share paste`), without the newline that separates the texts of a
    /// receive.
    package var printExactly = false
    /// Partials not touched for this long are removed when a session starts.
    package var partialMaxAge: TimeInterval = 24 * 3600
    /// Flush each completed item to disk before it is moved into place (survives a power loss right after).
    package var durable = false
    /// Profiles received in their rich form are imported here (the same id updates, never duplicates).
    package var catalogFile: URL?
    /// Where imported profiles' portraits and videos go (beside the catalog when nil).
    package var mediaDirectory: URL?
    /// When set, received text and URLs are appended here (one JSON object per line) rather than printed: the
    /// agent's history, listed by `share inbox`.
    package var history: TextHistory?
    /// Set when an agent keeps items for another device (its watch): every item is kept as it arrived (nothing
    /// printed, imported or added to the history) and acknowledged as kept for it.
    package var keptFor: String?
    /// Set when a program receives through the library (`ShareClient.receive`): every item is kept in `directory`
    /// as it arrived (nothing printed, imported or added to the history), acknowledged as `received`, and handed
    /// to this function once it is in place. Called on the session's thread.
    package var handOver: (@Sendable (ReceivedItem) -> Void)?
    /// Mode of the target folder when it has to be created.
    package var folderMode: mode_t = 0o755
    /// Where the files delivered are remembered (which sender's item became which file, and its index), so that a
    /// later version of one arrives as a delta against it; nil: every item arrives whole.
    package var versions: Versions?
    /// A program's own earlier version of an offered file (its name, type, size and sender given), to receive it as
    /// a delta against; nil: the versions delivered before are used.
    package var earlierVersion: (@Sendable (_ name: String, _ type: String, _ size: UInt64, _ from: String) -> URL?)?
    /// Decides, before anything is chosen, whether an offer goes on, is declined, or waits for the user's answer
    /// (held: the sender is told so and offers again later). Nil: every offer goes on.
    package var gate: (@Sendable (_ offer: Offer, _ peerName: String) throws -> PendingOffers.Decision)?

    package init(directory: URL, accept: AcceptList, maxSize: UInt64? = nil) {
        self.directory = directory
        self.accept = accept
        self.maxSize = maxSize
    }

    /// Accept anything, the sender's first representation first.
    package static let everything = AcceptList([AcceptedType(.item)])
}

/// An item kept for a program that receives through the library: where it is, what it arrived as, who sent it.
package struct ReceivedItem: Sendable, Codable {
    /// The file (or, for a folder, the folder) in the receive directory.
    package var path: String
    /// The representation the receiver chose.
    package var contentType: String
    /// What the sender calls it.
    package var label: String
    /// What the sender's program showed as the item's preview.
    package var preview: ItemPreview?
    /// The name this device gave the sender when it trusted it (or the name it gave itself).
    package var from: String
    /// The sender's device ID.
    package var fromDevice: String
    /// For an item passed on by an agent: who it really comes from.
    package var origin: String?
    /// Its size in bytes as the sender declared it (for a folder, the archive's).
    package var size: UInt64
}

/// What happened to each offered item.
package struct ReceiveReport: Sendable {
    /// An item kept on disk, with the type it arrived as.
    package struct SavedItem: Sendable {
        package var url: URL
        package var contentType: String
        package var label: String
    }

    package var saved: [URL] = []
    package var savedItems: [SavedItem] = []
    package var printed: [String] = []
    package var importedProfiles: [String] = []
    package var refused: [(label: String, reason: String)] = []
    package var bytesReceived: UInt64 = 0
    package var bytesAlreadyHeld: UInt64 = 0
    /// What crossed the link for those bytes (compressed chunks, patches).
    package var bytesCrossed: UInt64 = 0
    /// What the receiver made from the copy it already had (delta transfer; counted in `bytesReceived`).
    package var bytesFromCopy: UInt64 = 0
    /// Of those, what shares its blocks on disk with the copy (a reflink: XFS, Btrfs) rather than being written again.
    package var bytesShared: UInt64 = 0
    /// Set when the offer was held for the user's answer (nothing was received).
    package var held: OfferHeld?
}

/// A receive into a folder: the receiver driver over a disk sink, for one sending session at a time.
package final class ReceiveSession: Sendable {
    let options: ReceiveOptions
    let progress: ProgressReporter
    package let store: PartialStore

    package init(options: ReceiveOptions, progress: ProgressReporter) throws {
        self.options = options
        self.progress = progress
        let folder: Directory
        do {
            folder = try Directory.open(options.directory.path, create: true, mode: options.folderMode)
        } catch let error as DiskError {
            throw ShareFailure(.cannotCreate, "cannot receive into \(options.directory.path): \(error.message)")
        }
        store = try PartialStore(folder: folder)
        // The types this receiver imports are known before any offer names them.
        _ = (UTType.shareProfile, UTType.shareProfilesArchive)
    }

    /// The hello this receiver answers with: its name and accept list.
    package static func hello(name: String, accept: AcceptList) -> Hello {
        Hello(name: name, role: .cli, accept: accept, compression: ["zstd"], features: [Delta.feature])
    }

    /// Serves one session. `first` is a frame already read from it (the agent reads one to tell a ping from an
    /// offer); `peer` is the sender's trust entry. A failure found here has been reported to the peer when this
    /// throws.
    package func serve(_ session: Session, peerName: String, peer: TrustedDevice?, first: Frame? = nil) throws
        -> ReceiveReport
    {
        store.removeStale(maxAge: options.partialMaxAge)
        options.versions?.removeStale()
        defer { store.removeIfEmpty() }
        // An item passed on for another device names its origin; only the owner's own devices are believed.
        let forwarded = AccessPolicy.decide(.sendForwarded, peer: peer, localName: "this device")
        let policy = ReceiverMachine.Policy(
            maxItemSize: options.maxSize, freeSpace: store.folder.freeSpace,
            refuse: { item in
                guard item.origin != nil, case .refused(let reason) = forwarded else { return nil }
                return reason
            },
            held: { [store, sender = session.peerID] item, representation in
                store.heldBytes(sender: sender, item: item, representation: representation)
            })
        let machine = ReceiverMachine(
            negotiator: Negotiator(accept: options.accept), policy: policy,
            window: ReceiverMachine.window(forVersion: session.peerHello.agreedVersion))
        var first = first
        var decide: ((Offer) throws -> [Choice])?
        if let gate = options.gate {
            let (frame, opening) = try Exchange.opening(session.connection.channel, first: first)
            first = frame
            // An offer that does not decode is left to the driver, which reports it as any other.
            if let offer = opening {
                var refusal: String?
                switch try gate(offer, peerName) {
                case .proceed:
                    break
                case .decline(let reason):
                    refusal = reason
                case .hold(let held) where Exchange.canHold(agreedVersion: session.peerHello.agreedVersion):
                    try Exchange.hold(session.connection.channel, held)
                    progress.note(
                        "from \(peerName): \(offer.items.count) item(s) wait for an answer (\(held.id))", event: "held",
                        fields: ["id": held.id])
                    var report = ReceiveReport()
                    report.held = held
                    return report
                case .hold:
                    refusal = "this device asks before accepting from \(peerName); update share on the sending device"
                }
                if let refusal {
                    decide = { offer in
                        offer.items.map {
                            Choice(
                                item: $0.id, representation: nil, reason: refusal,
                                refusal: ProtocolError(.refused, refusal))
                        }
                    }
                }
            }
        }
        let sink = DiskSink(
            options: options, store: store, sender: session.peerID, peerName: peerName, progress: progress)
        let driver = ReceiverDriver(
            channel: session.connection.channel, hasher: session.chunkHasher(), codec: ZstdChunkCodec(),
            events: progress.receiverEvents(peer: peerName))
        driver.delta = session.peerHello.speaksDelta
        do {
            let summary = try driver.run(machine: machine, sink: sink, first: first, decide: decide)
            var report = sink.report
            report.refused = summary.refused
            report.bytesReceived = summary.bytes
            report.bytesAlreadyHeld = summary.held
            report.bytesCrossed = summary.wireBytes
            report.bytesFromCopy = summary.patchedBytes
            return report
        } catch {
            session.connection.closeLingering()
            throw error
        }
    }
}
