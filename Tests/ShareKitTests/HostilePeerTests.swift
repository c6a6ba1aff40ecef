import Foundation
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
            #expect(receiver.stderr.text.split(separator: "\n").count == 1, "\(receiver.stderr.text)")
            let saved = try FileManager.default.contentsOfDirectory(atPath: inbox.path).filter {
                $0 != ".share-partial"
            }
            #expect(saved.isEmpty)
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
                result.output.contains("error version the peer speaks share protocol 99, this device speaks 1"),
                "\(result.output)")
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
            #expect(seconds < 15, "\(result.output)")
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
