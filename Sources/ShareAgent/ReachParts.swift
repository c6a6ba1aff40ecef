import Synchronization
import FoundationEssentials
import ShareReach
import ShareTrust
import ShareProtocol
import CoreTransferable
import UniformTypeIdentifiers
import ShareEngine

/// The agent's presence beyond the LAN, when `agent.json` names servers: its place on a relay (relayed sessions go
/// to the listener like any other) and its announcements to discovery servers (its port, and its relay while it is
/// joined; announced again at once when that changes). Nothing of this runs with no server configured.
final class ReachParts: Sendable {
    let settings: ReachSettings
    let relay: RelayMembership?
    let announcer: Announcer?

    init(settings: ReachSettings, device: LocalDevice, trust: TrustCache, listener: Listener) {
        self.settings = settings
        var relay: RelayMembership?
        let wake = WakeBox()
        if !settings.relays.isEmpty {
            relay = RelayMembership(
                relays: settings.relays, identity: device.identity,
                // Declined before anything is connected: the invitation names who asks.
                mayConnect: { trust.isTrusted($0) },
                arrived: { [listener] fd, from, relay in
                    listener.adopt(
                        fd, peer: "relay \(relay.address) (\(from.short))", key: "relay:\(from)",
                        route: .relay(host: relay.host))
                },
                changed: { _ in wake.wake() })
        }
        self.relay = relay
        if !settings.discoveryServers.isEmpty {
            let port = listener.port
            let announcer = Announcer(
                servers: settings.discoveryServers, client: DiscoveryClient(identity: device.identity)
            ) { [relay] in
                // An unspecified host: the discovery server records the address the announcement came from.
                ["tcp://:\(port)"] + (relay?.joined.map { [$0.canonical] } ?? [])
            }
            wake.set { announcer.reannounceNow() }
            self.announcer = announcer
        } else {
            announcer = nil
        }
    }

    var parts: [any AgentPart] {
        var parts: [any AgentPart] = []
        if let relay { parts.append(relay) }
        if let announcer { parts.append(announcer) }
        return parts
    }

    /// Lines for `share status`: the relay and each discovery server.
    var status: [String] {
        var lines: [String] = []
        if let relay {
            if let joined = relay.joined {
                lines.append("relay: joined \(joined.address)")
            } else {
                lines.append("relay: not joined" + (relay.problem.map { " (\($0))" } ?? ""))
            }
        }
        for standing in announcer?.standings ?? [] {
            var line = "discovery: \(standing.server.address)"
            if let when = standing.announced {
                line += " announced \(Int(-when.timeIntervalSinceNow)) s ago"
            } else {
                line += " not announced yet"
            }
            if let problem = standing.problem { line += " (\(problem))" }
            lines.append(line)
        }
        return lines
    }
}

/// Lets the relay's "joined or left" reach the announcer, created after it. The action is kept in a box of its own:
/// a function value kept directly in a generic container is re-wrapped at every look inside it.
private final class WakeBox: Sendable {
    private final class Action: Sendable {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }
    private let action = Mutex<Action?>(nil)

    func set(_ action: @escaping @Sendable () -> Void) {
        let boxed = Action(action)
        self.action.withLock { $0 = boxed }
    }
    func wake() { action.withLock { $0 }?.run() }
}

extension RelayMembership: AgentPart {
    package var partName: String { "relay" }
}

extension Announcer: AgentPart {
    package var partName: String { "discovery announcements" }
}
