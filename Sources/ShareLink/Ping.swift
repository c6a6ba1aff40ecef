import Foundation
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
}

/// Resolves how to reach a peer given by name, ID, or HOST:PORT, and which certificates to accept from it.
public struct PeerTarget: Sendable {
    public let address: PeerAddress
    /// The device expected at the address; nil when given as HOST:PORT (any trusted device is accepted).
    public let expected: TrustedDevice?

    /// `discovered`: devices heard on the local network; a trusted device without a recorded address is reached
    /// at the address it announced (an untrusted one never is).
    public static func resolve(_ reference: String, trust: TrustStore, discovered: [DiscoveredPeer] = []) throws
        -> PeerTarget
    {
        if let device = trust.find(reference) {
            let heard = discovered.first { $0.id == device.id.description }?.address
            guard let address = device.address ?? heard else {
                throw ShareError(
                    .unavailable,
                    "no address is known for '\(device.name)' and its agent was not heard on this network; give HOST:PORT, or record one with: share trust add \(device.id) --name \(device.name) --address HOST:PORT"
                )
            }
            return PeerTarget(address: address, expected: device)
        }
        if let address = PeerAddress(parsing: reference) {
            return PeerTarget(address: address, expected: nil)
        }
        if (try? DeviceID(parsing: reference)) != nil {
            throw ShareError(
                .notTrusted, "device \(reference) is not trusted; run: share trust add \(reference) --address HOST:PORT"
            )
        }
        throw ShareError(
            .usage, "'\(reference)' is neither a trusted device name nor HOST:PORT (see: share trust list)")
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
            from: device, to: target.address, hello: Hello(name: device.name, role: .cli),
            verifier: target.verifier(trust: trust), timeouts: timeouts)
        defer { session.connection.close() }
        var trips: [Double] = []
        do {
            for _ in 0..<max(1, count) {
                let nonce = UInt64.random(in: 0...UInt64.max)
                let start = ContinuousClock.now
                try session.connection.send(.ping, Ping(nonce: nonce))
                let pong = try session.connection.receive(.pong, as: Ping.self)
                guard pong.nonce == nonce else { throw ProtocolError(.badMessage, "the peer answered another ping") }
                trips.append((ContinuousClock.now - start).seconds)
            }
            try session.connection.send(.bye, Bye())
        } catch {
            throw SessionErrors.describe(error, peer: target.address.description, localID: device.id)
        }
        return PingResult(
            peerName: session.peerHello.name, peerID: session.peerID, protocolVersion: session.peerHello.version,
            role: session.peerHello.role,
            tls: "\(session.connection.tls.protocolVersion) \(session.connection.tls.cipher)",
            setupSeconds: session.setupSeconds, roundTrips: trips)
    }

    /// The agent side: answers pings until bye, error or idle timeout.
    public static func answer(_ session: Session) throws {
        if let frame = try answerPings(session) {
            throw ProtocolError(.badMessage, "unexpected \(frame.type) in a ping session")
        }
    }

    /// Answers pings until the peer says bye (nil) or sends anything else, which is returned unhandled.
    public static func answerPings(_ session: Session) throws -> Frame? {
        while true {
            let frame = try session.connection.receive()
            switch frame.type {
            case .ping:
                let ping = try MessageCoding.decode(Ping.self, from: frame)
                try session.connection.send(.pong, ping)
            case .bye:
                return nil
            case .error:
                throw MessageCoding.peerError(from: frame)
            default:
                return frame
            }
        }
    }
}
