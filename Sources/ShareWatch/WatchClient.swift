import CoreTransferable
import Glibc
import ShareTrust
import ShareProtocol
import ShareTLS
import ShareNet

/// The attached watch: connects out to its agent, says it is a watch and what it accepts, then answers the agent's
/// keepalives and receives what the agent delivers, batch after batch. When the link drops (the agent restarts, the
/// network goes) it connects again, waiting 1 s, 2 s, 4 s … up to `maxBackoff` between attempts.
public final class WatchClient {
    let options: WatchOptions
    let device: LocalDevice
    let accept: AcceptList
    let shelf: Shelf
    let console: Console
    private var received = 0

    public init(options: WatchOptions) throws {
        self.options = options
        let paths = DevicePaths.resolve(configOverride: options.config)
        device = try LocalDevice.loadOrCreate(paths: paths)
        do {
            accept = try options.acceptList()
        } catch {
            throw ShareFailure(.usage, error.description)
        }
        let folder =
            options.into.map { URL(fileURLWithPath: $0, isDirectory: true) }
            ?? paths.data.appendingPathComponent("watch", isDirectory: true)
        shelf = try Shelf(path: folder.path, limit: options.keep)
        console = Console(json: options.json)
    }

    /// Runs until `count` items have arrived (forever without it), or until an error a retry cannot fix.
    public func run() throws {
        Syscalls.ignoreSIGPIPE()
        var delay = 1.0
        while true {
            let trust = try TrustStore.load(device.paths.trustFile)
            let target = try PeerTarget.resolve(options.agent, trust: trust)
            let hello = Hello(name: device.name, role: .watch, accept: accept)
            let timeouts = SessionTimeouts(connect: options.timeout, handshake: options.timeout, idle: options.silence)
            do {
                let session = try SessionOpener.connect(
                    from: device, to: target.address, hello: hello, verifier: target.verifier(trust: trust),
                    timeouts: timeouts)
                defer { session.connection.close() }
                let agent = trust.device(session.peerID)?.name ?? session.peerHello.name
                guard session.peerHello.role == .agent else {
                    throw ShareFailure(
                        .usage, "\(agent) at \(target.address) is not an agent; attach to a running agent")
                }
                if try serve(session, agent: agent, address: target.address.description, delay: &delay) { return }
            } catch let error as ShareFailure where [.usage, .configuration, .notTrusted].contains(error.code) {
                throw error
            } catch let error as ProtocolError where error.code == .refused {
                // The agent does not take this device as a watch: trying again would not change that.
                throw ShareFailure(.refused, "\(target.address) refused this watch: \(error.message)")
            } catch {
                let reason = Self.reason(error, peer: target.address.description, device: device)
                console.status(
                    Console.Event(event: "detached", reason: reason),
                    plain: "lost the agent (\(reason)); trying again in \(Int(delay)) s")
            }
            sleepSeconds(delay)
            delay = min(options.maxBackoff, delay * 2)
        }
    }

    /// Serves one link until it drops; true when `count` items have arrived. The link counts as attached once the
    /// agent speaks first (its welcome ping): a refusal would have come instead.
    private func serve(_ session: Session, agent: String, address: String, delay: inout Double) throws -> Bool {
        var attached = false
        while true {
            let event = try Exchange.nextOnWatchLink(session.connection.channel)
            if !attached, event.saysAttached {
                attached = true
                delay = 1
                console.status(
                    Console.Event(event: "attached", from: agent, text: address),
                    plain: "attached to \(agent) at \(address)")
            }
            switch event {
            case .keepalive, .bye:
                continue
            case .offer(let frame):
                try receiveBatch(session, offer: frame, agent: agent)
                if let count = options.count, received >= count { return true }
            }
        }
    }

    /// One offer from the agent, received by the receiver driver: chunks are checked against their digests as they
    /// arrive and the item against the whole-item digest before it is shown or kept.
    private func receiveBatch(_ session: Session, offer frame: Frame, agent: String) throws {
        let policy = ReceiverMachine.Policy(maxItemSize: options.maxSize, freeSpace: shelf.freeSpace)
        let machine = ReceiverMachine(
            negotiator: Negotiator(accept: accept), policy: policy,
            window: ReceiverMachine.window(forVersion: session.peerHello.agreedVersion))
        let sink = WatchSink(shelf: shelf, console: console, agent: agent)
        let driver = ReceiverDriver(channel: session.connection.channel, hasher: session.chunkHasher()) {
            [console] event in
            guard case .refused(_, let label, _, let reason) = event else { return }
            console.status(
                Console.Event(event: "refused", from: agent, reason: reason, item: label),
                plain: "refused \(label): \(reason)")
        }
        // A watch keeps its memory small: three chunks in hand, not the default eight.
        driver.writeAhead = 3
        defer { received += sink.received }
        do {
            _ = try driver.run(machine: machine, sink: sink, first: frame)
        } catch {
            session.connection.closeLingering()
            throw error
        }
    }

    static func reason(_ error: Error, peer: String, device: LocalDevice) -> String {
        SessionErrors.describe(error, peer: peer, localID: device.id).message
    }
}

/// Sleeps for a backoff between reconnection attempts (nothing to wait for: the agent is away).
func sleepSeconds(_ seconds: Double) {
    var request = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - seconds.rounded(.down)) * 1e9))
    var remaining = timespec()
    while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
}
