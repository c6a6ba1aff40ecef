import ArgumentParser
import Foundation
import ShareKit

struct PingCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ping", abstract: "Connect to a device, authenticate, and measure the round trip.",
        discussion: helpPage(
            "Prints the device's name, ID and address, the protocol and TLS versions, the time to set up the session and each round trip.",
            examples: ["share ping desk", "share ping 192.168.1.20:7001 --count 5"]))

    @OptionGroup var device: DeviceOptions

    @Argument(help: ArgumentHelp("A trusted device's name or ID, or HOST:PORT.", valueName: "peer"))
    var peer: String

    @Option(help: "Number of pings.")
    var count = 1

    @Option(help: "Seconds to wait for connect and handshake.")
    var timeout: Double = 10

    func validate() throws {
        guard (1...1000).contains(count) else { throw ValidationError("--count must be 1–1000") }
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
    }

    func run() throws {
        try ShareCLI.run {
            let local = try device.loadDevice()
            let trust = try device.loadTrust()
            let target = try PeerTarget.resolve(peer, device: local, trust: trust)
            let result = try PingClient.ping(
                device: local, target: target, trust: trust, count: count,
                timeouts: SessionTimeouts(connect: timeout, handshake: timeout, idle: timeout))
            let name = trust.device(result.peerID)?.name ?? result.peerName
            say("\(name) (\(result.peerID)) at \(target.address)")
            say(
                "protocol \(result.protocolVersion), \(result.role), \(result.tls), connected in \(ms(result.setupSeconds))"
            )
            for (index, trip) in result.roundTrips.enumerated() {
                say("ping \(index + 1): round trip \(ms(trip))")
            }
        }
    }

    private func ms(_ seconds: Double) -> String { String(format: "%.2f ms", seconds * 1000) }
}
