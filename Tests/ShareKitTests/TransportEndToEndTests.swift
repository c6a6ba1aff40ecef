import Foundation
import Testing

extension EndToEnd {
    /// Two (or three) devices on loopback, driven only through the `share` binary.
    @Suite(.serialized) struct TransportEndToEndTests {
        @Test func trustedPingWorksAndPrintsThePeer() throws {
            let desk = try TestDevice("desk")
            let laptop = try TestDevice("laptop")
            desk.trust(laptop, flags: ["--team"])
            let (agent, port) = try desk.startAgent()
            defer { agent.stop() }
            laptop.trust(desk, address: "127.0.0.1:\(port)")
            let result = laptop.run(["ping", "desk", "--count", "2"])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.contains("desk (\(desk.id)) at 127.0.0.1:\(port)"))
            #expect(result.stdout.contains("protocol 4, agent, TLSv1.3"))
            #expect(result.stdout.contains("ping 2: round trip"))
            // IPv6 loopback too, by address (one agent per device: the first one stops).
            agent.stop()
            let agent6 = try desk.background(["agent", "--port", "0", "--listen", "::1"])
            defer { agent6.stop() }
            let line = try #require(agent6.stderr.waitForLine(containing: "listening on port", timeout: 30))
            let port6 = try #require(TestDevice.port(in: line))
            #expect(laptop.run(["ping", "[::1]:\(port6)"]).status == 0)
        }

        @Test func untrustedPingIsRefusedOnBothSides() throws {
            let desk = try TestDevice("desk")
            let stranger = try TestDevice("stranger")
            let (agent, port) = try desk.startAgent()
            defer { agent.stop() }
            stranger.trust(desk, address: "127.0.0.1:\(port)")
            let result = stranger.run(["ping", "desk"])
            #expect(result.status == 77)
            #expect(result.stderr.contains("on that device run: share trust add \(stranger.id)"))
            #expect(agent.stderr.waitForLine(containing: "device \(stranger.id) is not trusted", timeout: 10) != nil)

            // The other way round: the client does not trust the agent.
            let other = try TestDevice("other")
            desk.trust(other)
            let reverse = other.run(["ping", "127.0.0.1:\(port)"])
            #expect(reverse.status == 77)
            #expect(
                reverse.stderr.contains("device \(desk.id) is not trusted; to trust it run: share trust add \(desk.id)")
            )
            // The listener keeps serving everyone else.
            let friend = try TestDevice("friend")
            desk.trust(friend)
            friend.trust(desk, address: "127.0.0.1:\(port)")
            #expect(friend.run(["ping", "desk"]).status == 0)
        }

        @Test func tamperedTrustFileIsReportedAndLeftAlone() throws {
            let a = try TestDevice("alpha")
            let b = try TestDevice("beta")
            a.trust(b, address: "127.0.0.1:9")
            let file = a.config.appendingPathComponent("trust.json")
            var text = try String(contentsOf: file, encoding: .utf8)
            text = text.replacingOccurrences(of: "\"relation\"", with: "\"relation\" :: ")
            try text.write(to: file, atomically: true, encoding: .utf8)
            for command in [["ping", "beta"], ["trust", "list"], ["trust", "add", b.id, "--name", "x"]] {
                let result = a.run(command)
                #expect(result.status == 65, "\(command)")
                #expect(result.stderr.contains("trust store \(file.path) is corrupt"))
                #expect(result.stderr.split(separator: "\n").count == 1)
            }
            #expect(try String(contentsOf: file, encoding: .utf8) == text)
            // A flipped byte in an ID is caught by its check character.
            let id = b.id
            var flipped = Array(id)
            flipped[3] = flipped[3] == "A" ? "B" : "A"
            let stored = text.replacingOccurrences(of: "\"relation\" :: ", with: "\"relation\"").replacingOccurrences(
                of: id, with: String(flipped))
            try stored.write(to: file, atomically: true, encoding: .utf8)
            let result = a.run(["trust", "list"])
            #expect(result.status == 65)
            #expect(result.stderr.contains("mistyped") || result.stderr.contains("check character"))
        }

        @Test func keysAndFoldersArePrivate() throws {
            let a = try TestDevice("alpha")
            let attributes = { (path: String) in
                try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            }
            #expect(try attributes(a.config.path) == 0o700)
            #expect(try attributes(a.config.appendingPathComponent("key.pem").path) == 0o600)
            let b = try TestDevice("beta")
            a.trust(b)
            #expect(try attributes(a.config.appendingPathComponent("trust.json").path) == 0o600)
            // A missing certificate is an error, never a silently new identity.
            let before = a.id
            try FileManager.default.removeItem(at: a.config.appendingPathComponent("cert.pem"))
            let result = a.run(["id"])
            #expect(result.status == 78)
            #expect(result.stderr.contains("cert.pem is missing"))
            #expect(!FileManager.default.fileExists(atPath: a.config.appendingPathComponent("cert.pem").path))
            _ = before
        }

        @Test func badArgumentsGiveOneLineAndADocumentedCode() throws {
            let a = try TestDevice("alpha")
            let badID = a.run(["trust", "add", "NOT-AN-ID"])
            #expect(badID.status == 65)
            #expect(badID.stderr.contains("is not a device ID"))
            let unknownFlag = a.run(["ping", "x", "--frobnicate"])
            #expect(unknownFlag.status == 64)
            let unknownPeer = a.run(["ping", "nobody"])
            #expect(unknownPeer.status == 64)
            #expect(
                unknownPeer.stderr.contains("no trusted device is called")
                    && unknownPeer.stderr.contains("and it is not HOST:PORT"))
            let closedPort = a.run(["ping", "127.0.0.1:1", "--timeout", "2"])
            #expect(closedPort.status == 69)
            #expect(closedPort.stderr.contains("cannot reach 127.0.0.1:1"))
            let help = a.run(["--help"])
            #expect(help.stdout.contains("Exit codes:") && help.stdout.contains("77  not trusted"))
        }
    }
}
