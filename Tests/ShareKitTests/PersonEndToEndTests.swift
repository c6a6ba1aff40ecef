import Foundation
import Testing

extension EndToEnd {
    /// The command line as a person meets it: standard output carries only content, a queued send can be listed,
    /// waited for with progress and a bound, and cancelled, and mistakes get one plain sentence.
    @Suite(.serialized) struct PersonEndToEndTests {
        func jobID(_ output: String) throws -> String {
            let line = try #require(output.split(separator: "\n").first { $0.contains("queued job") })
            return String(line.split(separator: " ")[2])
        }

        /// `share paste | od -c` shows exactly what was copied; `share receive > file` captures only content;
        /// `share send` writes nothing to standard output.
        @Test func standardOutputCarriesOnlyContent() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let (agent, port) = try laptop.startAgent(["--no-discovery"])
            defer { agent.stop() }
            desk.trust(laptop, address: "127.0.0.1:\(port)", flags: ["--team"])
            #expect(laptop.run(["copy", "--text", "no newline\tat the end"]).stdout.isEmpty)
            let pasted = desk.run(["paste", "--from", "laptop"])
            #expect(pasted.status == 0, "\(pasted.stderr)")
            #expect(Array(pasted.stdout.utf8) == Array("no newline\tat the end".utf8), "\(pasted.stdout)")
            #expect(!pasted.stderr.isEmpty, "the narrative is on standard error")

            let inbox = try desk.folder("inbox")
            let notes = try laptop.folder("src").appendingPathComponent("notes.txt")
            try "a text file is saved, not printed\n".write(to: notes, atomically: true, encoding: .utf8)
            let (receiver, receivePort) = try desk.startReceive(into: inbox)
            defer { receiver.stop() }
            let sent = laptop.run([
                "send", notes.path, "--text", "first", "--text", "second\n", "--to", "127.0.0.1:\(receivePort)",
                "--direct",
            ])
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(sent.stdout.isEmpty, "\(sent.stdout)")
            #expect(receiver.wait(timeout: 30) == 0)
            #expect(receiver.stdout.text == "first\nsecond\n", "\(receiver.stdout.text)")
            #expect(
                try String(contentsOf: inbox.appendingPathComponent("notes.txt"), encoding: .utf8)
                    == "a text file is saved, not printed\n")
        }

        /// A name nobody has is refused before anything is queued, with the names there are; sending to oneself
        /// says so.
        @Test func aMistypedPeerIsRefusedBeforeQueueing() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let (agent, port) = try laptop.startAgent(["--no-discovery"])
            defer { agent.stop() }
            let bogus = laptop.run(["send", "--text", "hi", "--to", "bogus"])
            #expect(bogus.status == 64, "\(bogus.stderr)")
            #expect(bogus.stderr.contains("no trusted device is called 'bogus'") && bogus.stderr.contains("desk"))
            #expect(bogus.stderr.split(separator: "\n").count == 1, "\(bogus.stderr)")
            #expect(!laptop.run(["jobs"]).stdout.contains("bogus"))
            let own = laptop.run(["send", "--text", "hi", "--to", "laptop"])
            #expect(own.status == 64 && own.stderr.contains("is this device itself"), "\(own.stderr)")
            let ownAgent = laptop.run(["send", "--text", "hi", "--to", "127.0.0.1:\(port)", "--direct"])
            #expect(ownAgent.status == 64 && ownAgent.stderr.contains("is this device itself"), "\(ownAgent.stderr)")
            _ = desk
        }

        /// `share jobs` lists, `share cancel` stops, `--wait` ends by `--timeout` with the job still queued, and a
        /// repeated `--to` queues one job per device.
        @Test func jobsCanBeListedWaitedForAndCancelled() throws {
            let laptop = try TestDevice("laptop")
            let desk = try TestDevice("desk")
            let phone = try TestDevice("phone")
            laptop.trust(desk, address: "127.0.0.1:\(freePort())", flags: ["--team"])
            laptop.trust(phone, address: "127.0.0.1:\(freePort())", flags: ["--team"])
            let (agent, _) = try laptop.startAgent(["--no-discovery"])
            defer { agent.stop() }
            let started = Date()
            let waited = laptop.run(["send", "--text", "hi", "--to", "desk", "--wait", "--timeout", "2"])
            #expect(waited.status == 69, "\(waited.stderr)")
            #expect(Date().timeIntervalSince(started) < 30)
            #expect(waited.stderr.contains("could not be reached within 2 s") && waited.stderr.contains("stays queued"))
            let id = try jobID(waited.stderr)

            let both = laptop.run(["send", "--text", "to both", "--to", "desk", "--to", "phone"])
            #expect(both.status == 0, "\(both.stderr)")
            #expect(both.stderr.components(separatedBy: "queued job").count - 1 == 2, "\(both.stderr)")

            let listed = laptop.run(["jobs"])
            #expect(listed.stdout.split(separator: "\n").count == 3, "\(listed.stdout)")
            #expect(listed.stdout.contains("\(id)  desk  queued"), "\(listed.stdout)")
            let json = laptop.run(["jobs", "--json"])
            let jobs = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
            #expect(Set(jobs.compactMap { $0["to"] as? String }) == ["desk", "phone"])

            let cancelled = laptop.run(["cancel", id])
            #expect(cancelled.status == 0, "\(cancelled.stderr)")
            #expect(laptop.run(["jobs"]).stdout.contains("\(id)  desk  cancelled"))
            #expect(laptop.run(["cancel", id]).status == 1)
            #expect(laptop.run(["cancel", "nosuchjob"]).status == 64)
        }

        /// A job to a device that never comes gives up after the configured time, with a final state that says so.
        @Test func anUnreachableJobGivesUpAfterItsTime() throws {
            let laptop = try TestDevice("laptop")
            let desk = try TestDevice("desk")
            laptop.trust(desk, address: "127.0.0.1:\(freePort())", flags: ["--team"])
            let (agent, _) = try laptop.startAgent(["--no-discovery", "--give-up-after", "2s"])
            defer { agent.stop() }
            let queued = laptop.run(["send", "--text", "hi", "--to", "desk"])
            let id = try jobID(queued.stderr)
            let ended = laptop.run(["status", "--wait", id], timeout: 60)
            #expect(ended.status == 69, "\(ended.stdout) \(ended.stderr)")
            #expect(ended.stdout.contains("failed") && ended.stdout.contains("gave up after 2 s"), "\(ended.stdout)")
        }

        /// `agent.json` names the file and key that is wrong.
        @Test func agentSettingsAreValidated() throws {
            let desk = try TestDevice("desk")
            let file = desk.config.appendingPathComponent("agent.json")
            try #"{"port": 0, "inbx": "/tmp"}"#.write(to: file, atomically: true, encoding: .utf8)
            let unknown = desk.run(["agent", "--no-discovery"])
            #expect(unknown.status == 78, "\(unknown.stderr)")
            #expect(unknown.stderr.contains("\(file.path): unknown key 'inbx'"), "\(unknown.stderr)")
            try #"{"port": "seven"}"#.write(to: file, atomically: true, encoding: .utf8)
            let wrongType = desk.run(["agent", "--no-discovery"])
            #expect(wrongType.status == 78, "\(wrongType.stderr)")
            #expect(wrongType.stderr.contains("'port' must be a whole number"), "\(wrongType.stderr)")
            #expect(!wrongType.stderr.contains("DecodingError"))
        }

        /// A typo in the last group of an ID names the groups its check character covers; `id` and `peers` speak
        /// JSON.
        @Test func idsAndPeersForPeopleAndScripts() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            var typo = Array(desk.id)
            typo[typo.count - 2] = typo[typo.count - 2] == "A" ? "B" : "A"
            let mistyped = laptop.run(["trust", "add", String(typo), "--name", "other"])
            #expect(mistyped.status == 64 || mistyped.status == 65, "\(mistyped.stderr)")
            #expect(mistyped.stderr.contains("groups 7–8"), "\(mistyped.stderr)")
            let id = laptop.run(["id", "--json"])
            let object = try #require(try JSONSerialization.jsonObject(with: Data(id.stdout.utf8)) as? [String: String])
            #expect(object == ["name": "laptop", "id": laptop.id])
            let peers = laptop.run(["peers", "--json"])
            let list = try #require(try JSONSerialization.jsonObject(with: Data(peers.stdout.utf8)) as? [[String: Any]])
            #expect(list.count == 1 && list[0]["name"] as? String == "desk" && list[0]["trusted"] as? Bool == true)
        }

        /// Ctrl-C or `kill` during a send exits 75 (interrupted), as documented.
        @Test func anInterruptedSendExits75() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let (receiver, port) = try desk.startReceive(into: inbox)
            defer { receiver.stop() }
            let proxy = try TCPProxy(upstreamPort: port)
            defer { proxy.stop() }
            proxy.bytesPerSecond = 1 << 20
            let file = try laptop.folder("src").appendingPathComponent("big.bin")
            try makeFile(file, size: 32 << 20)
            let sender = try laptop.background(["send", file.path, "--to", "127.0.0.1:\(proxy.port)"])
            // The receiver has chosen: the paced transfer (32 s at 1 MiB/s) is under way.
            #expect(sender.stderr.waitForLine(containing: "sending big.bin", timeout: 30) != nil)
            kill(sender.process.processIdentifier, SIGTERM)
            #expect(sender.wait(timeout: 30) == 75)
            #expect(sender.stderr.text.contains("the send was interrupted; run the same command again to resume"))
        }
    }
}
