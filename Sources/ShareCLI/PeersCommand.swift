import ArgumentParser
import Foundation
import ShareKit

struct PeersCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "peers",
        abstract:
            "List trusted devices and devices heard on the local network, with address, last seen and reachability.",
        discussion: "Devices heard but not trusted are listed as such and are never sent to.")

    @OptionGroup var device: DeviceOptions

    @Option(help: "Seconds to wait for each reachability check.")
    var timeout: Double = 1

    func run() throws {
        try ShareCLI.run {
            let trust = try device.loadTrust()
            let heard = DiscoveredPeer.load(device.paths)
            let dates = ISO8601DateFormatter()
            for peer in trust.devices {
                let seen = heard.first { $0.id == peer.id.description }
                let address = peer.address ?? seen?.address
                var line = "\(peer.name)\t\(peer.id.short)\ttrusted"
                line += "\t" + (address.map { "\($0)" + (peer.address == nil ? " (discovered)" : "") } ?? "no address")
                line += "\t" + (seen.map { "seen \(dates.string(from: $0.lastSeen))" } ?? "not heard")
                if let address {
                    line += "\t" + (reachable(address) ? "reachable" : "unreachable")
                }
                say(line)
            }
            for peer in heard where !trust.devices.contains(where: { $0.id.description == peer.id }) {
                say(
                    "\(ProgressReporter.neutralized(peer.name))\t\(peer.id.prefix(7))\tnot trusted\t\(peer.address)\tseen \(dates.string(from: peer.lastSeen))"
                )
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
