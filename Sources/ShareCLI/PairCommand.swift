import ArgumentParser
import Foundation
import ShareKit
import ShareTLS

struct PairCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pair",
        abstract: "Pair with another device by comparing a short code.",
        discussion: """
            Run `share pair` on one device; it prints the port it waits on. Run `share pair HOST:PORT` on the other.
            Both show the same 8-digit code; each user confirms it matches. Only when both confirm do the devices
            trust each other.
            """)

    @OptionGroup var device: DeviceOptions

    @Argument(help: ArgumentHelp("The waiting device, when this one connects.", valueName: "host:port"))
    var address: String?

    @Option(help: "Port to wait on (0 picks a free one).")
    var port = 0

    @Option(help: "Address to wait on.")
    var listen = "::"

    @Flag(help: "Confirm without asking (for scripts).")
    var yes = false

    @Flag(help: "The other device is one of your own.")
    var team = false

    @Option(help: ArgumentHelp("The other device belongs to this group.", valueName: "name"))
    var group: String?

    @Flag(help: "With --team: the other device is your watch, and may attach to this device's agent.")
    var watch = false

    @Option(help: ArgumentHelp("The port this device's agent listens on, told to the other device.", valueName: "port"))
    var agentPort: Int?

    @Option(help: "Seconds to wait for the other device.")
    var timeout: Double = 120

    func validate() throws {
        if team && group != nil { throw ValidationError("--team and --group exclude each other") }
        if watch && !team { throw ValidationError("--watch needs --team: a watch is one of your own devices") }
        if let address, PeerAddress(parsing: address) == nil { throw ValidationError("'\(address)' is not HOST:PORT") }
        if let agentPort, !(1...65535).contains(agentPort) { throw ValidationError("--agent-port must be 1–65535") }
    }

    func run() throws {
        try ShareCLI.run {
            let local = try device.loadDevice()
            var options = Pairing.Options()
            options.relation = team ? .team : group.map { .group($0) } ?? .trusted
            options.watch = watch
            options.agentPort = agentPort
            options.decisionTimeout = timeout
            let yes = self.yes
            let confirm: Pairing.Confirm = { name, id, code in
                say("pairing with \(name) (\(id))")
                say("verification code: \(code)")
                if yes { return true }
                FileHandle.standardOutput.write(Data("does the other device show the same code? [y/N] ".utf8))
                let answer = readLine()?.trimmingCharacters(in: .whitespaces).lowercased() ?? ""
                return answer == "y" || answer == "yes"
            }
            let outcome: Pairing.Outcome
            if let address, let target = PeerAddress(parsing: address) {
                outcome = try Pairing.connect(device: local, to: target, options: options, confirm: confirm)
            } else {
                outcome = try Pairing.listen(
                    device: local, host: listen, port: port, options: options, timeout: timeout,
                    ready: { bound in
                        say("waiting to pair on port \(bound); on the other device run: share pair HOST:\(bound)")
                    },
                    confirm: confirm)
            }
            say("paired: now trusting \(outcome.peer.name) (\(outcome.peer.id)) as \(outcome.peer.relation)")
        }
    }
}
