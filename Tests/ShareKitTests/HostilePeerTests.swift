import Foundation
import ShareProtocol
import ShareTestSupport
import Testing

extension EndToEnd {
    /// A trusted peer that breaks the protocol: each misbehaviour is answered with a clear error, the receiver exits
    /// with a protocol error, and nothing is saved.
    @Suite(.serialized) struct HostilePeerTests {
        static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/hostile_peer.py")

        @Test(arguments: [
            ("lying-size", "bad-message"), ("past-end", "bad-message"), ("duplicate", "bad-message"),
            ("out-of-order", "bad-message"), ("bad-chunk-digest", "digest-mismatch"),
            ("wrong-done-digest", "digest-mismatch"), ("done-too-early", "bad-message"),
            ("oversized-frame", "frame-too-large"), ("unknown-frame", "bad-frame"), ("garbage-offer", "bad-message"),
        ])
        func misbehaviourIsRefused(scenario: String, code: String) throws {
            let desk = try TestDevice("desk")
            let hostile = try TestDevice("hostile")
            desk.trust(hostile)
            let inbox = try desk.folder("inbox")
            let (receiver, port) = try desk.startReceive(into: inbox)
            defer { receiver.stop() }
            let result = runTool(
                "/usr/bin/python3",
                [
                    Self.script.path, "\(port)", hostile.config.appendingPathComponent("cert.pem").path,
                    hostile.config.appendingPathComponent("key.pem").path, scenario,
                ])
            #expect(result.output.contains("error \(code)"), "\(scenario): \(result.output)")
            #expect(receiver.wait(timeout: 30) == 76, "\(scenario): \(receiver.stderr.text)")
            #expect(failureLines(receiver.stderr.text).count == 1, "\(receiver.stderr.text)")
            let saved = try FileManager.default.contentsOfDirectory(atPath: inbox.path).filter {
                $0 != ".share-partial"
            }
            #expect(saved.isEmpty)
        }

        /// The same misbehaviour, every scenario in a row, against one running agent: each session is refused with
        /// its rule, nothing lands outside the inbox, and an honest device is served throughout.
        @Test func anAgentRefusesEveryMisbehaviourAndKeepsServingOthers() throws {
            let desk = try TestDevice("desk")
            let hostile = try TestDevice("hostile")
            let laptop = try TestDevice("laptop")
            desk.trust(hostile)
            desk.trust(laptop)
            let inbox = try desk.folder("inbox")
            let (agent, port) = try desk.startAgent(["--inbox", inbox.path, "--no-discovery"])
            defer { agent.stop() }
            laptop.trust(desk, address: "127.0.0.1:\(port)")
            let besideInbox = try FileManager.default.contentsOfDirectory(atPath: desk.directory.path).sorted()
            let scenarios = [
                ("lying-size", "bad-message"), ("past-end", "bad-message"), ("duplicate", "bad-message"),
                ("out-of-order", "bad-message"), ("bad-chunk-digest", "digest-mismatch"),
                ("wrong-done-digest", "digest-mismatch"), ("done-too-early", "bad-message"),
                ("oversized-frame", "frame-too-large"), ("unknown-frame", "bad-frame"),
                ("garbage-offer", "bad-message"),
            ]
            for (scenario, code) in scenarios {
                let result = runTool(
                    "/usr/bin/python3",
                    [
                        Self.script.path, "\(port)", hostile.config.appendingPathComponent("cert.pem").path,
                        hostile.config.appendingPathComponent("key.pem").path, scenario,
                    ])
                // The agent keeps what earlier sessions verified, so a later scenario may trip an earlier rule (a
                // chunk it already holds); every one is refused with an error.
                #expect(result.output.contains("error "), "\(scenario) (\(code)): \(result.output)")
                #expect(laptop.run(["ping", "desk"]).status == 0, "after \(scenario)")
            }
            let note = try laptop.folder("src").appendingPathComponent("note.bin")
            try Data("still here".utf8).write(to: note)
            let sent = laptop.run(["send", "--direct", note.path, "--to", "desk"])
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(
                try String(contentsOf: inbox.appendingPathComponent("laptop/note.bin"), encoding: .utf8) == "still here"
            )
            // Nothing from the hostile device was saved, and nothing appeared beside the inbox.
            let fromHostile = inbox.appendingPathComponent("hostile")
            let saved = ((try? FileManager.default.contentsOfDirectory(atPath: fromHostile.path)) ?? []).filter {
                $0 != ".share-partial"
            }
            #expect(saved.isEmpty, "\(saved)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: desk.directory.path).sorted() == besideInbox)
        }

        @Test func aNewerPeerGetsAClearVersionError() throws {
            let desk = try TestDevice("desk")
            let hostile = try TestDevice("hostile")
            desk.trust(hostile)
            let (agent, port) = try desk.startAgent()
            defer { agent.stop() }
            let result = runTool(
                "/usr/bin/python3",
                [
                    Self.script.path, "\(port)", hostile.config.appendingPathComponent("cert.pem").path,
                    hostile.config.appendingPathComponent("key.pem").path, "newer-version",
                ])
            #expect(
                result.output.contains("error version the peer speaks share protocol 99, this device speaks 2"),
                "\(result.output)")
        }

        /// A device of the previous protocol version asks to pair: it is told to update, and nothing is trusted.
        @Test func aVersionOnePeerCannotPair() throws {
            let desk = try TestDevice("desk")
            let old = try TestDevice("old")
            let waiting = try desk.background(["pair", "--listen", "127.0.0.1"], interactive: true)
            defer { waiting.stop() }
            let line = try #require(waiting.stderr.waitForLine(containing: "waiting to pair on port", timeout: 30))
            let port = try #require(
                line.split(separator: " ").dropFirst(5).first.flatMap {
                    Int($0.trimmingCharacters(in: .punctuationCharacters))
                })
            let result = runTool(
                "/usr/bin/python3",
                [
                    Self.script.path, "\(port)", old.config.appendingPathComponent("cert.pem").path,
                    old.config.appendingPathComponent("key.pem").path, "version-1-pairing",
                ])
            #expect(
                result.output.contains(
                    "error version the peer speaks share protocol 1, this device speaks \(Limits.oldestProtocolVersion)–\(Limits.protocolVersion); update share on the other device"
                ),
                "\(result.output)")
            waiting.stop()
            #expect(desk.run(["trust", "list", "--json"]).stdout.isEmpty)
        }

        /// A trusted device that ends every folder link opened to it (closes it, or refuses it) gets no loop of
        /// handshakes: the first end is followed by a new link at once (a folder accepted there makes every link
        /// again), the next ones after 1, 2, 4 … seconds (links at about 0, 0, 1, 3 and 7 s of the 10 s the device
        /// counts from the first).
        @Test(arguments: ["close", "refuse"])
        func aDeviceThatEndsEveryFolderLinkIsLinkedLessAndLessOften(how: String) throws {
            let desk = try TestDevice("desk")
            let hostile = try TestDevice("hostile")
            let port = freePort()
            desk.trust(hostile, address: "127.0.0.1:\(port)", flags: ["--team"])
            let script = Self.script.deletingLastPathComponent().appendingPathComponent("hostile_link_peer.py")
            let peer = try BackgroundShare(
                [
                    script.path, "\(port)", hostile.config.appendingPathComponent("cert.pem").path,
                    hostile.config.appendingPathComponent("key.pem").path, "10", how,
                ], executable: URL(fileURLWithPath: "/usr/bin/python3"))
            defer { peer.stop() }
            #expect(peer.stdout.waitForLine(containing: "listening", timeout: 20) != nil, "\(peer.stderr.text)")
            let (agent, _) = try desk.startAgent(["--no-discovery"])
            defer { agent.stop() }
            let added = desk.run(["sync", "add", try desk.folder("thesis").path, "--with", "hostile"])
            #expect(added.status == 0, "\(added.stderr)")
            #expect(peer.wait(timeout: 90) == 0, "\(peer.stderr.text)")
            let links = peer.stdout.text.split(separator: "\n").first { $0.hasPrefix("links ") }
                .flatMap { Int($0.dropFirst(6)) }
            let logs = agent.stderr.text.split(separator: "\n").suffix(20).joined(separator: "\n")
            // Linked again after the first end (at once) and after the second (a second later)…
            #expect((links ?? 0) >= 3, "\(peer.stdout.text)\n\(logs)")
            // …and never in a loop: one link a second would be 10.
            #expect((links ?? 99) <= 6, "\(peer.stdout.text)\n\(logs)")
        }

        @Test func aTricklingPeerIsCutOffByTheHandshakeDeadline() throws {
            let desk = try TestDevice("desk")
            let hostile = try TestDevice("hostile")
            desk.trust(hostile)
            let (agent, port) = try desk.startAgent(["--handshake-timeout", "3"])
            defer { agent.stop() }
            let result = runTool(
                "/usr/bin/python3",
                [
                    Self.script.path, "\(port)", hostile.config.appendingPathComponent("cert.pem").path,
                    hostile.config.appendingPathComponent("key.pem").path, "trickle",
                ], timeout: 60)
            let seconds = result.output.split(separator: " ").dropFirst(2).first.flatMap { Double($0) } ?? 99
            #expect(seconds < Patience.seconds(15), "\(result.output)")
        }

        @Test func tenThousandItemsInOneOfferAreNegotiated() throws {
            let desk = try TestDevice("desk")
            let hostile = try TestDevice("hostile")
            desk.trust(hostile)
            let inbox = try desk.folder("inbox")
            let (receiver, port) = try desk.startReceive(["--quiet"], into: inbox)
            defer { receiver.stop() }
            let result = runTool(
                "/usr/bin/python3",
                [
                    Self.script.path, "\(port)", hostile.config.appendingPathComponent("cert.pem").path,
                    hostile.config.appendingPathComponent("key.pem").path, "ten-thousand-items",
                ])
            #expect(result.output.contains("select"), "\(result.output)")
            #expect(receiver.wait(timeout: 60) == 75)
        }
    }
}
