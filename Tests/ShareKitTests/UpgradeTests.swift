import Foundation
import Testing

extension EndToEndAgents {
    /// Files written by the version before the transfer-engine change (`Fixtures/upgrade`, made by its
    /// `make-fixtures.sh` with that version): a trust store, watches an agent had seen (the owner's watch, and a friend
    /// that attached when any device could), outbox jobs (one keeping an item for the watch, one for the laptop) and
    /// a half-received partial. The current binaries start from them and lose nothing.
    @Suite(.serialized) struct UpgradeTests {
        static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/upgrade")

        /// The fixtures copied to a scratch folder, with the machine-specific parts put back: paths and the
        /// partial's source version (the source is regenerated here).
        func copy() throws -> (root: URL, source: URL, version: String) {
            let root = FileManager.default.temporaryDirectory.appendingPathComponent(
                "share-upgrade-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            for name in ["desk", "laptop", "watch", "friend", "inbox"] {
                try FileManager.default.copyItem(
                    at: Self.fixtures.appendingPathComponent(name), to: root.appendingPathComponent(name))
            }
            let source = root.appendingPathComponent("big.txt")
            let made = runTool(
                "/usr/bin/python3", [Self.fixtures.appendingPathComponent("source.py").path, source.path])
            #expect(made.status == 0, "\(made.output)")
            let version = "same-file-as-before"
            for path in try FileManager.default.subpathsOfDirectory(atPath: root.path) where path.hasSuffix(".json") {
                let url = root.appendingPathComponent(path)
                let text = try String(contentsOf: url, encoding: .utf8)
                let fixed = text.replacingOccurrences(of: "@ROOT@", with: root.path)
                    .replacingOccurrences(of: "@VERSION@", with: version)
                if fixed != text { try fixed.write(to: url, atomically: true, encoding: .utf8) }
            }
            for name in ["desk", "laptop", "watch", "friend"] {
                chmod(root.appendingPathComponent(name).path, 0o700)
                chmod(root.appendingPathComponent("\(name)/key.pem").path, 0o600)
            }
            return (root, source, version)
        }

        @Test func aTrustStoreJobsAndAPartialWrittenBeforeKeepWorking() throws {
            let (root, source, version) = try copy()
            defer { try? FileManager.default.removeItem(at: root) }
            let desk = TestDevice(existing: root.appendingPathComponent("desk"), name: "desk")
            let laptop = TestDevice(existing: root.appendingPathComponent("laptop"), name: "laptop")
            let watch = TestDevice(existing: root.appendingPathComponent("watch"), name: "watch")
            let friend = TestDevice(existing: root.appendingPathComponent("friend"), name: "friend")
            let inbox = root.appendingPathComponent("inbox")
            // The trust store reads as it was.
            let listed = desk.run(["trust", "list"]).stdout
            #expect(listed.contains("laptop") && listed.contains("watch") && listed.contains("friend"), "\(listed)")

            // The laptop's agent is where the desk's queued job goes.
            let (laptopAgent, laptopPort) = try laptop.startAgent(["--no-discovery"])
            defer { laptopAgent.stop() }
            desk.trust(laptop, address: "127.0.0.1:\(laptopPort)")
            let (deskAgent, deskPort) = try desk.startAgent(["--inbox", inbox.path, "--no-discovery"])
            defer { deskAgent.stop() }
            // The owner's watch that attached before is a watch now; the friend that attached before is not.
            let upgraded = desk.run(["trust", "list"]).stdout
            #expect(upgraded.contains("watch\t") && upgraded.contains("team (watch)"), "\(upgraded)")
            #expect(!upgraded.split(separator: "\n").contains { $0.hasPrefix("friend") && $0.contains("(watch)") })
            #expect(
                waitUntil(timeout: 60) {
                    laptop.run(["inbox"]).stdout.contains("queued before the upgrade")
                }, "the job queued before the upgrade was delivered")

            // The watch attaches and gets what was kept for it before the upgrade.
            watch.trust(desk, address: "127.0.0.1:\(deskPort)")
            let attached = try watch.background(["watch", "--agent", "desk", "--json"])
            defer { attached.stop() }
            #expect(
                attached.stdout.waitForLine(containing: "kept for the watch before the upgrade", timeout: 60) != nil)
            friend.trust(desk, address: "127.0.0.1:\(deskPort)")
            let posing = try friend.background(["watch", "--agent", "desk", "--json"])
            defer { posing.stop() }
            #expect(posing.stdout.waitForLine(containing: "\"event\":\"attached\"", timeout: 5) == nil)

            // The partial resumes: the receiver says it holds 8 chunks, and the file completes identical.
            let sent = runTool(
                "/usr/bin/python3",
                [
                    Self.fixtures.appendingPathComponent("partial_sender.py").path, "\(deskPort)",
                    laptop.config.appendingPathComponent("cert.pem").path,
                    laptop.config.appendingPathComponent("key.pem").path, source.path, version, "resume",
                ])
            #expect(sent.output.contains("held 8 answer 22"), "\(sent.output)")
            #expect(
                try Data(contentsOf: inbox.appendingPathComponent("laptop/big.txt")) == Data(contentsOf: source))
        }
    }
}

extension TestDevice {
    /// A device whose folder already exists (files written by another version).
    convenience init(existing config: URL, name: String) {
        self.init(directory: config.deletingLastPathComponent(), configName: config.lastPathComponent, name: name)
    }
}
