import Synchronization
import FoundationEssentials
import Glibc
import Logging
import ShareTrust
import ShareNet

/// Announces an agent to its Global Discovery servers: at start, again when the server's `Reannounce-After` says,
/// at once when what it announces changes (it joined or left a relay), and after a failure on a backoff (30 s,
/// doubling to 30 minutes, or the server's `Retry-After`).
public final class Announcer: Sendable {
    static let log = Log.logger("share.discovery")

    /// One server's standing.
    public struct Standing: Sendable {
        public var server: ServerURL
        public var announced: Date?
        public var announcedAddresses: [String] = []
        public var problem: String?
        var due = Date.distantPast
        var failures = 0
    }

    private let client: DiscoveryClient
    private let addresses: @Sendable () -> [String]
    private let states: Mutex<[Standing]>
    private let thread = Mutex<RepeatingThread?>(nil)

    /// `addresses` says what to announce now (evaluated at each announcement).
    public init(servers: [ServerURL], client: DiscoveryClient, addresses: @escaping @Sendable () -> [String]) {
        self.client = client
        self.addresses = addresses
        states = Mutex(servers.map { Standing(server: $0) })
    }

    public var standings: [Standing] { states.withLock { $0 } }

    /// Starts the rounds. They end only when stopped; a server that cannot be reached is tried again with a back-off
    /// and its problem is shown in `standings` (`share status`), so there is nothing for `failed` to hear.
    public func start(failed: @escaping @Sendable (Error) -> Void = { _ in }) {
        guard !standings.isEmpty else { return }
        let thread = RepeatingThread(name: "share-announce", interval: 1) { [weak self] in self?.round() }
        self.thread.withLock { $0 = thread }
        thread.start()
    }

    public func stop() { thread.withLock { $0 }?.stop() }

    /// Announces again at once (what this device announces changed).
    public func reannounceNow() {
        states.withLock { states in
            for index in states.indices { states[index].due = .distantPast }
        }
        thread.withLock { $0 }?.wake()
    }

    private func round() {
        let now = Date()
        let announced = addresses()
        // Due by the clock, or because what this device would announce changed since (it joined or left a relay).
        let due = states.withLock { states in
            states.indices.filter {
                states[$0].due <= now || (states[$0].announced != nil && states[$0].announcedAddresses != announced)
            }
        }
        guard !due.isEmpty else { return }
        for index in due {
            let server = states.withLock { $0[index].server }
            do {
                let answer = try client.announce(announced, to: server)
                states.withLock { states in
                    states[index].announced = Date()
                    states[index].announcedAddresses = announced
                    states[index].problem = nil
                    states[index].failures = 0
                    states[index].due = Date().addingTimeInterval(answer.reannounceAfter)
                }
                Self.log.info(
                    "announced",
                    metadata: ["server": "\(server.address)", "addresses": "\(announced.joined(separator: " "))"])
            } catch {
                let failures = states.withLock { states -> Int in
                    states[index].failures += 1
                    states[index].problem = error.message
                    return states[index].failures
                }
                let wait = min(1800, 30 * pow(2.0, Double(min(failures - 1, 6))))
                states.withLock { $0[index].due = Date().addingTimeInterval(wait) }
                Self.log.warning(
                    "could not announce",
                    metadata: ["server": "\(server.address)", "reason": "\(error.message)", "retry": "\(Int(wait))s"])
            }
        }
    }
}
