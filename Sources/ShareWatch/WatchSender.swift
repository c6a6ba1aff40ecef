import CoreTransferable
import ShareTrust
import ShareProfileModel
import ShareProtocol
import ShareTLS
import ShareNet

/// `share watch send`: the watch offers its items to its agent, naming the device they are for. The agent
/// negotiates with that device's accept list and keeps what it chose to deliver it; only the chosen representation
/// of each item is produced here.
public final class WatchSender {
    let options: WatchSendOptions
    let device: LocalDevice
    let console: Console
    static let chunkSize = 64 << 10

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
            from: device, to: target.address, hello: Hello(name: device.name, role: .watch, forwardTo: options.to),
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
            throw ShareFailure(.refused, "\(refused.count) item(s) refused: " + refused.joined(separator: "; "))
        }
    }

    private func makeItems() throws -> [ItemSource] {
        var items: [ItemSource] = []
        for text in options.texts { items.append(Self.item(text, label: "text")) }
        for link in options.urls {
            guard let url = URL(string: link) else { throw ShareFailure(.usage, "'\(link)' is not a URL") }
            items.append(Self.item(url, label: link))
        }
        if !options.profiles.isEmpty {
            let catalog: ProfileCatalog
            do {
                catalog = try ProfileCatalog.load(device.paths.profilesFile)
            } catch {
                throw ShareFailure(.dataError, "\(error)")
            }
            for name in options.profiles {
                guard let profile = catalog.find(name) else {
                    throw ShareFailure(
                        .noInput, "no profile is called '\(name)' on this watch (see: share profile list)")
                }
                items.append(
                    Self.item(
                        profile.withoutMedia, label: "profile \(profile.name)", id: "profile-\(profile.id.uuidString)"))
            }
        }
        return items
    }

    /// A `Transferable` value as the representations it offers to any trusted device (the agent passes them on),
    /// in its own order. File representations are left out: the watch sends what it holds in memory.
    static func item<T: Transferable>(_ value: T, label: String, id: String? = nil) -> ItemSource {
        let entries = value.offeredRepresentations(for: AccessPolicy.visibilityBeforeTheReceiverIsKnown).filter {
            $0.payload != .file
        }
        let offered = entries.map {
            OfferedRepresentation(
                contentType: $0.contentType.identifier, kind: .data, size: nil,
                suggestedFileName: $0.suggestedFileName(for: value))
        }
        let makers = entries.map { entry in
            {
                switch try blockingAwait({ try await entry.export(value) }) {
                case .data(let data): return [UInt8](data)
                case .file: throw ShareFailure(.failure, "\(label) produced a file where data was expected")
                }
            }
        }
        let itemID = id ?? String(UInt64.random(in: 0...UInt64.max), radix: 16)
        return DataItemSource(
            offer: OfferItem(id: itemID, label: label, representations: offered), makers: makers)
    }

    /// Offers the items and streams the chosen representations; returns the refusals.
    private func exchange(_ session: Session, items: [ItemSource], agent: String) throws -> [String] {
        var refused: [String] = []
        var chosenTypes: [Int: String] = [:]
        let to = options.to
        let console = console
        let driver = SenderDriver(
            channel: session.connection.channel, chunkSize: Self.chunkSize, hasher: session.chunkHasher()
        ) { event in
            switch event {
            case .refused(_, let label, _, let reason):
                refused.append("\(label): \(reason)")
                console.status(
                    Console.Event(event: "refused", to: to, reason: reason, item: label),
                    plain: "refused \(label): \(reason)")
            case .delivered(let index, let label, let ack):
                let chosen = chosenTypes[index]
                console.status(
                    Console.Event(event: "sent", from: agent, to: to, type: chosen, reason: ack.outcome, item: label),
                    plain: "sent \(label) as \(chosen ?? "?") to \(to) through \(agent) (\(ack.outcome))")
            case .chosen(let index, _, _, let type, _):
                chosenTypes[index] = type
            default:
                break
            }
        }
        do {
            _ = try driver.run(items)
        } catch {
            session.connection.closeLingering()
            throw error
        }
        return refused
    }
}
