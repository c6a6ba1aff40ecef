import ShareThreads
import FoundationEssentials
import Glibc
import Logging
import ShareTrust
import ShareProtocol
import ShareTLS
import ShareNet

/// Which servers beyond the LAN this device uses: none by default (then nothing leaves the LAN).
public struct ReachSettings: Sendable, Equatable {
    public var discoveryServers: [ServerURL]
    public var relays: [ServerURL]
    /// Seconds the addresses tried first have to themselves before the next kind of path starts: the known (LAN)
    /// addresses before a global lookup, and looked-up direct addresses before a relay.
    public var headStart: Double

    public init(discoveryServers: [ServerURL] = [], relays: [ServerURL] = [], headStart: Double = 1) {
        self.discoveryServers = discoveryServers
        self.relays = relays
        self.headStart = headStart
    }

    /// No server is configured: the LAN only.
    public var isEmpty: Bool { discoveryServers.isEmpty && relays.isEmpty }
}

/// Opens a session with a trusted device by whatever path works: its known addresses (the trust store, the LAN,
/// the last that worked) first; then, with discovery servers configured, the addresses it announced there (looked
/// up only for trusted devices, cached for five minutes); then a relay (those it announced, then this device's
/// own). Each kind starts after the one before has had `headStart` seconds, or at once when it has failed, so an
/// address behind NAT does not cost a whole connect timeout. The first session to complete its pinned handshake and
/// hellos wins; the others are closed. Every path runs the same handshake with the same pin, so a path that lies
/// costs one attempt.
public enum Reach {
    static let log = Log.logger("share.reach")

    public static func connect(
        from device: LocalDevice, to target: PeerTarget, trust: TrustStore, hello: Hello,
        timeouts: SessionTimeouts = SessionTimeouts(), settings: ReachSettings
    ) throws -> Session {
        guard let expected = target.expected, !settings.isEmpty else {
            let session = try SessionOpener.connect(
                from: device, to: target, trust: trust, hello: hello, timeouts: timeouts)
            RouteBook.record(session.peerID, session, paths: device.paths)
            return session
        }
        let race = Race()
        let verifier = target.verifier(trust: trust)
        let direct: @Sendable (PeerAddress) throws -> Session = { address in
            try SessionOpener.connect(
                from: device, to: address, hello: hello, verifier: verifier, timeouts: timeouts)
        }
        let known = target.addresses
        let lan = race.launch {
            for address in known where !race.isDecided {
                do {
                    let session = try direct(address)
                    if address != expected.address {
                        ReachedAddresses.record(expected.id, address, paths: device.paths)
                    }
                    race.offer(session)
                    return
                } catch {
                    race.failed(error)
                }
            }
        }
        race.launch {
            if !known.isEmpty { race.wait(for: [lan], atMost: settings.headStart) }
            guard !race.isDecided else { return }
            let found = lookUp(expected.id, device: device, settings: settings, race: race)
            let tcp = found.compactMap(directAddress).filter { !known.contains($0) }
            let relays = unique(
                found.compactMap { try? ServerURL(parsing: $0) }.filter { $0.kind == .relay } + settings.relays)
            let looked = race.launch {
                for address in tcp where !race.isDecided {
                    do {
                        let session = try direct(address)
                        ReachedAddresses.record(expected.id, address, paths: device.paths)
                        race.offer(session)
                        return
                    } catch {
                        race.failed(error)
                    }
                }
            }
            if !tcp.isEmpty { race.wait(for: [lan, looked], atMost: settings.headStart) }
            for relay in relays where !race.isDecided {
                // A session the relay set up can still fail to start: the other device's join may meet the relay
                // busy taking ours (strelaysrv takes a session's second connection only while it waits for one, and
                // spends the key either way), and then nobody answers this side's handshake. On a busy machine the
                // two joins come close enough for that; such a session is asked for once more.
                for attempt in 1...2 where !race.isDecided {
                    do {
                        let begun = ContinuousClock.now
                        let (fd, serverSide) = try RelayClient.connect(
                            to: expected.id, through: relay, identity: device.identity, timeout: timeouts.connect)
                        guard !serverSide else {
                            Syscalls.close(fd)
                            throw ShareFailure(
                                .protocolError, "relay \(relay.address) made this device the server of its own request")
                        }
                        let session = try SessionOpener.establish(
                            fileDescriptor: fd, remoteAddress: "relay \(relay.address)", from: device, hello: hello,
                            verifier: verifier, timeouts: timeouts, started: begun, route: .relay(host: relay.host))
                        race.offer(session)
                        return
                    } catch let failure as ShareFailure where failure.isUnansweredHandshake && attempt == 1 {
                        continue
                    } catch {
                        race.failed(error)
                        break
                    }
                }
            }
        }
        let session = try race.result(peer: expected.name)
        RouteBook.record(expected.id, session, paths: device.paths)
        return session
    }

    /// The addresses `id` announced, from the cache while fresh, else from the first discovery server that knows it.
    static func lookUp(_ id: DeviceID, device: LocalDevice, settings: ReachSettings, race: Race) -> [String] {
        if let cached = LookupCache.fresh(id, paths: device.paths) { return cached.addresses }
        let client = DiscoveryClient(identity: device.identity)
        for server in settings.discoveryServers where !race.isDecided {
            do {
                let addresses = try client.lookup(id, at: server)
                LookupCache.record(id, addresses, paths: device.paths)
                if !addresses.isEmpty { return addresses }
            } catch {
                race.failed(error)
            }
        }
        return []
    }

    /// `tcp://HOST:PORT` (also `tcp4://`, `tcp6://`) as an address; nil for anything else or an unspecified host.
    static func directAddress(_ text: String) -> PeerAddress? {
        guard let range = text.firstRange(of: "://") else { return nil }
        let scheme = text[..<range.lowerBound].lowercased()
        guard scheme == "tcp" || scheme == "tcp4" || scheme == "tcp6" else { return nil }
        var rest = String(text[range.upperBound...])
        if let slash = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) { rest = String(rest[..<slash]) }
        guard let address = PeerAddress(parsing: rest), !["", "0.0.0.0", "::"].contains(address.host) else {
            return nil
        }
        return address
    }

    static func unique(_ servers: [ServerURL]) -> [ServerURL] {
        var seen: Set<ServerURL> = []
        return servers.filter { seen.insert($0).inserted }
    }
}

/// Attempts running on threads of their own; the first session offered wins, later ones are closed.
final class Race: Sendable {
    private struct State {
        var winner: Session?
        var errors: [Error] = []
        var running = 0
        var finished: Set<Int> = []
        var next = 0
    }
    private let state = Guarded(State())

    var isDecided: Bool { state.withLock { $0.winner != nil } }

    /// Runs `body` on a new thread; returns its number (for `wait(for:)`).
    @discardableResult
    func launch(_ body: @escaping @Sendable () -> Void) -> Int {
        let number = state.withLock { state in
            state.running += 1
            state.next += 1
            return state.next
        }
        Threads.start(name: "share-thread", stackSize: 512 << 10) { [self] in
            body()
            TLSLibrary.threadFinished()
            state.withLock { state in
                state.running -= 1
                state.finished.insert(number)
            }
        }
        return number
    }

    func offer(_ session: Session) {
        let lost = state.withLock { state -> Bool in
            if state.winner != nil { return true }
            state.winner = session
            return false
        }
        if lost { session.connection.close() }
    }

    func failed(_ error: Error) {
        state.withLock { $0.errors.append(error) }
    }

    /// Waits until every attempt in `numbers` has finished, a session has won, or `seconds` pass.
    func wait(for numbers: [Int], atMost seconds: Double) {
        state.wait(seconds: seconds) { $0.winner != nil || Set(numbers).isSubset(of: $0.finished) }
    }

    /// The winning session, or one line saying why every path failed.
    func result(peer: String) throws -> Session {
        let (winner, errors) = state.withLock(when: { $0.winner != nil || $0.running == 0 }) { state, _ in
            (state.winner, state.errors)
        }
        if let winner { return winner }
        let failures = errors.map { ($0 as? ShareFailure) ?? ShareFailure(.unavailable, "\(peer): \($0)") }
        // A refusal says what to do; it outranks "could not reach".
        if let refusal = failures.first(where: { $0.code == .notTrusted || $0.code == .usage }) { throw refusal }
        guard !failures.isEmpty else {
            throw ShareFailure(
                .unavailable, "no address is known for \(peer), and no discovery server or relay knows it")
        }
        var seen: Set<String> = []
        let reasons = failures.map(\.message).filter { seen.insert($0).inserted }
        throw ShareFailure(.unavailable, "cannot reach \(peer): " + reasons.joined(separator: "; "))
    }
}
