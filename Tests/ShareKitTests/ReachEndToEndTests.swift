import Foundation
import Testing

extension EndToEnd {
    /// Two devices in different homes behind NAT, and Syncthing's own servers (`stdiscosrv`, `strelaysrv`, from
    /// Debian) on the simulated internet between them (`SimulatedInternet`). The laptop knows only the discovery
    /// server and the desk's ID; the desk's agent announces itself there and stays joined to the relay.
    @Suite(.serialized) struct ReachEndToEndTests {
        static let mebibytes = 256

        func sha256(_ file: URL) -> String { String(runTool("/usr/bin/sha256sum", [file.path]).output.prefix(64)) }

        /// A `share` command run inside `namespace`, to its end.
        func run(
            _ device: TestDevice, _ net: SimulatedInternet, _ namespace: String, _ arguments: [String],
            timeout: Double = 120
        ) throws -> CommandResult {
            let process = try BackgroundShare(device.withConfig(arguments), wrapper: net.wrapper(namespace))
            let status = process.wait(timeout: timeout) ?? -9
            return CommandResult(status: status, stdout: process.stdout.text, stderr: process.stderr.text)
        }

        /// The chunks the desk holds of the partial in `folder`, once that number has stopped changing (the agent
        /// flushes its ledger when the session ends).
        func settledLedger(_ folder: URL) -> Int {
            var last = -1
            _ = waitUntil(timeout: 30) {
                let now = ledgerChunkCount(folder)
                defer { last = now }
                if now == last { return true }
                Thread.sleep(forTimeInterval: 0.5)
                return false
            }
            return last
        }

        /// How many times the agent's log says `text`.
        func count(_ agent: BackgroundShare, _ text: String) -> Int {
            agent.stderr.text.components(separatedBy: text).count - 1
        }

        @Test func theLaptopReachesTheDeskThroughDiscoveryAndTheRelayAndResumesAcrossPaths() throws {
            guard SyncthingServers.available, let net = try SimulatedInternet.make() else { return }
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")  // trusted both ways, no address known
            let servers = SyncthingServers(net: net, folder: try desk.folder("servers"))
            try servers.startDiscovery()
            // The relay's per-session limit keeps a 256 MiB transfer on it for about four seconds, long enough to
            // cut it in the middle.
            try servers.startRelay(rate: 64 << 20)
            #expect(laptop.run(["servers", "add", servers.discoveryURL]).status == 0)
            #expect(desk.run(["servers", "add", servers.discoveryURL]).status == 0)
            #expect(desk.run(["servers", "add", servers.relayURL]).status == 0)
            #expect(desk.run(["servers", "add", "relay://203.0.113.10:22067"]).status == 64, "a relay without an id")

            let inbox = try desk.folder("inbox")
            let agent = try BackgroundShare(
                desk.withConfig([
                    "agent", "--port", "0", "--listen", "0.0.0.0", "--no-discovery", "--inbox", inbox.path,
                ]),
                wrapper: net.wrapper(net.desk))
            defer { agent.stop() }
            let started = try #require(agent.stderr.waitForLine(containing: "listening on port", timeout: 30))
            let deskPort = try #require(TestDevice.port(in: started))
            #expect(
                agent.stderr.waitForLine(containing: "joined the relay", timeout: 30) != nil, "\(agent.stderr.text)")
            #expect(
                waitUntil(timeout: 30) { agent.stderr.text.contains("relay://203.0.113.10") }, "\(agent.stderr.text)")
            let status = try run(desk, net, net.desk, ["status"])
            #expect(status.stdout.contains("relay: joined 203.0.113.10:22067"), "\(status.stdout)")
            #expect(status.stdout.contains("discovery: 203.0.113.10:8443 announced"), "\(status.stdout)")

            // The desk's announced address does not answer at all (its router drops the attempt): the relay, tried
            // after the direct attempt's one-second head start, answers long before the 10 s connect timeout.
            try net.dropSilently(port: deskPort)
            let pingStarted = Date()
            let relayedPing = try run(laptop, net, net.laptop, ["ping", "desk"])
            let pingSeconds = Date().timeIntervalSince(pingStarted)
            #expect(relayedPing.status == 0, "\(relayedPing.stderr)")
            #expect(relayedPing.stdout.contains("via relay 203.0.113.10"), "\(relayedPing.stdout)")
            #expect(pingSeconds < 6, "the relay waited \(pingSeconds) s behind a silent address")
            print("ping through the relay behind a silent address took \(String(format: "%.2f", pingSeconds)) s")

            // By name, found through discovery, carried by the relay; the relay connection is cut in the middle.
            let file = try laptop.folder("src").appendingPathComponent("big.bin")
            try makeFile(file, size: Self.mebibytes << 20)
            let sending = try BackgroundShare(
                laptop.withConfig(["send", "--direct", "--json", "--to", "desk", file.path]),
                wrapper: net.wrapper(net.laptop))
            let arrived = inbox.appendingPathComponent("laptop")
            #expect(
                waitUntil(timeout: 60) { ledgerChunkCount(arrived) >= 40 },
                "\(sending.stdout.text)\(sending.stderr.text)\(agent.stderr.text)")
            servers.stopRelay()
            let cut = sending.wait(timeout: 60)
            #expect(cut == 75, "exit \(String(describing: cut)): \(sending.stderr.text)")
            #expect(sending.stdout.text.contains("via relay 203.0.113.10") || sending.stderr.text.contains("relay"))
            #expect(waitUntil(timeout: 30) { agent.stderr.text.contains("not joined to the relay") })
            let held = settledLedger(arrived)
            #expect(held >= 40 && held < Self.mebibytes, "held \(held)")

            // The desk's port is opened on its router: the resume takes the direct path, and sends only what the
            // desk lacks.
            try net.forward(port: deskPort)
            let resumed = try run(laptop, net, net.laptop, ["send", "--direct", "--json", "--to", "desk", file.path])
            #expect(resumed.status == 0, "\(resumed.stderr)")
            let report = try #require(summary(resumed.stdout), "\(resumed.stdout)")
            #expect(report["route"] as? String == "direct", "\(report)")
            let already = (report["bytesAlreadyThere"] as? Int) ?? -1
            let sent = (report["bytesSent"] as? Int) ?? -1
            #expect(already == held << 20, "already \(already), held \(held) MiB")
            #expect(sent <= (Self.mebibytes - held + 1) << 20, "resent more than one chunk: \(sent)")
            #expect(sha256(arrived.appendingPathComponent("big.bin")) == sha256(file))
            print(
                "relay cut after \(held) of \(Self.mebibytes) MiB; resumed \(report["route"] ?? "?"): \(sent) bytes sent, \(already) already there"
            )
            let ping = try run(laptop, net, net.laptop, ["ping", "desk"])
            #expect(ping.status == 0 && ping.stdout.contains("192.0.2.2:\(deskPort), direct"), "\(ping.stdout)")

            // The other way: a direct transfer is cut, the port closes, and the resume goes through the relay.
            try servers.startRelay()
            let joins = count(agent, "joined the relay")
            #expect(waitUntil(timeout: 90) { count(agent, "joined the relay") >= 2 }, "joins \(joins)")
            let second = try laptop.folder("src").appendingPathComponent("second.bin")
            try makeFile(second, size: Self.mebibytes << 20)
            let direct = try BackgroundShare(
                laptop.withConfig(["send", "--direct", "--to", "desk", second.path]), wrapper: net.wrapper(net.laptop))
            #expect(waitUntil(timeout: 60) { ledgerChunkCount(arrived) >= 8 }, "\(direct.stderr.text)")
            kill(direct.pid, SIGKILL)
            _ = direct.wait(timeout: 10)
            try net.closeForwards()
            let heldDirect = settledLedger(arrived)
            let relayed = try run(laptop, net, net.laptop, ["send", "--direct", "--json", "--to", "desk", second.path])
            #expect(relayed.status == 0, "\(relayed.stderr)")
            let relayedReport = try #require(summary(relayed.stdout), "\(relayed.stdout)")
            #expect(relayedReport["route"] as? String == "via relay 203.0.113.10", "\(relayedReport)")
            #expect((relayedReport["bytesAlreadyThere"] as? Int ?? 0) >= heldDirect << 20 - (1 << 20))
            #expect(sha256(arrived.appendingPathComponent("second.bin")) == sha256(second))
            print(
                "direct cut after \(heldDirect) MiB; resumed \(relayedReport["route"] ?? "?"): \(relayedReport["bytesSent"] ?? "?") bytes sent, \(relayedReport["bytesAlreadyThere"] ?? "?") already there"
            )

            // A job queued with the laptop's own agent takes the same paths.
            let laptopAgent = try BackgroundShare(
                laptop.withConfig(["agent", "--port", "0", "--listen", "0.0.0.0", "--no-discovery"]),
                wrapper: net.wrapper(net.laptop))
            defer { laptopAgent.stop() }
            #expect(laptopAgent.stderr.waitForLine(containing: "listening on port", timeout: 30) != nil)
            let queued = try run(laptop, net, net.laptop, ["send", "--to", "desk", "--text", "queued", "--wait"])
            #expect(queued.status == 0, "\(queued.stderr)")
            let history = inbox.appendingPathComponent("history.jsonl")
            #expect(
                waitUntil(timeout: 30) {
                    (try? String(contentsOf: history, encoding: .utf8))?.contains("queued") == true
                })
            laptopAgent.stop()

            // An untrusted device that asks the relay for the desk gets nothing but a refused handshake; the desk
            // declines the invitation before connecting anything.
            let eve = try TestDevice("eve")
            eve.trust(desk)
            #expect(eve.run(["servers", "add", servers.discoveryURL]).status == 0)
            let before = try FileManager.default.contentsOfDirectory(atPath: inbox.path)
            let refused = try run(
                eve, net, net.laptop, ["send", "--direct", "--text", "hi", "--to", "desk", "--timeout", "4"])
            #expect(refused.status != 0, "\(refused.stderr)")
            #expect(failureLines(refused.stderr).count == 1, "\(refused.stderr)")
            #expect(
                waitUntil(timeout: 10) {
                    agent.stderr.text.contains("declined a relayed session from a device that is not trusted")
                })
            #expect(try FileManager.default.contentsOfDirectory(atPath: inbox.path) == before)

            // A relay that is down is named in the one line the sender gets (the laptop now lists it itself).
            #expect(laptop.run(["servers", "add", servers.relayURL]).status == 0)
            servers.stopRelay()
            let down = try run(
                laptop, net, net.laptop, ["send", "--direct", "--text", "hi", "--to", "desk", "--timeout", "3"])
            #expect(down.status == 69, "\(down.stderr)")
            #expect(down.stderr.contains("relay 203.0.113.10:22067"), "\(down.stderr)")
            #expect(failureLines(down.stderr).count == 1, "\(down.stderr)")
        }
    }
}
