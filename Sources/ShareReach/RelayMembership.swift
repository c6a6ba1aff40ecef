import ShareThreads
import FoundationEssentials
import Glibc
import Logging
import ShareTrust
import ShareTLS
import ShareNet

/// An agent's place on a relay (Relay Protocol v1, permanent mode): it joins the first relay that takes it, stays
/// joined (pings every 20 s; a relay silent for a minute is left), rejoins with backoff (1 s, 2 s … 60 s, trying
/// the next relay each time), and turns each session invitation into a socket for the listener. Invitations from a
/// device `mayConnect` refuses are declined before anything is connected; at most 16 sessions are joined at once.
public final class RelayMembership: Sendable {
    static let log = Log.logger("share.relay")
    public typealias Arrival = @Sendable (_ fd: Int32, _ from: DeviceID, _ relay: ServerURL) -> Void

    public let relays: [ServerURL]
    private let identity: TLSIdentity
    private let mayConnect: @Sendable (DeviceID) -> Bool
    private let arrived: Arrival
    private let changed: @Sendable (ServerURL?) -> Void
    private let timeout: Double
    private struct State {
        var stopping = false
        var running = false
        var connection: ServerConnection?
        var current: ServerURL?
        var lastError: String?
        var joining = 0
    }
    private let state = Guarded(State())
    /// Seconds between pings; a relay silent for three of them is left.
    let pingInterval: Double = 20

    public init(
        relays: [ServerURL], identity: TLSIdentity, timeout: Double = 10,
        mayConnect: @escaping @Sendable (DeviceID) -> Bool, arrived: @escaping Arrival,
        changed: @escaping @Sendable (ServerURL?) -> Void = { _ in }
    ) {
        self.relays = relays
        self.identity = identity
        self.timeout = timeout
        self.mayConnect = mayConnect
        self.arrived = arrived
        self.changed = changed
    }

    /// The relay this agent is joined to now, if any.
    public var joined: ServerURL? { state.withLock { $0.current } }
    /// Why the last attempt to join or stay joined ended, if it did.
    public var problem: String? { state.withLock { $0.lastError } }

    /// Starts the membership thread. A relay that is down is retried, not fatal (`problem` says why, and `share
    /// status` shows it); `failed` hears only if the thread ever ended without being stopped.
    public func start(failed: @escaping @Sendable (Error) -> Void = { _ in }) {
        guard !relays.isEmpty else { return }
        state.withLock { $0.running = true }
        Threads.start(name: "share-relay", stackSize: 8 << 20) { [self] in
            run()
            let asked = state.withLock { state in
                state.running = false
                return state.stopping
            }
            if !asked { failed(RelayProtocolError("the relay membership ended")) }
        }
    }

    public func stop() {
        state.withLock { state in
            state.stopping = true
            state.connection?.interrupt()
        }
        state.wait { !$0.running && $0.joining == 0 }
    }

    private var isStopping: Bool { state.withLock { $0.stopping } }

    private func run() {
        var failures = 0
        var index = 0
        while !isStopping {
            let relay = relays[index % relays.count]
            do {
                try stayJoined(relay)
                failures = 0
            } catch {
                let reason = "\(error)"
                state.withLock { $0.lastError = reason }
                if !isStopping {
                    Self.log.warning(
                        "not joined to the relay", metadata: ["relay": "\(relay.address)", "reason": "\(reason)"])
                }
            }
            let was = state.withLock { state -> ServerURL? in
                defer { (state.current, state.connection) = (nil, nil) }
                return state.current
            }
            if was != nil { changed(nil) }
            failures += 1
            index += 1
            let delay = min(60, pow(2, Double(min(failures - 1, 6))))
            state.wait(seconds: delay) { $0.stopping }
        }
    }

    /// Joins `relay` and serves it until the connection ends or the membership stops.
    private func stayJoined(_ relay: ServerURL) throws {
        let connection = try ServerConnection(
            to: relay, identity: identity, alpn: [RelayClient.alpn], timeout: timeout)
        defer { connection.close() }
        guard
            state.withLock({ state -> Bool in
                if state.stopping { return false }
                state.connection = connection
                return true
            })
        else { return }
        try connection.write(RelayMessage.joinRelayRequest.encoded())
        switch try RelayClient.readMessage(connection) {
        case .response(let code, _) where code == RelayClient.success:
            break
        case .response(let code, let message) where code == RelayClient.alreadyConnected:
            throw ShareFailure(
                .unavailable, "another device with this ID is joined to relay \(relay.address) (\(message))")
        case .response(let code, let message):
            throw ShareFailure(.unavailable, "relay \(relay.address) refused to take this device: \(message) (\(code))")
        default:
            throw ShareFailure(.protocolError, "relay \(relay.address) answered the join out of turn")
        }
        state.withLock { state in
            state.current = relay
            state.lastError = nil
        }
        Self.log.info("joined the relay", metadata: ["relay": "\(relay.address)"])
        changed(relay)
        var lastSent = Date()
        var lastHeard = Date()
        while !isStopping {
            if connection.hasInput || Syscalls.waitReadable([connection.tls.fileDescriptor], timeout: 1) {
                let message = try RelayClient.readMessage(connection)
                lastHeard = Date()
                switch message {
                case .ping:
                    try connection.write(RelayMessage.pong.encoded())
                    lastSent = Date()
                case .sessionInvitation(let invitation):
                    invited(invitation, relay: relay)
                case .pong, .response:
                    break
                default:
                    throw ShareFailure(.protocolError, "relay \(relay.address) sent a message out of place")
                }
            }
            if Date().timeIntervalSince(lastSent) >= pingInterval {
                try connection.write(RelayMessage.ping.encoded())
                lastSent = Date()
            }
            if Date().timeIntervalSince(lastHeard) > pingInterval * 3 {
                throw ShareFailure(.unavailable, "relay \(relay.address) stopped answering")
            }
        }
    }

    /// A device asks for a session: declined unless `mayConnect` takes it; otherwise joined on a thread of its own.
    private func invited(_ invitation: SessionInvitation, relay: ServerURL) {
        guard invitation.from.count == 32 else { return }
        let from = DeviceID(bytes: invitation.from)
        guard mayConnect(from) else {
            Self.log.notice(
                "declined a relayed session from a device that is not trusted",
                metadata: ["from": "\(from)", "relay": "\(relay.address)"])
            return
        }
        guard invitation.serverSocket else {
            Self.log.notice(
                "declined a relayed session that would make this agent a client", metadata: ["from": "\(from)"])
            return
        }
        let admitted = state.withLock { state -> Bool in
            guard !state.stopping, state.joining < 16 else { return false }
            state.joining += 1
            return true
        }
        guard admitted else {
            Self.log.notice("declined a relayed session: too many being joined", metadata: ["from": "\(from)"])
            return
        }
        Threads.start(name: "share-thread", stackSize: 512 << 10) { [self] in
            defer {
                state.withLock { $0.joining -= 1 }
            }
            do {
                let fd = try RelayClient.join(invitation, relay: relay, timeout: timeout)
                arrived(fd, from, relay)
            } catch {
                Self.log.info("could not join a relayed session", metadata: ["from": "\(from)", "reason": "\(error)"])
            }
        }
    }
}
