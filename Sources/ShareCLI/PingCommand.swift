import ArgumentParser
import FoundationEssentials
import ShareText
import ShareKit
import ShareTrust
import ShareReach
import ShareProtocol
import ShareEngine
import ShareAgent

struct PingCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ping", abstract: "Connect to a device, authenticate, and measure the round trip.",
        discussion: helpPage(
            "Prints the device's name, ID and address, whether the session went direct or through a relay, the protocol and TLS versions, the time to set up the session and each round trip. Beyond the LAN the device is found through the discovery servers and relays in agent.json (see: share servers).",
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
            let reach = try ReachSettings.load(local.paths)
            let target = try PeerTarget.resolve(peer, device: local, trust: trust, beyondLAN: !reach.isEmpty)
            let session = try Reach.connect(
                from: local, to: target, trust: trust, hello: PingClient.hello(local),
                timeouts: SessionTimeouts(connect: timeout, handshake: timeout, idle: timeout), settings: reach)
            let result = try PingClient.ping(session, device: local, place: target.place, count: count)
            let name = trust.device(result.peerID)?.name ?? result.peerName
            say(
                "\(name) (\(result.peerID)) "
                    + (result.route == .direct ? "at \(result.address), direct" : "\(result.route) (\(result.address))")
            )
            say(
                "protocol \(result.protocolVersion), \(result.role), \(result.tls), connected in \(ms(result.setupSeconds))"
            )
            for (index, trip) in result.roundTrips.enumerated() {
                say("ping \(index + 1): round trip \(ms(trip))")
            }
        }
    }

    private func ms(_ seconds: Double) -> String { Format.c("%.2f ms", seconds * 1000) }
}
