import ArgumentParser
import FoundationEssentials
import ShareText
import ShareCommandLine
import ShareKit
import ShareTLS
import ShareNet
import ShareTrust
import ShareProtocol
import ShareEngine
import ShareAgent

struct PairCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pair",
        abstract: "Pair with another device by comparing a short code.",
        discussion: helpPage(
            "Run share pair on one device: it waits (two minutes by default) and says so on the local network. Run share pair NAME on the other (or share pair HOST:PORT where the network does not carry the announcement). Both show the same 8-digit code; each user confirms it matches, and only then do the devices trust each other, each knowing where the other's agent listens. Each side commits to a secret before it sees the other's, so a device in the middle gets one guess in a hundred million per attempt; the waiting side stops after three failed attempts.",
            "Scripts confirm with --yes, which needs --expect and the other device's ID (learned from share id on it): nobody compares the codes then.",
            examples: [
                "share pair --team                 (on the desk)", "share pair desk --team            (on the laptop)",
                "share pair 192.168.1.20:40123 --group climbing", "share pair --yes --expect 5FTPM5D-ADMTWYP-… --team",
            ]))

    @OptionGroup var device: DeviceOptions

    @Argument(
        help: ArgumentHelp(
            "The waiting device: its name (found on the local network) or HOST:PORT.", valueName: "device"))
    var peer: String?

    @Option(help: "Port to wait on (default: 0, a free one).", transform: PortOption.listening)
    var port: Int = 0

    @Option(help: "Address to wait on.")
    var listen = "::"

    @Flag(help: "Confirm without asking, when the other device's ID is the one given with --expect (for scripts).")
    var yes = false

    @Option(help: ArgumentHelp("The other device's ID, learned from it beforehand (with --yes).", valueName: "id"))
    var expect: String?

    @Flag(help: "The other device is one of your own.")
    var team = false

    @Option(help: ArgumentHelp("The other device belongs to this group.", valueName: "name"))
    var group: String?

    @Flag(help: "With --team: the other device is your watch, and may attach to this device's agent.")
    var watch = false

    @Option(
        help: ArgumentHelp(
            "The port this device's agent listens on, told to the other device (default: the running agent's, else agent.json's, else one chosen now and saved there).",
            valueName: "port"), transform: PortOption.service)
    var agentPort: Int?

    @Option(help: "Seconds to wait for the other device (the pairing window).")
    var timeout: Double = 120

    @OptionGroup var discovery: PairingDiscoveryOptions

    func validate() throws {
        if team && group != nil { throw ValidationError("--team and --group exclude each other") }
        if watch && !team { throw ValidationError("--watch needs --team: a watch is one of your own devices") }
        if yes && expect == nil {
            throw ValidationError(
                "--yes needs --expect DEVICE-ID (the other device's ID, learned beforehand): otherwise nobody compares the codes"
            )
        }
        if let expect, (try? DeviceID(parsing: expect)) == nil {
            throw ValidationError("--expect '\(expect)' is not a device ID")
        }
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
    }

    func run() throws {
        try ShareCLI.run {
            let local = try device.loadDevice()
            var options = Pairing.Options()
            options.relation = team ? .team : group.map { .group($0) } ?? .trusted
            options.watch = watch
            options.agentPort = try agentPort ?? AgentPort.current(local.paths)
            options.decisionTimeout = timeout
            options.window = timeout
            options.announce = (discovery.discoveryPort, discovery.discoveryInterface)
            // The question on the terminal cannot be taken back: when the other device stops while this one's user
            // is asked, the command ends there with the reason.
            options.peerCancelled = {
                Console.writeOrLeave(
                    "\nshare: the other device cancelled pairing; nothing was trusted (run share pair again on both to retry)\n",
                    to: .error)
                Glibc.exit(ExitStatus.refused.rawValue)
            }
            // Ctrl-C, kill or a closed terminal end pairing at once (the other side hears of it within a second).
            Syscalls.exitOnInterrupt(
                writing: (Syscalls.stderrIsTerminal ? "\r\u{1B}[K" : "\n")
                    + "share: pairing cancelled; nothing was trusted\n",
                status: ExitStatus.interrupted.rawValue)
            if options.digits != 8 { complain("testing only: the pairing code has \(options.digits) digits") }
            let expected = try expect.map { try DeviceID(parsing: $0) }
            let yes = self.yes
            let confirm: Pairing.Confirm = { name, id, code in
                tell("pairing with \(name) (\(id))")
                tell("verification code: \(code)")
                if let expected {
                    guard id == expected else {
                        complain("the other device is \(id), not the expected \(expected); declined")
                        return false
                    }
                    if yes { return true }
                }
                TerminalProgress.endLine()
                Console.writeOrLeave("does the other device show the same code? [y/N] ", to: .error)
                let answer = readLine()?.trimmedSpaces.lowercased() ?? ""
                return answer == "y" || answer == "yes"
            }
            let outcome: Pairing.Outcome
            if let peer {
                let target: PeerAddress
                if let address = PeerAddress(parsing: peer) {
                    target = address
                } else {
                    tell("looking for \(peer) waiting to pair on this network…")
                    target = try Pairing.find(
                        name: peer, discoveryPort: discovery.discoveryPort, interface: discovery.discoveryInterface,
                        timeout: min(timeout, 15))
                }
                outcome = try Pairing.connect(device: local, to: target, options: options, confirm: confirm)
            } else {
                outcome = try Pairing.listen(
                    device: local, host: listen, port: port, options: options,
                    ready: { bound in
                        tell(
                            "waiting to pair on port \(bound) as \(local.name); on the other device run: share pair \(local.name) (or share pair HOST:\(bound))"
                        )
                    },
                    confirm: confirm)
            }
            tell(
                "paired: now trusting \(outcome.peer.name) (\(outcome.peer.id)) as \(outcome.peer.relation)"
                    + (outcome.peer.address.map { " at \($0)" } ?? ""))
        }
    }
}
