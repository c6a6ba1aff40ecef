import Foundation
import Glibc
import ShareTestSupport
import Testing

extension EndToEndAgents {
    /// The fifth review's attacks, each written as the attack: a team device's mirrored folder aimed at the folder a
    /// one-off receive runs in, bases and block sums of files the sender never had, and floods of idle connections
    /// against LocalSend's port and the page. `Fixtures/hostile_sender.py` speaks the real protocol with a trusted
    /// device's certificate; `Fixtures/idle_flood.py` holds connections and opens them again as they are cut.
    @Suite(.serialized) struct ReviewFiveAttackTests {
        static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures")

        /// Runs the hostile sender against `port` as `device`; its report.
        func send(_ device: TestDevice, _ port: Int, _ arguments: [String]) -> String {
            runTool(
                "/usr/bin/python3",
                [
                    Self.fixtures.appendingPathComponent("hostile_sender.py").path, "\(port)",
                    device.config.appendingPathComponent("cert.pem").path,
                    device.config.appendingPathComponent("key.pem").path,
                ] + arguments, timeout: 60
            ).output
        }

        /// A home folder as an owner has one: an SSH key, a config folder with a secret database.
        func home(in device: TestDevice) throws -> URL {
            let home = try device.folder("home")
            let fm = FileManager.default
            try fm.createDirectory(at: home.appendingPathComponent(".ssh"), withIntermediateDirectories: true)
            try fm.createDirectory(at: home.appendingPathComponent(".config"), withIntermediateDirectories: true)
            try Data("ssh-ed25519 AAAA the-owner\n".utf8).write(to: home.appendingPathComponent(".ssh/authorized_keys"))
            try randomData(32 << 10).write(to: home.appendingPathComponent(".config/secrets.db"))
            return home
        }

        /// Every path under `folder` with its contents, to see that nothing changed.
        func snapshot(_ folder: URL) -> [String: Data] {
            var result: [String: Data] = [:]
            let root = folder.resolvingSymlinksInPath().path
            guard let walker = FileManager.default.enumerator(atPath: root) else { return result }
            for case let path as String in walker {
                result[path] = FileManager.default.contents(atPath: root + "/" + path) ?? Data()
            }
            return result
        }

        /// Hole 1: `share receive` run in a home folder. A team device's items naming a mirrored folder `.ssh` or
        /// `.config` replace nothing, plant nothing, and read no basis there: mirrored folders are shared folders
        /// now, which land only where their person accepted them (or, for a mirror, the agent's inbox for that
        /// device); an item's folder is no part of a send, which saves its file under its own name.
        @Test func aMirroredFolderNeverLandsInTheFolderAOneOffReceiveRunsIn() throws {
            let desk = try TestDevice("desk")
            let hostile = try TestDevice("hostile")
            desk.trust(hostile, flags: ["--team"])
            let home = try home(in: desk)
            let before = snapshot(home).filter { $0.key.hasPrefix(".") }
            for attack in [
                ["mirror", ".ssh", "authorized_keys", "64"], ["mirror", ".config", "autostart/x.desktop", "64"],
                ["mirror", ".config", "secrets.db", "\(32 << 10)"],
            ] {
                let (receiver, port) = try desk.startReceive(["--quiet"], into: home)
                defer { receiver.stop() }
                let report = send(hostile, port, attack)
                #expect(report.contains("no-basis") && !report.contains("sums"), "\(attack): \(report)")
                _ = receiver.wait(timeout: 30)
            }
            #expect(snapshot(home).filter { $0.key.hasPrefix(".") } == before, "a hidden folder changed")
        }

        /// Hole 1 under the agent: nothing an item names reaches into a folder of the inbox, and a file the sender
        /// did not deliver is no basis; a mirror of a folder named `.ssh` lands as `ssh` in the inbox for the device.
        @Test func underTheAgentAMirrorTakesNoDotFolderAndReadsOnlyWhatItWrote() throws {
            let desk = try TestDevice("desk")
            let hostile = try TestDevice("hostile")
            desk.trust(hostile, flags: ["--team"])
            let inbox = try desk.folder("inbox")
            let placed = inbox.appendingPathComponent("hostile/docs")
            try FileManager.default.createDirectory(at: placed, withIntermediateDirectories: true)
            try randomData(32 << 10).write(to: placed.appendingPathComponent("notes.db"))
            let owned = try Data(contentsOf: placed.appendingPathComponent("notes.db"))
            let (agent, port) = try desk.startAgent(["--inbox", inbox.path, "--no-discovery"])
            defer { agent.stop() }
            _ = send(hostile, port, ["mirror", ".config", "autostart/x.desktop", "64"])
            #expect(!FileManager.default.fileExists(atPath: inbox.appendingPathComponent("hostile/.config").path))
            // The user's own file in a folder of the inbox: no basis, no sums, untouched.
            let probe = send(hostile, port, ["mirror", "docs", "notes.db", "\(32 << 10)"])
            #expect(probe.contains("no-basis") && !probe.contains("sums"), "\(probe)")
            #expect((try? Data(contentsOf: placed.appendingPathComponent("notes.db"))) == owned)
            // What the sender delivered itself is its basis (the fixture sees one when there is one).
            #expect(send(hostile, port, ["mirror", "docs", "own.db", "\(32 << 10)"]).contains("saved"))
            let again = send(hostile, port, ["mirror", "docs", "own.db", "\(32 << 10 + 1)"])
            #expect(again.contains("basis") && again.contains("sums 128"), "\(again)")
            // A mirrored folder named `.ssh` (a real one) lands in the inbox for the device, without its dot.
            hostile.trust(desk, address: "127.0.0.1:\(port)", flags: ["--team"])
            let (hostileAgent, _) = try hostile.startAgent(["--no-discovery"])
            defer { hostileAgent.stop() }
            let dotted = try hostile.folder(".ssh")
            try Data("ssh-ed25519 AAAA the-attacker\n".utf8).write(to: dotted.appendingPathComponent("authorized_keys"))
            let mirrored = hostile.run(["mirror", dotted.path, "--to", "desk", "--wait", "30"], timeout: 60)
            #expect(mirrored.status == 0, "\(mirrored.stderr)")
            #expect(
                FileManager.default.fileExists(atPath: inbox.appendingPathComponent("hostile/ssh/authorized_keys").path)
            )
            #expect(!FileManager.default.fileExists(atPath: inbox.appendingPathComponent("hostile/.ssh").path))
        }

        /// Hole 2: a friend's re-send of a name finds a basis only while the file is still what was delivered.
        /// Edited or replaced by the user, it is no basis (no block sums of the user's bytes); only touched, it is.
        @Test func aResendFindsNoBasisInAFileTheUserChanged() throws {
            let desk = try TestDevice("desk")
            let friend = try TestDevice("friendb")
            desk.trust(friend)
            let inbox = try desk.folder("inbox")
            let (agent, port) = try desk.startAgent(["--inbox", inbox.path, "--no-discovery"])
            defer { agent.stop() }
            let size = "\(40 << 10)"
            let folder = inbox.appendingPathComponent("friendb")
            /// Sends version `version` of N.bin; the file it was saved as.
            func send(_ version: String, expecting: String) throws -> URL {
                let report = self.send(friend, port, ["file", "N.bin", size, version])
                #expect(report.contains(expecting), "\(version): \(report)")
                let line = try #require(report.split(separator: "\n").first { $0.hasPrefix("saved ") }, "\(report)")
                return folder.appendingPathComponent(String(line.dropFirst("saved ".count)))
            }
            let first = try send("v1", expecting: "no-basis")
            // Unchanged: the version delivered is a basis (this is how the fixture sees an oracle).
            let second = try send("v2", expecting: "sums 128")
            #expect(second != first)
            // Only its time changed (the same bytes): still the delivered version.
            try FileManager.default.setAttributes(
                [.modificationDate: Date(timeIntervalSinceNow: -3600)], ofItemAtPath: second.path)
            let third = try send("v3", expecting: "sums 128")
            // Edited in place by the user.
            let handle = try FileHandle(forWritingTo: third)
            try handle.write(contentsOf: Data(repeating: 0x55, count: 4096))
            try handle.close()
            let afterEdit = self.send(friend, port, ["file", "N.bin", size, "v4"])
            #expect(afterEdit.contains("no-basis") && !afterEdit.contains("sums"), "\(afterEdit)")
            // Replaced by another file of the same name and size.
            let fourth = try #require(
                afterEdit.split(separator: "\n").first { $0.hasPrefix("saved ") }.map {
                    folder.appendingPathComponent(String($0.dropFirst("saved ".count)))
                })
            try FileManager.default.removeItem(at: fourth)
            try randomData(40 << 10).write(to: fourth)
            let afterReplace = self.send(friend, port, ["file", "N.bin", size, "v5"])
            #expect(afterReplace.contains("no-basis") && !afterReplace.contains("sums"), "\(afterReplace)")
        }

        /// Starts the flood fixture against `port`; returns it once every connection is open.
        func flood(_ port: Int, _ sources: String, _ perSource: Int, seconds: Double, asUser: Bool = false) throws
            -> Spawned
        {
            let script = Self.fixtures.appendingPathComponent("idle_flood.py").path
            let arguments = [script, "\(port)", sources, "\(perSource)", "\(seconds)"]
            let flood =
                asUser
                ? try Spawned(
                    "/usr/bin/setpriv",
                    ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3"] + arguments)
                : try Spawned("/usr/bin/python3", arguments)
            #expect(flood.waitForLine(containing: "flooding", timeout: 30) != nil, "\(flood.output)")
            return flood
        }

        /// Seconds `curl` took to get an answer (nil: none within `limit`).
        func answered(_ arguments: [String], limit: Double) -> Double? {
            let started = Date()
            let result = runTool(
                "/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "\(limit)"] + arguments,
                timeout: limit + 10)
            let seconds = Date().timeIntervalSince(started)
            return result.status == 0 && result.output.hasPrefix("2") ? seconds : nil
        }

        /// Hole 3: fourteen idle connections from each of ten addresses, opened again as they are cut, fill
        /// LocalSend's total; a new device from another address still gets `/info` answered.
        @Test func aNewLocalSendDeviceIsAnsweredThroughAFloodOfIdleConnections() throws {
            let desk = try TestDevice("desk")
            let (agent, port, _) = try desk.startLocalSendAgent()
            defer { agent.stop() }
            let flooding = try flood(port, "10@127.0.5.1", 14, seconds: Patience.seconds(40))
            defer { flooding.stop() }
            let limit = Patience.seconds(5)
            for attempt in 0..<3 {
                let seconds = answered(
                    ["-k", "--interface", "127.0.6.\(attempt + 1)", "https://127.0.0.1:\(port)/api/localsend/v2/info"],
                    limit: limit)
                #expect(seconds != nil, "attempt \(attempt): /info unanswered during the flood")
                if let seconds { print("LocalSend /info answered in \(String(format: "%.2f", seconds)) s") }
            }
            #expect(flooding.process.isRunning, "the flood ended early: \(flooding.output)")
        }

        /// Hole 4: another local user's idle connections to the page are refused outright; the owner's own idle
        /// connections give way to a request that comes with its head; the owner's page answers throughout.
        @Test func thePageAnswersItsOwnerThroughIdleConnectionsOfAnyLocalUser() throws {
            let desk = try TestDevice("desk")
            let (agent, _) = try desk.startAgent(["--no-discovery", "--web"])
            defer { agent.stop() }
            let page = WebPageEndToEndTests()
            let (port, secret) = try page.page(of: agent)
            let auth = try page.session(port, secret)
            let header = auth.trimmingCharacters(in: .whitespacesAndNewlines)
            let limit = Patience.seconds(5)
            // Another user's flood from the owner's own address; the owner's own idle connections from other
            // addresses (two on each of 24).
            for (sources, perSource, asUser) in [("127.0.0.1", 48, true), ("24@127.0.7.1", 2, false)] {
                let flooding = try flood(port, sources, perSource, seconds: Patience.seconds(40), asUser: asUser)
                defer { flooding.stop() }
                for attempt in 0..<3 {
                    let seconds = answered(
                        ["-H", header, "-H", "Host: 127.0.0.1:\(port)", "http://127.0.0.1:\(port)/api/state"],
                        limit: limit)
                    #expect(seconds != nil, "attempt \(attempt) (another user: \(asUser)): the page did not answer")
                }
            }
        }

        /// Hole 5: the secret in the printed address opens one session; a second trade of it is refused.
        @Test func thePrintedSecretOpensOneSession() throws {
            let desk = try TestDevice("desk")
            let (agent, _) = try desk.startAgent(["--no-discovery", "--web"])
            defer { agent.stop() }
            let page = WebPageEndToEndTests()
            let (port, secret) = try page.page(of: agent)
            _ = try page.session(port, secret)
            let again = try page.exchange(
                port,
                "POST /api/session HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nX-Share-Secret: \(secret)\r\nContent-Length: 0\r\n\r\n"
            )
            #expect(again.status == 401 && !again.text.contains("\"session\""), "\(again.text)")
        }
    }
}
