import CoreTransferable
import Foundation
import ShareArchive
import ShareKit
import ShareTestSupport
import Testing
import ShareTrust
import ShareReach
import ShareProtocol
import ShareEngine
import ShareAgent

extension EndToEnd {
    /// The agent receives while nobody watches: each trusted device's items in its own inbox folder, text in the
    /// history, several devices at once, and a hostile sender does not stop it.
    @Suite(.serialized) struct AgentInboxEndToEndTests {
        @Test func itemsFromTwoDevicesLandInTheirOwnFoldersAtOnce() throws {
            let desk = try TestDevice("desk")
            let laptop = try TestDevice("laptop")
            let phone = try TestDevice("phone")
            for other in [laptop, phone] {
                desk.trust(other)
                other.trust(desk)
            }
            let inbox = try desk.folder("inbox")
            let (agent, port) = try desk.startAgent(["--inbox", inbox.path])
            defer { agent.stop() }
            let big = try laptop.folder("src").appendingPathComponent("big.bin")
            try makeFile(big, size: 24 << 20)
            let folder = try sampleFolder(at: phone.directory.appendingPathComponent("Album"), bigFile: 5 << 20)
            let first = try laptop.background([
                "send", big.path, "--text", "from the laptop", "--to", "127.0.0.1:\(port)",
            ])
            let second = try phone.background([
                "send", folder.path, "--url", "https://example.com/a", "--to", "127.0.0.1:\(port)",
            ])
            #expect(first.wait(timeout: 60) == 0, "\(first.stderr.text)")
            #expect(second.wait(timeout: 60) == 0, "\(second.stderr.text)")
            #expect(try Data(contentsOf: inbox.appendingPathComponent("laptop/big.bin")) == Data(contentsOf: big))
            var expected = tree(folder)
            expected["outside"] = nil
            #expect(tree(inbox.appendingPathComponent("phone/Album")) == expected)
            let listed = desk.run(["inbox", "--inbox", inbox.path, "--json"])
            #expect(listed.status == 0)
            let lines = listed.stdout.split(separator: "\n").map(String.init)
            #expect(
                lines.contains { $0.contains("\"text\":\"from the laptop\"") && $0.contains("\"from\":\"laptop\"") })
            #expect(lines.contains { $0.contains("https://example.com/a") && $0.contains("\"from\":\"phone\"") })
            #expect(lines.contains { $0.contains("phone/Album") })
            // The history is private to the owner.
            let mode =
                try FileManager.default.attributesOfItem(atPath: inbox.appendingPathComponent("history.jsonl").path)[
                    .posixPermissions] as? Int
            #expect(mode == 0o600)
        }

        @Test func aHostileArchiveDoesNotStopTheAgent() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let (agent, port) = try desk.startAgent(["--inbox", inbox.path])
            defer { agent.stop() }
            let device = try LocalDevice.loadOrCreate(paths: DevicePaths.resolve(configOverride: laptop.config.path))
            let trust = try TrustStore.load(device.paths.trustFile)
            let plan = try ArchivePlan(entries: [
                ArchivePlan.Entry(
                    path: "../../escape.txt", kind: .file, size: 5, mode: 0o644, modified: 0,
                    source: .bytes(Data("evil\n".utf8)))
            ])
            let item = OutgoingItem(
                id: "hostile", label: "hostile",
                representations: [
                    OutgoingRepresentation(
                        offered: OfferedRepresentation(
                            contentType: UTType.tarArchive.identifier, kind: .archive, size: plan.streamSize,
                            suggestedFileName: "hostile")
                    ) { .archive(plan) }
                ])
            let session = SendSession(device: device, progress: ProgressReporter())
            let target = try PeerTarget.resolve("127.0.0.1:\(port)", trust: trust)
            let error = try #require(throws: ShareFailure.self) {
                try session.run(to: target, trust: trust) { _ in [item] }
            }
            #expect(error.code == .dataError && error.message.contains("../../escape.txt"), "\(error.message)")
            #expect(!FileManager.default.fileExists(atPath: desk.directory.appendingPathComponent("escape.txt").path))
            #expect(!FileManager.default.fileExists(atPath: inbox.appendingPathComponent("escape.txt").path))
            // Still serving: a ping and a real send go through.
            #expect(laptop.run(["ping", "127.0.0.1:\(port)"]).status == 0)
            #expect(laptop.run(["send", "--text", "still there?", "--to", "127.0.0.1:\(port)"]).status == 0)
            #expect(desk.run(["inbox", "--inbox", inbox.path]).stdout.contains("still there?"))
            #expect(agent.process.isRunning)
        }

        /// A device removed from the trust list while it sends into the inbox: its send is cut there and then (not
        /// left to finish), nothing lands, the sender ends with a failure, and the agent serves the others on.
        @Test func aSendFromADeviceNoLongerTrustedIsCut() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let phone = try TestDevice("phone")
            desk.trust(phone)
            phone.trust(desk)
            let inbox = try desk.folder("inbox")
            let (agent, port) = try desk.startAgent(["--inbox", inbox.path, "--no-discovery"])
            defer { agent.stop() }
            let big = try laptop.folder("src").appendingPathComponent("big.bin")
            try makeFile(big, size: 16 << 20)
            // Slowed to 200 KB/s: some 80 s to the end.
            let send = try laptop.background(
                ["send", big.path, "--to", "127.0.0.1:\(port)"],
                environment: ["SHARE_TEST_SEND_RATE": "200000"])
            defer { send.stop() }
            func received() -> Int {
                let paths = FileManager.default.subpaths(atPath: inbox.path) ?? []
                return paths.reduce(0) { total, path in
                    let size =
                        (try? FileManager.default.attributesOfItem(
                            atPath: inbox.appendingPathComponent(path).path))?[.size] as? Int
                    return total + (path.hasSuffix(".jsonl") ? 0 : size ?? 0)
                }
            }
            #expect(waitUntil(timeout: 30) { received() > 1 << 20 }, "\(agent.stderr.text)")
            #expect(desk.run(["trust", "remove", "laptop"]).status == 0)
            // Cut within a second or two (10 s allowed for a busy machine); without the cut it would take a minute.
            let status = send.wait(timeout: 10)
            // Told why (the desk's policy), not to run the command again: that would be refused too.
            #expect(status == 3, "\(send.stderr.text)\n\(agent.stderr.text)")
            #expect(send.stderr.text.contains("desk does not know this device"), "\(send.stderr.text)")
            #expect(!send.stderr.text.contains("run the same command again"), "\(send.stderr.text)")
            #expect(agent.stderr.waitForLine(containing: "session cut", timeout: 5) != nil, "\(agent.stderr.text)")
            #expect(!FileManager.default.fileExists(atPath: inbox.appendingPathComponent("laptop/big.bin").path))
            // The others are served as before.
            #expect(phone.run(["send", "--text", "still here", "--to", "127.0.0.1:\(port)"]).status == 0)
            #expect(desk.run(["inbox", "--inbox", inbox.path]).stdout.contains("still here"))
            #expect(agent.process.isRunning)
        }
    }
}
