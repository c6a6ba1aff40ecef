import Foundation
import ShareKit
import Testing
import ShareTrust
import ShareReach
import ShareProtocol
import ShareEngine
import ShareAgent
import ShareTestSupport

extension EndToEnd {
    /// `share send` with an agent running hands the job to the agent's outbox through the control socket: it
    /// returns at once, the job waits for a peer that is away, and survives the agent being killed.
    @Suite(.serialized) struct AgentOutboxEndToEndTests {
        /// Two devices; the laptop knows the desk at `deskPort` (nothing listens there yet).
        func devices(deskPort: Int) throws -> (TestDevice, TestDevice) {
            let laptop = try TestDevice("laptop")
            let desk = try TestDevice("desk")
            laptop.trust(desk, address: "127.0.0.1:\(deskPort)", flags: ["--team"])
            desk.trust(laptop, flags: ["--team"])
            return (laptop, desk)
        }

        func jobID(_ output: String) throws -> String {
            let line = try #require(output.split(separator: "\n").first { $0.contains("queued job") })
            return String(line.split(separator: " ")[2])
        }

        @Test func aSendToADeviceThatIsAwayArrivesWhenItComesBack() throws {
            let deskPort = freePort()
            let (laptop, desk) = try devices(deskPort: deskPort)
            let (agent, _) = try laptop.startAgent(["--no-discovery"])
            defer { agent.stop() }
            let file = try laptop.folder("src").appendingPathComponent("report.pdf")
            try makeFile(file, size: 3 << 20)
            let queued = laptop.run(["send", file.path, "--text", "back soon", "--to", "desk"])
            #expect(queued.status == 0, "\(queued.stderr)")
            let id = try jobID(queued.stderr)
            #expect(laptop.run(["status"]).stdout.contains("job \(id) to desk"))
            let inbox = try desk.folder("inbox")
            let (awake, port) = try desk.startAgentOn(port: deskPort, inbox: inbox)
            defer { awake.stop() }
            #expect(port == deskPort)
            let waited = laptop.run(["status", "--wait", id], timeout: 120)
            #expect(waited.status == 0, "\(waited.stdout) \(waited.stderr)")
            #expect(waited.stdout.contains("delivered"))
            #expect(try Data(contentsOf: inbox.appendingPathComponent("laptop/report.pdf")) == Data(contentsOf: file))
            #expect(desk.run(["inbox", "--inbox", inbox.path]).stdout.contains("back soon"))
            // Sent again after a small edit: the job says what crossed and what was made from the copy there.
            let handle = try FileHandle(forWritingTo: file)
            try handle.seek(toOffset: 1_000_000)
            handle.write(Data(repeating: 1, count: 16))
            try handle.close()
            let again = laptop.run(["send", file.path, "--to", "desk", "--wait"], timeout: 120)
            #expect(again.status == 0, "\(again.stderr)")
            // The waiting command, the job and the receiving agent's log all say it.
            #expect(
                again.stderr.range(
                    of:
                        #"delivered job \w+ to desk: 1 item\(s\), 3\.0 MiB sent: .* crossed, 3\.0 MiB made from the copy there"#,
                    options: .regularExpression) != nil, "\(again.stderr)")
            let logged = awake.stderr.waitForLine(containing: "fromCopy=3", timeout: Patience.seconds(30))
            #expect(
                logged?.range(of: #"crossed=\d+ .*fromCopy=3\d{6}"#, options: .regularExpression) != nil,
                "\(logged ?? "")")
            let jobs = laptop.run(["jobs"]).stdout
            #expect(
                jobs.range(
                    of: #"3\.0 MiB sent: .* crossed, 3\.0 MiB made from the copy there"#, options: .regularExpression)
                    != nil, "\(jobs)")
        }

        /// A job backed off for a device that was away is tried the moment that device is heard again (here a
        /// session from it), not when its backoff ends.
        @Test func aDeviceHeardAgainWakesTheJobWaitingForIt() throws {
            let deskPort = freePort()
            let (laptop, desk) = try devices(deskPort: deskPort)
            let (agent, laptopPort) = try laptop.startAgent(["--no-discovery"])
            defer { agent.stop() }
            desk.trust(laptop, address: "127.0.0.1:\(laptopPort)", flags: ["--team"])
            let queued = laptop.run(["send", "--text", "when you are back", "--to", "desk"])
            #expect(queued.status == 0, "\(queued.stderr)")
            let id = try jobID(queued.stderr)
            // Backed off: the next attempt more than 12 s away.
            func next() -> Date? {
                let status = laptop.run(["jobs", "--json"])
                guard let jobs = try? JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]],
                    let job = jobs.first(where: { $0["id"] as? String == id }), let text = job["nextAttempt"] as? String
                else { return nil }
                return ISO8601DateFormatter().date(from: text)
            }
            var backoffEnds = Date.distantFuture
            #expect(
                waitUntil(timeout: 90) {
                    backoffEnds = next() ?? .distantPast
                    return backoffEnds.timeIntervalSinceNow > 12
                }, "\(laptop.run(["jobs", "--json"]).stdout)")
            // The job tries again by itself: its line says when, and gives no advice to send again.
            let line = laptop.run(["jobs"]).stdout
            #expect(line.contains("queued") && line.contains("next try in") && !line.contains("send again"), "\(line)")
            let inbox = try desk.folder("inbox")
            let (awake, _) = try desk.startAgentOn(port: deskPort, inbox: inbox)
            defer { awake.stop() }
            #expect(desk.run(["ping", "laptop"]).status == 0)
            #expect(
                waitUntil(timeout: 60) {
                    desk.run(["inbox", "--inbox", inbox.path]).stdout.contains("when you are back")
                })
            #expect(Date() < backoffEnds, "the job waited for its backoff to end\n\(agent.stderr.text.suffix(2000))")
        }

        /// The job's live progress while it runs, from `share status --json`.
        func progress(of id: String, _ device: TestDevice) -> [String: Any]? {
            let status = device.run(["status", "--json"])
            guard let object = try? JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any],
                let jobs = object["jobs"] as? [[String: Any]]
            else { return nil }
            return jobs.first { $0["id"] as? String == id }?["progress"] as? [String: Any]
        }

        /// The job goes through a paced proxy, so the kill lands half way whatever the machine's speed; the restart
        /// runs unpaced.
        @Test func anAgentKilledMidTransferResumesTheJobAfterARestart() throws {
            let size = 256 << 20
            let chunk = 1 << 20
            let (laptop, desk) = try devices(deskPort: 1)
            laptop.lowPriorityTransfers = true
            desk.lowPriorityTransfers = true
            let inbox = try desk.folder("inbox")
            let (deskAgent, deskPort) = try desk.startAgent(["--no-discovery", "--inbox", inbox.path])
            defer { deskAgent.stop() }
            let proxy = try TCPProxy(upstreamPort: deskPort)
            defer { proxy.stop() }
            // Slow while the running job is looked at (however long a busy machine takes to answer), then faster.
            proxy.bytesPerSecond = 4 << 20
            laptop.trust(desk, address: "127.0.0.1:\(proxy.port)", flags: ["--team"])
            let (agent, _) = try laptop.startAgent(["--no-discovery"])
            let file = try laptop.folder("src").appendingPathComponent("movie.bin")
            try makeFile(file, size: size)
            let queued = laptop.run(["send", file.path, "--to", "desk"])
            #expect(queued.status == 0, "\(queued.stderr)")
            let id = try jobID(queued.stderr)
            // While it runs, `share status` shows how far it got.
            var seen: [String: Any]?
            #expect(
                waitUntil(timeout: 60) {
                    seen = progress(of: id, laptop)
                    return (seen?["bytes"] as? Int ?? 0) > 0
                })
            #expect(seen?["item"] as? String == "movie.bin" && seen?["itemTotal"] as? Int == size, "\(seen ?? [:])")
            #expect(laptop.run(["status"]).stdout.contains("running (movie.bin), movie.bin "))
            // Transfers run at low CPU priority on both agents; their other threads keep the normal one.
            for pid in [agent.pid, deskAgent.pid] {
                let nice = threadNiceValues(pid)
                #expect(nice.contains(0) && nice.contains(Int(Agent.transferNice)), "\(nice)")
            }
            proxy.bytesPerSecond = 48 << 20
            let partials = inbox.appendingPathComponent("laptop")
            #expect(waitUntil(timeout: 120) { ledgerChunkCount(partials) >= size / chunk / 2 })
            kill(agent.pid, SIGKILL)
            _ = agent.wait(timeout: 30)
            let held = ledgerChunkCount(partials)
            proxy.bytesPerSecond = 0
            let (again, _) = try laptop.startAgent(["--no-discovery"])
            defer { again.stop() }
            let waited = laptop.run(["status", "--wait", id, "--json"], timeout: 300)
            #expect(waited.status == 0, "\(waited.stderr)")
            #expect(try Data(contentsOf: partials.appendingPathComponent("movie.bin")) == Data(contentsOf: file))
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(waited.stdout.utf8)) as? [String: Any])
            let job = try #require((object["jobs"] as? [[String: Any]])?.first)
            let skipped = try #require(job["bytesSkipped"] as? Int)
            let sent = try #require(job["bytesSent"] as? Int)
            #expect(skipped >= held * chunk)
            // What the restarted agent sent beyond what the receiver had verified: at most one chunk.
            #expect(sent - (size - skipped) <= chunk, "sent \(sent), held \(skipped)")
        }

        /// The person removes the device a job is running to: the job stops there (not sent on to the end) and is
        /// listed as failed, not trusted, saying why; it is not tried again.
        @Test func aJobToADeviceRemovedFromTheTrustListStops() throws {
            let desk = try TestDevice("desk")
            let inbox = try desk.folder("inbox")
            let (deskAgent, deskPort) = try desk.startAgent(["--no-discovery", "--inbox", inbox.path])
            defer { deskAgent.stop() }
            let laptop = try TestDevice("laptop")
            laptop.trust(desk, address: "127.0.0.1:\(deskPort)", flags: ["--team"])
            desk.trust(laptop, flags: ["--team"])
            // Slowed (a pause of at most a second per MiB chunk): a minute or so to the end.
            let (agent, _) = try laptop.startAgent(
                ["--no-discovery"], environment: ["SHARE_TEST_SEND_RATE": "200000"])
            defer { agent.stop() }
            let file = try laptop.folder("src").appendingPathComponent("big.bin")
            try makeFile(file, size: 64 << 20)
            let queued = laptop.run(["send", file.path, "--to", "desk"])
            #expect(queued.status == 0, "\(queued.stderr)")
            let id = try jobID(queued.stderr)
            #expect(waitUntil(timeout: 60) { (progress(of: id, laptop)?["bytes"] as? Int ?? 0) > 1 << 20 })
            #expect(laptop.run(["trust", "remove", "desk"]).status == 0)
            var job: [String: Any]?
            #expect(
                waitUntil(timeout: 15) {
                    let listed = laptop.run(["jobs", "--json"])
                    let jobs = (try? JSONSerialization.jsonObject(with: Data(listed.stdout.utf8))) as? [[String: Any]]
                    job = jobs?.first { $0["id"] as? String == id }
                    return job?["state"] as? String == "failed"
                }, "\(job ?? [:])\n\(agent.stderr.text)")
            // Bound first: `#expect((x as? String ?? "").contains(…))` expands to a check that cannot fail.
            let lastError = job?["lastError"] as? String ?? ""
            #expect(lastError.contains("removed from this device's trust list"), "\(job ?? [:])")
            #expect(!FileManager.default.fileExists(atPath: inbox.appendingPathComponent("laptop/big.bin").path))
        }

        /// A send someone waits for (`--wait`) is the foreground: the agent sends it at its normal priority.
        @Test func aJobSomeoneWaitsForRunsAtNormalPriority() throws {
            let size = 64 << 20
            let (laptop, desk) = try devices(deskPort: 1)
            laptop.lowPriorityTransfers = true
            let inbox = try desk.folder("inbox")
            let (deskAgent, deskPort) = try desk.startAgent(["--no-discovery", "--inbox", inbox.path])
            defer { deskAgent.stop() }
            let proxy = try TCPProxy(upstreamPort: deskPort)
            defer { proxy.stop() }
            // Slow while the running job is looked at (however long a busy machine takes to answer), then unpaced.
            proxy.bytesPerSecond = 1 << 19
            laptop.trust(desk, address: "127.0.0.1:\(proxy.port)", flags: ["--team"])
            let (agent, _) = try laptop.startAgent(["--no-discovery"])
            defer { agent.stop() }
            let file = try laptop.folder("src").appendingPathComponent("slides.bin")
            try makeFile(file, size: size)
            let waiting = try laptop.background(["send", file.path, "--to", "desk", "--wait"])
            defer { waiting.stop() }
            let queued = try #require(waiting.stderr.waitForLine(containing: "queued job", timeout: 30))
            let id = try jobID(queued)
            #expect(waitUntil(timeout: 60) { (progress(of: id, laptop)?["bytes"] as? Int ?? 0) > 0 })
            let nice = threadNiceValues(agent.pid)
            #expect(!nice.contains(Int(Agent.transferNice)), "\(nice)")
            proxy.bytesPerSecond = 0
            #expect(waiting.wait(timeout: 120) == 0, "\(waiting.stderr.text)")
        }

        @Test func everythingTheAgentKeepsIsPrivate() throws {
            let (laptop, _) = try devices(deskPort: freePort())
            let (agent, _) = try laptop.startAgent(["--no-discovery"])
            defer { agent.stop() }
            let file = try laptop.folder("src").appendingPathComponent("plan.txt")
            try Data("the plan".utf8).write(to: file)
            let queued = laptop.run(["send", file.path, "--text", "secret", "--to", "desk"])
            #expect(queued.status == 0, "\(queued.stderr)")
            #expect(laptop.run(["copy", "--text", "door code"]).status == 0)
            let mode = { (path: String) in
                try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            }
            let state = laptop.config.appendingPathComponent("state")
            #expect(try mode(laptop.config.path) == 0o700)
            #expect(try mode(state.path) == 0o700)
            #expect(try mode(state.appendingPathComponent("outbox").path) == 0o700)
            let jobs = try FileManager.default.contentsOfDirectory(atPath: state.appendingPathComponent("outbox").path)
            #expect(!jobs.isEmpty)
            for job in jobs {
                // A job (0600), and the folder of the values exported for it (0700, its files 0600).
                let path = state.appendingPathComponent("outbox/\(job)").path
                var isFolder: ObjCBool = false
                _ = FileManager.default.fileExists(atPath: path, isDirectory: &isFolder)
                #expect(try mode(path) == (isFolder.boolValue ? 0o700 : 0o600), "\(job)")
                for exported in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
                where isFolder.boolValue {
                    #expect(try mode(path + "/" + exported) == 0o600, "\(job)/\(exported)")
                }
            }
            #expect(try mode(state.appendingPathComponent("clipboard.json").path) == 0o600)
            #expect(try mode(state.appendingPathComponent("agent.sock").path) == 0o600)
            #expect(try mode(laptop.config.appendingPathComponent("key.pem").path) == 0o600)
            // Nothing the agent logged carries the text, the clipboard or the key.
            let key = try String(contentsOf: laptop.config.appendingPathComponent("key.pem"), encoding: .utf8)
            let keyBody = key.split(separator: "\n").dropFirst().first.map(String.init) ?? key
            for secret in ["secret", "door code", keyBody] { #expect(!agent.stderr.text.contains(secret)) }
        }

        @Test func theControlSocketServesOnlyItsOwner() throws {
            let laptop = try TestDevice("laptop")
            let (agent, _) = try laptop.startAgent(["--no-discovery"])
            defer { agent.stop() }
            let socket = laptop.config.appendingPathComponent("state/agent.sock").path
            let attributes = try FileManager.default.attributesOfItem(atPath: socket)
            #expect(attributes[.posixPermissions] as? Int == 0o600)
            let state = try FileManager.default.attributesOfItem(
                atPath: laptop.config.appendingPathComponent("state").path)
            #expect(state[.posixPermissions] as? Int == 0o700)
            let script =
                "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b'{\"op\":\"status\"}\\n'); print(s.recv(4096))"
            let other = runTool("/usr/sbin/runuser", ["-u", "nobody", "--", "/usr/bin/python3", "-c", script, socket])
            #expect(other.status != 0)
            #expect(
                other.output.contains("Permission denied") || other.output.contains("PermissionError"),
                "\(other.output)")
            #expect(laptop.run(["status"]).status == 0)
        }
    }
}

/// The nice value of each thread of a process (field 19 of /proc/PID/task/TID/stat).
func threadNiceValues(_ pid: Int32) -> [Int] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    return tasks.compactMap { task in
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // Fields after the command name (which may contain spaces) start at field 3.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 16 ? Int(fields[16]) : nil
    }
}

extension TestDevice {
    /// Starts this device's agent on a given port.
    func startAgentOn(port: Int, inbox: URL, extra: [String] = []) throws -> (BackgroundShare, Int) {
        try startAgent(["--inbox", inbox.path, "--port", String(port)] + extra)
    }
}

extension EndToEnd {
    /// The agent's settings file and its one-per-device rule.
    @Suite(.serialized) struct AgentConfigEndToEndTests {
        @Test func settingsComeFromAgentJSONAndFlagsOverrideThem() throws {
            let desk = try TestDevice("desk")
            let port = freePort()
            let inbox = desk.directory.appendingPathComponent("Inbox")
            let settings = """
                {"listen": "127.0.0.1", "port": \(port), "inbox": "\(inbox.path)", "accept": ["public.plain-text"]}
                """
            try Data(settings.utf8).write(to: desk.config.appendingPathComponent("agent.json"))
            let agent = try desk.background(["agent"])
            let line = try #require(agent.stderr.waitForLine(containing: "listening on port", timeout: 30))
            #expect(TestDevice.port(in: line) == port)
            #expect(line.contains("inbox \(inbox.path)"))
            // One agent per device: a second one is refused with a clear line.
            let second = desk.run(["agent", "--port", "0"])
            #expect(second.status == 69)
            #expect(second.stderr.contains("already running"), "\(second.stderr)")
            agent.stop()
            let overridden = try desk.background(["agent", "--port", "0", "--listen", "127.0.0.1"])
            defer { overridden.stop() }
            let other = try #require(overridden.stderr.waitForLine(containing: "listening on port", timeout: 30))
            #expect(TestDevice.port(in: other) != port)
        }

        /// Ctrl-C stops an agent within about two seconds even while a transfer is in flight: the transfer keeps its
        /// partial (the send resumes to the next agent), and no second agent for the device starts while the first is
        /// still stopping (a lock held for the life of the process).
        @Test func ctrlCStopsAnAgentPromptlyKeepingTheTransfersPartialAndOneAgentPerDevice() throws {
            let laptop = try TestDevice("laptop")
            let desk = try TestDevice("desk")
            laptop.trust(desk)
            desk.trust(laptop)
            let inbox = try desk.folder("inbox")
            let arguments = ["agent", "--port", "0", "--listen", "127.0.0.1", "--no-discovery", "--inbox", inbox.path]
            let agent = try desk.background(arguments)
            let line = try #require(agent.stderr.waitForLine(containing: "listening on port", timeout: 30))
            let port = try #require(TestDevice.port(in: line))
            let file = try laptop.folder("src").appendingPathComponent("big.bin")
            try makeFile(file, size: 48 << 20)
            let sender = try laptop.background(
                ["send", "--direct", "--to", "127.0.0.1:\(port)", file.path, "--quiet"],
                environment: ["SHARE_TEST_SEND_RATE": String(8 << 20)])
            defer { sender.stop() }
            let partials = inbox.appendingPathComponent("laptop/.share-partial")
            func partial() -> Bool {
                ((try? FileManager.default.contentsOfDirectory(atPath: partials.path)) ?? []).contains {
                    $0.hasSuffix(".part")
                }
            }
            #expect(waitUntil(timeout: 30) { partial() }, "the transfer did not start: \(agent.stderr.text)")
            // A second agent for the device is refused at once, however the first is doing.
            let second = desk.run(arguments)
            #expect(second.status == 69 && second.stderr.contains("already running"), "\(second.stderr)")
            let stopping = Date()
            kill(agent.pid, SIGINT)
            #expect(agent.wait(timeout: 30) == 0, "\(agent.stderr.text)")
            let took = Date().timeIntervalSince(stopping)
            // About a second on a quiet machine (before, sessions had 5 s of grace: over 5 s); bounded loosely,
            // as the machine's patience scales it, since a busy machine slows every process's exit.
            #expect(took < Patience.seconds(4), "the agent took \(took) s to stop")
            #expect(partial(), "the partial was not kept")
            #expect(sender.wait(timeout: 60) != 0)
            // The next agent takes the same send where it stopped.
            let (again, againPort) = try desk.startAgent(["--no-discovery", "--inbox", inbox.path])
            defer { again.stop() }
            let resumed = laptop.run(["send", "--direct", "--to", "127.0.0.1:\(againPort)", file.path], timeout: 120)
            #expect(resumed.status == 0, "\(resumed.stderr)")
            #expect(try Data(contentsOf: inbox.appendingPathComponent("laptop/big.bin")) == Data(contentsOf: file))
        }

        @Test func sigtermStopsEveryServiceGracefullyAndLogsAreStructured() throws {
            let laptop = try TestDevice("laptop")
            let desk = try TestDevice("desk")
            laptop.trust(desk)
            desk.trust(laptop)
            let inbox = try desk.folder("inbox")
            let agent = try desk.background(
                [
                    "agent", "--port", "0", "--listen", "127.0.0.1", "--no-discovery", "--inbox", inbox.path,
                    "--log-level", "debug",
                ])
            let line = try #require(agent.stderr.waitForLine(containing: "listening on port", timeout: 30))
            let port = try #require(TestDevice.port(in: line))
            let sent = laptop.run(["send", "--direct", "--to", "127.0.0.1:\(port)", "--text", "hello there"])
            #expect(sent.status == 0, "\(sent.stderr)")
            kill(agent.pid, SIGTERM)
            #expect(agent.wait(timeout: 30) == 0)
            #expect(agent.stderr.text.contains("share agent: stopped"))
            let socket = desk.config.appendingPathComponent("state/agent.sock").path
            #expect(!FileManager.default.fileExists(atPath: socket))
            // One line per event: time, level, subsystem, message, then key=value fields.
            let log = agent.stderr.text
            let received = try #require(log.split(separator: "\n").first { $0.contains("share.agent: received") })
            #expect(
                received.range(
                    of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z info share\.agent: received .*peer=laptop"#,
                    options: .regularExpression) != nil, "\(received)")
            #expect(received.contains("texts=1"))
            for service in ["listener", "outbox", "control socket"] {
                #expect(
                    log.contains("Triggering graceful shutdown for service sl-service=\"\(service)\"")
                        || log.contains("Triggering graceful shutdown for service sl-service=\(service)"), "\(service)")
            }
            // The text itself is never logged.
            #expect(!log.contains("hello there"))
        }

        @Test func aBrokenSettingsFileIsOneClearLine() throws {
            let desk = try TestDevice("desk")
            try Data("{\"port\": \"seven\"".utf8).write(to: desk.config.appendingPathComponent("agent.json"))
            let result = desk.run(["agent"])
            #expect(result.status == 78)
            #expect(result.stderr.contains("agent.json") && result.stderr.split(separator: "\n").count == 1)
        }
    }
}
