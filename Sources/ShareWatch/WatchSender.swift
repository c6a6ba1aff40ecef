import CoreTransferable
import ShareLink
import ShareProfileModel
import ShareProtocol
import ShareTLS

/// `share watch send`: the watch offers its items to its agent, naming the device they are for. The agent
/// negotiates with that device's accept list and keeps what it chose to deliver it; only the chosen representation
/// of each item is produced here.
public final class WatchSender {
    let options: WatchSendOptions
    let device: LocalDevice
    let console: Console
    static let chunkSize = 64 << 10

    /// One item: what the offer says, and how each representation is produced if chosen.
    struct Item {
        var offer: OfferItem
        var produce: [() throws -> [UInt8]]
    }

    public init(options: WatchSendOptions) throws {
        self.options = options
        device = try LocalDevice.loadOrCreate(paths: DevicePaths.resolve(configOverride: options.config))
        console = Console(json: options.json)
    }

    public func run() throws {
        Syscalls.ignoreSIGPIPE()
        let items = try makeItems()
        let trust = try TrustStore.load(device.paths.trustFile)
        let target = try PeerTarget.resolve(options.agent, trust: trust)
        let timeouts = SessionTimeouts(connect: options.timeout, handshake: options.timeout, idle: 60)
        let session = try SessionOpener.connect(
            from: device, to: target.address, hello: Hello(name: device.name, role: .watch, relayTo: options.to),
            verifier: target.verifier(trust: trust), timeouts: timeouts)
        defer { session.connection.close() }
        let agent = trust.device(session.peerID)?.name ?? session.peerHello.name
        var refused: [String] = []
        do {
            refused = try exchange(session, items: items, agent: agent)
        } catch {
            throw SessionErrors.describe(error, peer: "\(agent) at \(target.address)", localID: device.id)
        }
        if !refused.isEmpty {
            throw ShareError(.refused, "\(refused.count) item(s) refused: " + refused.joined(separator: "; "))
        }
    }

    private func makeItems() throws -> [Item] {
        var items: [Item] = []
        for text in options.texts { items.append(Self.item(text, label: "text")) }
        for link in options.urls {
            guard let url = URL(string: link) else { throw ShareError(.usage, "'\(link)' is not a URL") }
            items.append(Self.item(url, label: link))
        }
        if !options.profiles.isEmpty {
            let catalog: ProfileCatalog
            do {
                catalog = try ProfileCatalog.load(device.paths.profilesFile)
            } catch {
                throw ShareError(.dataError, "\(error)")
            }
            for name in options.profiles {
                guard let profile = catalog.find(name) else {
                    throw ShareError(.noInput, "no profile is called '\(name)' on this watch (see: share profile list)")
                }
                items.append(
                    Self.item(profile, label: "profile \(profile.name)", id: "profile-\(profile.id.uuidString)"))
            }
        }
        return items
    }

    /// A `Transferable` value as the representations it offers to any trusted device (the agent passes them on),
    /// in its own order. File representations are left out: the watch sends what it holds in memory.
    static func item<T: Transferable>(_ value: T, label: String, id: String? = nil) -> Item {
        let entries = value.offeredRepresentations(for: .trusted).filter { $0.payload != .file }
        let offered = entries.map {
            OfferedRepresentation(
                contentType: $0.contentType.identifier, kind: .data, size: nil,
                suggestedFileName: $0.suggestedFileName(for: value))
        }
        let produce = entries.map { entry in
            {
                switch try blockingAwait({ try await entry.export(value) }) {
                case .data(let data): return [UInt8](data)
                case .file: throw ShareError(.failure, "\(label) produced a file where data was expected")
                }
            }
        }
        let itemID = id ?? String(UInt64.random(in: 0...UInt64.max), radix: 16)
        return Item(
            offer: OfferItem(id: itemID, label: label, representations: offered), produce: produce)
    }

    /// Offers the items and streams the chosen representations; returns the refusals.
    private func exchange(_ session: Session, items: [Item], agent: String) throws -> [String] {
        let offer = Offer(items: items.map(\.offer), chunkSize: Self.chunkSize)
        try offer.validate()
        var machine = SenderMachine(offer: offer)
        var actions = machine.peerReady()
        var refused: [String] = []
        while true {
            for action in actions {
                switch action {
                case .sendOffer(let offer):
                    try session.connection.send(.offer, offer)
                case .refused(let index, let choice):
                    refused.append("\(items[index].offer.label): \(choice.reason)")
                    console.status(
                        Console.Event(
                            event: "refused", to: options.to, reason: choice.reason, item: items[index].offer.label),
                        plain: "refused \(items[index].offer.label): \(choice.reason)")
                case .stream(let index, let representation, let verified):
                    let bytes = try items[index].produce[representation]()
                    let done = try stream(
                        bytes, item: items[index].offer.id, verified: verified, connection: session.connection)
                    for case .sendDone(let done) in try machine.finishedStreaming(done) {
                        try session.connection.send(.done, done)
                    }
                case .sendDone(let done):
                    try session.connection.send(.done, done)
                case .delivered(let index, let ack):
                    let chosen = machine.choices[index].representation.map {
                        items[index].offer.representations[$0].contentType
                    }
                    console.item(
                        Console.Event(
                            event: "sent", from: agent, to: options.to, type: chosen, reason: ack.outcome,
                            item: items[index].offer.label),
                        plain: "sent \(items[index].offer.label) as \(chosen ?? "?") to \(options.to) through \(agent)"
                            + " (\(ack.outcome))")
                case .sendBye:
                    try session.connection.send(.bye, Bye())
                    return refused
                }
            }
            if machine.state == .finished { return refused }
            actions = try machine.received(frame: session.connection.receive())
        }
    }

    /// Sends the chunks of `bytes` the agent does not hold and returns the item's `done`.
    private func stream(_ bytes: [UInt8], item: String, verified: Set<Int>, connection: FramedConnection) throws
        -> Done
    {
        let chunks = ChunkMath.count(size: UInt64(bytes.count), chunkSize: Self.chunkSize)
        let hasher = SHA256Hasher()
        let digests = SHA256Hasher()
        for index in 0..<chunks {
            let start = index * Self.chunkSize
            let piece = bytes[start..<min(bytes.count, start + Self.chunkSize)]
            hasher.update(piece)
            let digest = hasher.finalize()
            digests.update(digest)
            if verified.contains(index) { continue }
            var payload = ChunkHeader(index: index, digest: digest).encoded()
            payload += piece
            try connection.send(Frame(type: .data, payload: payload))
        }
        return Done(item: item, size: UInt64(bytes.count), chunks: chunks, digest: digests.finalize().hexString)
    }
}
