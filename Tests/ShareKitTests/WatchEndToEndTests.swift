import Foundation
import ShareKit
import ShareWatch
import Testing
import ShareTrust
import ShareReach
import ShareProtocol
import ShareEngine
import ShareAgent

extension EndToEndAgents {
    /// The watch-style client (`share watch`, the small `share-watch` program) attached to its owner's agent, with a
    /// laptop that sends to it through that agent and receives from it: real processes on loopback.
    @Suite(.serialized) struct WatchEndToEndTests {
        /// The owner's phone (agent), its watch, and a laptop with its own agent; everyone trusts whom they must.
        struct Devices {
            let phone: TestDevice
            let watch: TestDevice
            let laptop: TestDevice
            let phonePort: Int
        }

        func devices(phonePort: Int = freePort()) throws -> Devices {
            let phone = try TestDevice("phone")
            let watch = try TestDevice("my-watch")
            let laptop = try TestDevice("laptop")
            phone.trust(watch, flags: ["--team", "--watch"])
            watch.trust(phone, address: "127.0.0.1:\(phonePort)", flags: ["--team"])
            laptop.trust(phone, address: "127.0.0.1:\(phonePort)", flags: ["--team"])
            phone.trust(laptop, flags: ["--team"])
            return Devices(phone: phone, watch: watch, laptop: laptop, phonePort: phonePort)
        }

        func startPhone(_ devices: Devices) throws -> BackgroundShare {
            let agent = try devices.phone.background([
                "agent", "--port", "\(devices.phonePort)", "--listen", "127.0.0.1", "--no-discovery",
            ])
            guard agent.stderr.waitForLine(containing: "listening on port", timeout: 30) != nil else {
                agent.stop()
                throw TestFailure("the phone's agent did not start: \(agent.stderr.text)")
            }
            return agent
        }

        /// Starts the watch (JSON lines on stdout) and waits until it has attached `times` times in all.
        func startWatch(_ devices: Devices, _ extra: [String] = []) throws -> BackgroundShare {
            let watch = try devices.watch.background(
                ["watch", "--agent", "phone", "--json", "--max-backoff", "1"] + extra)
            guard watch.stdout.waitForLine(containing: "\"event\":\"attached\"", timeout: 30) != nil else {
                watch.stop()
                throw TestFailure("the watch did not attach: \(watch.stderr.text)")
            }
            return watch
        }

        /// The JSON events the watch printed.
        func events(_ watch: BackgroundShare) -> [[String: Any]] {
            watch.stdout.text.split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
        }

        func waitForEvent(_ watch: BackgroundShare, containing needle: String) -> [String: Any]? {
            guard let line = watch.stdout.waitForLine(containing: needle, timeout: 30) else { return nil }
            return try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        }

        /// A watch attached and quiet, removed from its phone's trust list: its link is cut within seconds, and
        /// attaching again is refused: the watch says so, with what would let it in, and stops (exit 77).
        @Test func aQuietWatchNoLongerTrustedIsCutAndSaysWhy() throws {
            let devices = try devices()
            let agent = try startPhone(devices)
            defer { agent.stop() }
            let watch = try startWatch(devices)
            defer { watch.stop() }
            #expect(devices.phone.run(["trust", "remove", "my-watch"]).status == 0)
            #expect(watch.wait(timeout: 20) == 77, "\(watch.stderr.text)\n\(agent.stderr.text)")
            #expect(
                watch.stderr.text.contains("refused this device") && watch.stderr.text.contains("share trust add"),
                "\(watch.stderr.text)")
            #expect(agent.stderr.text.contains("session cut"), "\(agent.stderr.text)")
        }

        @Test func aWatchGetsEachItemInTheFormThatFitsIt() throws {
            let devices = try devices()
            let phone = try startPhone(devices)
            defer { phone.stop() }
            let folder = try devices.watch.folder("shown")
            let watch = try startWatch(devices, ["--into", folder.path])
            defer { watch.stop() }
            #expect(try Self.listeningSockets(of: watch.pid).isEmpty, "a watch opens no listening socket")
            let laptop = devices.laptop
            let source = try laptop.folder("src")

            // Text and a URL from the laptop, through the phone.
            var sent = laptop.run([
                "send", "--to", "my-watch", "--via", "phone", "--direct", "--text", "lunch at 1",
                "--url", "https://example.com/menu",
            ])
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(sent.stderr.contains("kept for my-watch"), "\(sent.stderr)")
            #expect(waitForEvent(watch, containing: "lunch at 1")?["event"] as? String == "text")
            #expect(waitForEvent(watch, containing: "https://example.com/menu") != nil)

            // A profile arrives as its name, a folder as its listing; a video has nothing the watch takes: its
            // `file:` URL names a place on the laptop and never leaves it.
            #expect(laptop.run(["profile", "add", "Juan", "--bio", "likes tea"]).status == 0)
            let video = source.appendingPathComponent("clip.mp4")
            try makeFile(video, size: 600 << 10)
            let album = source.appendingPathComponent("album", isDirectory: true)
            try FileManager.default.createDirectory(at: album, withIntermediateDirectories: true)
            try Data("x".utf8).write(to: album.appendingPathComponent("beach.txt"))
            sent = laptop.run([
                "send", "--to", "my-watch", "--via", "phone", "--direct", "--profile", "Juan", video.path, album.path,
            ])
            #expect(sent.status == 3, "\(sent.stderr)")
            #expect(sent.stderr.contains("clip.mp4: no common representation"), "\(sent.stderr)")
            let name = try #require(waitForEvent(watch, containing: "\"text\":\"Juan\""))
            #expect(name["type"] as? String == "public.utf8-plain-text")
            #expect(waitForEvent(watch, containing: "beach.txt") != nil)
            #expect(!watch.stdout.text.contains("file:"))

            // A small image is kept whole; one over the limit is refused and the sender is told why.
            let small = source.appendingPathComponent("dot.png")
            try makeFile(small, size: 10 << 10)
            let large = source.appendingPathComponent("poster.png")
            try makeFile(large, size: 300 << 10)
            sent = laptop.run(["send", "--to", "my-watch", "--via", "phone", "--direct", small.path])
            #expect(sent.status == 0, "\(sent.stderr)")
            let saved = try #require(waitForEvent(watch, containing: "\"event\":\"saved\""))
            let path = try #require(saved["path"] as? String)
            #expect(FileManager.default.contents(atPath: path) == FileManager.default.contents(atPath: small.path))
            sent = laptop.run(["send", "--to", "my-watch", "--via", "phone", "--direct", large.path])
            #expect(sent.status == 3, "refused: \(sent.stderr)")
            #expect(sent.stdout.contains("over the size limit") || sent.stderr.contains("over the size limit"))

            // The owner's own send on the phone goes through its agent's outbox, and --wait reports a refusal.
            sent = devices.phone.run(["send", "--to", "my-watch", "--text", "from the phone", "--wait"])
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(waitForEvent(watch, containing: "from the phone") != nil)
            sent = devices.phone.run(["send", "--to", "my-watch", large.path, "--wait"])
            #expect(sent.status == 3 && sent.stderr.contains("over the size limit"), "\(sent.stderr)")

            // Nothing larger than the limit was written to the watch's folder.
            let kept = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            for file in kept {
                let size =
                    try FileManager.default.attributesOfItem(atPath: folder.appendingPathComponent(file).path)[
                        .size] as? Int ?? 0
                #expect(size <= 256 << 10, "\(file) is \(size) bytes")
            }
            let status = devices.phone.run(["status"])
            #expect(status.stdout.contains("watch: my-watch (attached)"), "\(status.stdout)")
        }

        @Test func itemsWaitForAnAbsentWatchAndTheLinkSurvivesAnAgentRestart() throws {
            let devices = try devices()
            var phone = try startPhone(devices)
            defer { phone.stop() }
            // The watch attaches once so that the phone knows what it accepts, then goes away.
            var watch = try startWatch(devices)
            watch.stop()
            _ = watch.wait(timeout: 10)
            for text in ["first while away", "second while away"] {
                let sent = devices.laptop.run([
                    "send", "--to", "my-watch", "--via", "phone", "--direct", "--text", text,
                ])
                #expect(sent.status == 0, "\(sent.stderr)")
            }
            let status = devices.phone.run(["status"])
            #expect(status.stdout.contains("my-watch (away)"), "\(status.stdout)")
            #expect(status.stdout.contains("not attached") || status.stdout.contains("queued"), "\(status.stdout)")

            watch = try startWatch(devices)
            defer { watch.stop() }
            #expect(waitForEvent(watch, containing: "first while away") != nil)
            #expect(waitForEvent(watch, containing: "second while away") != nil)
            let texts = events(watch).compactMap { $0["text"] as? String }.filter { $0.hasSuffix("while away") }
            #expect(texts == ["first while away", "second while away"], "in the order sent")

            // The agent restarts: the watch notices, reconnects by itself, and keeps receiving.
            phone.stop()
            #expect(watch.stdout.waitForLine(containing: "\"event\":\"detached\"", timeout: 30) != nil)
            phone = try startPhone(devices)
            let attachedAgain = waitUntil(timeout: 30) {
                watch.stdout.text.components(separatedBy: "\"event\":\"attached\"").count - 1 >= 2
            }
            #expect(attachedAgain, "\(watch.stderr.text)")
            let sent = devices.phone.run(["send", "--to", "my-watch", "--text", "after the restart", "--wait"])
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(waitForEvent(watch, containing: "after the restart") != nil)
        }

        @Test func aWatchSendsThroughItsAgentAndTheFarSideNegotiates() throws {
            let devices = try devices()
            let phone = try startPhone(devices)
            defer { phone.stop() }
            let watch = try startWatch(devices)
            defer { watch.stop() }
            // The laptop's agent takes everything: the profile arrives rich and is imported.
            let (laptopAgent, laptopPort) = try devices.laptop.startAgent(["--no-discovery"])
            devices.phone.trust(devices.laptop, address: "127.0.0.1:\(laptopPort)")
            #expect(devices.watch.run(["profile", "add", "Ana", "--bio", "owns the watch"]).status == 0)
            var sent = devices.watch.run([
                "watch", "send", "--agent", "phone", "--to", "laptop", "--profile", "Ana", "--text", "on my way",
            ])
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(
                sent.stderr.contains("sent profile Ana as app.share.profile to laptop through phone"), "\(sent.stderr)")
            #expect(devices.laptop.run(["profile", "list"]).stdout.contains("Ana"))
            #expect(devices.laptop.run(["inbox"]).stdout.contains("on my way"))
            laptopAgent.stop()

            // A receiver that takes only text gets the profile's name.
            let inbox = try devices.laptop.folder("text-only")
            let (receiver, receivePort) = try devices.laptop.startReceive(
                ["--accept", "public.plain-text"], into: inbox)
            defer { receiver.stop() }
            devices.phone.trust(devices.laptop, address: "127.0.0.1:\(receivePort)")
            sent = devices.watch.run(["watch", "send", "--agent", "phone", "--to", "laptop", "--profile", "Ana"])
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(sent.stderr.contains("as public.utf8-plain-text"), "\(sent.stderr)")
            #expect(receiver.wait(timeout: 30) == 0)
            #expect(receiver.stdout.text.contains("Ana"))

            // The phone passes items on only to and from its watches.
            let refused = devices.laptop.run(["send", "--to", "laptop", "--via", "phone", "--direct", "--text", "x"])
            #expect(refused.status == 3, "\(refused.stderr)")
            #expect(refused.stderr.contains("passes items on only between"), "\(refused.stderr)")
            // A device it cannot reach gets a clear line and the watch's exit status says so.
            receiver.stop()
            let away = devices.watch.run(["watch", "send", "--agent", "phone", "--to", "laptop", "--text", "x"])
            #expect(away.status == 69, "\(away.status) \(away.stderr)")
            #expect(away.stderr.contains("cannot be reached"), "\(away.stderr)")
        }

        @Test func theWatchFolderNeverGrowsPastItsBound() throws {
            let devices = try devices()
            let phone = try startPhone(devices)
            defer { phone.stop() }
            let folder = try devices.watch.folder("bounded")
            let watch = try startWatch(devices, ["--into", folder.path, "--max-size", "1K", "--keep", "2K"])
            defer { watch.stop() }
            let source = try devices.phone.folder("images")
            for index in 1...4 {
                let image = source.appendingPathComponent("photo\(index).png")
                try makeFile(image, size: 900)
                let sent = devices.phone.run(["send", "--to", "my-watch", image.path, "--wait"])
                #expect(sent.status == 0, "\(sent.stderr)")
                #expect(waitForEvent(watch, containing: "photo\(index).png") != nil)
            }
            let kept = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
            #expect(kept == ["photo3.png", "photo4.png"], "the oldest go first: \(kept)")
        }

        @Test func badArgumentsAndUnknownAgentsGetOneClearLine() throws {
            let device = try TestDevice("lonely-watch")
            var result = device.run(["watch", "--agent", "phone", "--max-size", "lots"])
            #expect(result.status == 64 && result.stderr.contains("--max-size takes a size"), "\(result.stderr)")
            result = device.run(["watch", "--agent", "nobody-known"])
            #expect(result.status == 64 && result.stderr.contains("no trusted device is called"), "\(result.stderr)")
            result = device.run(["watch", "send", "--agent", "127.0.0.1:9", "--to", "x"])
            #expect(result.status == 64 && result.stderr.contains("nothing to send"), "\(result.stderr)")
            #expect(throws: WatchUsageError.self) { try WatchCommand.parse(["--agent", "a", "--accept", ""]) }
            let parsed = try WatchCommand.parse([
                "send", "--agent", "a", "--to", "b", "--text", "t", "--url", "https://x",
            ])
            guard case .send(let send) = parsed else { throw TestFailure("not a send: \(parsed)") }
            #expect(send.texts == ["t"] && send.urls == ["https://x"] && send.to == "b")
        }

        /// Inodes of the TCP sockets in LISTEN state that process `pid` holds.
        static func listeningSockets(of pid: Int32) throws -> [String] {
            let fds = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")
            let inodes = Set(
                fds.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)") }
                    .filter { $0.hasPrefix("socket:[") }.map { String($0.dropFirst(8).dropLast()) })
            var listening: [String] = []
            for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
                let text = (try? String(contentsOfFile: table, encoding: .utf8)) ?? ""
                for line in text.split(separator: "\n").dropFirst() {
                    let fields = line.split(separator: " ")
                    if fields.count > 9, fields[3] == "0A", inodes.contains(String(fields[9])) {
                        listening.append(String(fields[9]))
                    }
                }
            }
            return listening
        }
    }
}
