import ArgumentParser
import FoundationEssentials
import ShareLocalSendRoute
import ShareKit
import ShareNet
import ShareTrust
import ShareReach
import ShareProtocol
import ShareEngine
import ShareAgent

struct PeersCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "peers",
        abstract:
            "List trusted devices and devices heard on the local network, with address, last seen and reachability.",
        discussion: helpPage(
            "Devices heard but not trusted are listed as such and are never sent to.",
            examples: ["share peers", "share peers --json"]))

    @OptionGroup var device: DeviceOptions

    @Option(help: "Seconds to wait for each reachability check.")
    var timeout: Double = 1

    @Flag(help: "One JSON array: name, id, trusted, relation, address, lastSeen, reachable.")
    var json = false

    /// One device as `--json` shows it.
    struct Entry: Encodable {
        var name: String
        var id: String
        var trusted: Bool
        var relation: String?
        var watch: Bool?
        var address: String?
        var discovered: Bool
        var lastSeen: Date?
        var reachable: Bool?
        /// How the device was last reached (`direct`, `via relay HOST`) and when.
        var lastRoute: String?
        var lastReached: Date?
        /// What a discovery server last said about the device, and when.
        var lookedUp: [String]?
        var lookedUpAt: Date?
        /// A LocalSend device (a phone): `id` is its certificate's fingerprint.
        var localsend: Bool?
        var model: String?
        var deviceType: String?
    }

    func run() throws {
        try ShareCLI.run {
            let trust = try device.loadTrust()
            let heard = DiscoveredPeer.load(device.paths)
            let routes = RouteBook.load(device.paths)
            let lookups = LookupCache.load(device.paths)
            let phones = LocalSendSeen.load(device.paths)
            let phoneTrust = LocalSendTrust.load(device.paths)
            if json {
                var entries: [Entry] = trust.devices.map { peer in
                    let seen = heard.first { $0.id == peer.id.description }
                    let address = peer.address ?? seen?.address
                    return Entry(
                        name: peer.name, id: peer.id.description, trusted: true, relation: peer.relation.description,
                        watch: peer.watch, address: address.map { "\($0)" },
                        discovered: peer.address == nil && seen != nil,
                        lastSeen: seen?.lastSeen, reachable: address.map(reachable),
                        lastRoute: routes[peer.id.description]?.route, lastReached: routes[peer.id.description]?.at,
                        lookedUp: lookups[peer.id.description]?.addresses,
                        lookedUpAt: lookups[peer.id.description]?.fetched)
                }
                for peer in heard where !trust.devices.contains(where: { $0.id.description == peer.id }) {
                    entries.append(
                        Entry(
                            name: peer.name, id: peer.id, trusted: false, address: "\(peer.address)", discovered: true,
                            lastSeen: peer.lastSeen))
                }
                for phone in phones {
                    entries.append(
                        Entry(
                            name: phone.alias, id: phone.fingerprint,
                            trusted: phoneTrust.device(phone.fingerprint) != nil,
                            relation: "localsend", address: "\(phone.host):\(phone.port)", discovered: true,
                            lastSeen: phone.lastSeen, localsend: true, model: phone.deviceModel,
                            deviceType: phone.deviceType
                        ))
                }
                try sayJSON(entries)
                return
            }
            for peer in trust.devices {
                let seen = heard.first { $0.id == peer.id.description }
                let address = peer.address ?? seen?.address
                var line = "\(peer.name)\t\(peer.id.short)\ttrusted"
                line += "\t" + (address.map { "\($0)" + (peer.address == nil ? " (discovered)" : "") } ?? "no address")
                line += "\t" + (seen.map { "seen \(InternetDate.string($0.lastSeen))" } ?? "not heard")
                if let address {
                    line += "\t" + (reachable(address) ? "reachable" : "unreachable")
                }
                if let last = routes[peer.id.description] {
                    line += "\tlast reached \(last.route) \(InternetDate.string(last.at))"
                }
                if let found = lookups[peer.id.description] {
                    let age = Int(-found.fetched.timeIntervalSinceNow)
                    line +=
                        "\tlooked up \(age) s ago: "
                        + (found.addresses.isEmpty ? "unknown there" : found.addresses.joined(separator: " "))
                }
                say(line)
            }
            for peer in heard where !trust.devices.contains(where: { $0.id.description == peer.id }) {
                say(
                    "\(ProgressReporter.neutralized(peer.name))\t\(peer.id.prefix(7))\tnot trusted\t\(peer.address)\tseen \(InternetDate.string(peer.lastSeen))"
                )
            }
            for phone in phones {
                let trusted = phoneTrust.device(phone.fingerprint) != nil
                let kind = [phone.deviceModel, phone.deviceType].compactMap { $0 }.map(ProgressReporter.neutralized)
                say(
                    "\(ProgressReporter.neutralized(phone.alias))\tLocalSend \(phone.fingerprint.prefix(8))\t\(trusted ? "trusted" : "not trusted")\t\(phone.host):\(phone.port)\tseen \(InternetDate.string(phone.lastSeen))"
                        + (kind.isEmpty ? "" : "\t" + kind.joined(separator: ", ")))
            }
        }
    }

    private func reachable(_ address: PeerAddress) -> Bool {
        guard let fd = try? Syscalls.connect(host: address.host, port: address.port, timeout: timeout) else {
            return false
        }
        Syscalls.close(fd)
        return true
    }
}
