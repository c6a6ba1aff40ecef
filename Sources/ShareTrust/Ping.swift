import FoundationEssentials
import ShareProtocol
import ShareTLS

/// What `share ping` learned about a peer.
public struct PingResult: Sendable {
    public let peerName: String
    public let peerID: DeviceID
    public let protocolVersion: Int
    public let role: PeerRole
    public let tls: String
    /// Connect + handshake + hellos.
    public let setupSeconds: Double
    /// Ping/pong round trips.
    public let roundTrips: [Double]
    /// Direct, or through a relay.
    public let route: SessionRoute
    /// Where the session went: `HOST:PORT`, or `relay HOST:PORT`.
    public let address: String
}

/// Resolves how to reach a peer given by name, ID, or HOST:PORT, and which certificates to accept from it.
public struct PeerTarget: Sendable {
    /// Where to try, in order: the address recorded in the trust store, the one the device last announced on the
    /// local network (a hint: an announcement is never believed more than a pinned handshake), and the last one
    /// that worked.
    public let addresses: [PeerAddress]
    /// The device expected at the address; nil when given as HOST:PORT (any trusted device is accepted).
    public let expected: TrustedDevice?

    /// The first address to try (a target resolved for the LAN alone always has one).
    public var address: PeerAddress { addresses[0] }

    /// Where the device is looked for, for a sentence: its first address, or, for a device to be found beyond the
    /// LAN, its name.
    public var place: String {
        addresses.first?.description ?? expected.map { "\($0.name)'s announced addresses" } ?? "?"
    }

    public init(addresses: [PeerAddress], expected: TrustedDevice?) {
        precondition(!addresses.isEmpty || expected != nil)
        var seen: Set<PeerAddress> = []
        self.addresses = addresses.filter { seen.insert($0).inserted }
        self.expected = expected
    }

    /// `discovered`: devices heard on the local network; `reached`: the last address that worked per device ID.
    /// Only a trusted device is ever reached at an address it announced. `beyondLAN`: discovery servers or relays
    /// are configured, so a trusted device with no known address is still a target (found there).
    public static func resolve(
        _ reference: String, trust: TrustStore, discovered: [DiscoveredPeer] = [], reached: [String: PeerAddress] = [:],
        beyondLAN: Bool = false
    ) throws -> PeerTarget {
        if let device = trust.find(reference) {
            let id = device.id.description
            let candidates =
                [device.address, discovered.first { $0.id == id }?.address, reached[id]].compactMap { $0 }
            guard !candidates.isEmpty || beyondLAN else {
                throw ShareFailure(
                    .unavailable,
                    "no address is known for '\(device.name)' and its agent was not heard on this network; give HOST:PORT, or record one with: share trust add \(device.id) --name \(device.name) --address HOST:PORT"
                )
            }
            return PeerTarget(addresses: candidates, expected: device)
        }
        if let address = PeerAddress(parsing: reference) {
            return PeerTarget(addresses: [address], expected: nil)
        }
        if (try? DeviceID(parsing: reference)) != nil {
            throw ShareFailure(
                .notTrusted, "device \(reference) is not trusted; run: share trust add \(reference) --address HOST:PORT"
            )
        }
        if let colon = reference.lastIndex(of: ":"), let port = Int(reference[reference.index(after: colon)...]),
            !(1...65535).contains(port)
        {
            throw ShareFailure(.usage, "'\(reference)' names port \(port); a port is a number from 1 to 65535")
        }
        let names = trust.devices.map(\.name).sorted { $0.lowercased() < $1.lowercased() }
        throw ShareFailure(
            .usage,
            "no trusted device is called '\(reference)', and it is not HOST:PORT; "
                + (names.isEmpty
                    ? "no device is trusted yet (pair with one: share pair)"
                    : "trusted devices: \(names.joined(separator: ", "))"))
    }

    /// Resolves with what this device has heard and reached before.
    public static func resolve(_ reference: String, device: LocalDevice, trust: TrustStore, beyondLAN: Bool = false)
        throws -> PeerTarget
    {
        try check(reference, device: device, trust: trust)
        return try resolve(
            reference, trust: trust, discovered: DiscoveredPeer.load(device.paths),
            reached: ReachedAddresses.load(device.paths), beyondLAN: beyondLAN)
    }

    /// Checks that `reference` can name a peer before anything is queued: a trusted device (by name or ID) or
    /// HOST:PORT, and not this device itself. Throws the same errors as `resolve` (a name nobody has is a usage error
    /// listing the trusted names).
    public static func check(_ reference: String, device: LocalDevice, trust: TrustStore) throws {
        if reference.lowercased() == device.name.lowercased() && trust.find(reference) == nil
            || (try? DeviceID(parsing: reference)) == device.id
        {
            throw ShareFailure(
                .usage, "'\(reference)' is this device itself; send to another device (see: share trust list)")
        }
        if trust.find(reference) != nil || PeerAddress(parsing: reference) != nil { return }
        _ = try resolve(reference, trust: trust)
    }

    /// Accepts exactly the expected device, or any trusted device for a bare address.
    public func verifier(trust: TrustStore) -> PeerVerifier {
        if let expected { return { $0 == expected.id } }
        let trusted = Set(trust.devices.map(\.id))
        return { trusted.contains($0) }
    }
}

public enum PingClient {
    /// Connects, authenticates, exchanges hellos and `count` pings.
    public static func ping(
        device: LocalDevice, target: PeerTarget, trust: TrustStore, count: Int = 1,
        timeouts: SessionTimeouts = SessionTimeouts()
    ) throws -> PingResult {
        let session = try SessionOpener.connect(
            from: device, to: target, trust: trust, hello: hello(device), timeouts: timeouts)
        return try ping(session, device: device, place: target.place, count: count)
    }

    /// The hello a ping session opens with.
    public static func hello(_ device: LocalDevice) -> Hello { Hello(name: device.name, role: .cli) }

    /// `count` pings over an open session (then `bye`); closes it.
    public static func ping(_ session: Session, device: LocalDevice, place: String, count: Int = 1) throws
        -> PingResult
    {
        defer { session.connection.close() }
        var trips: [Double] = []
        do {
            for _ in 0..<max(1, count) { trips.append(try Exchange.ping(session.connection.channel)) }
            try Exchange.bye(session.connection.channel)
        } catch {
            throw SessionErrors.describe(error, peer: place, localID: device.id)
        }
        return PingResult(
            peerName: session.peerHello.name, peerID: session.peerID, protocolVersion: session.peerHello.agreedVersion,
            role: session.peerHello.role,
            tls: session.connection.tlsDescription,
            setupSeconds: session.setupSeconds, roundTrips: trips, route: session.route,
            address: session.connection.remoteAddress)
    }

    /// The agent side: answers pings until bye, error or idle timeout.
    public static func answer(_ session: Session) throws {
        if let frame = try answerPings(session) {
            throw ProtocolError(.badMessage, "unexpected \(frame.type) in a ping session")
        }
    }

    /// Answers pings until the peer says bye (nil) or sends anything else, which is returned unhandled.
    public static func answerPings(_ session: Session) throws -> Frame? {
        try Exchange.answerPings(session.connection.channel)
    }
}
