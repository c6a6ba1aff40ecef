import Foundation
import Testing

extension EndToEnd {
    /// `share send` and `share receive` as two devices on loopback.
    @Suite(.serialized) struct TransferEndToEndTests {
        @Test func everyItemKindInOneSession() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let source = try laptop.folder("src")
            let file = source.appendingPathComponent("photo.png")
            try makeFile(file, size: 300_000)
            let (receiver, port) = try desk.startReceive(["--verbose"], into: inbox)
            defer { receiver.stop() }
            let sent = laptop.run(
                [
                    "send", file.path, "-", "--text", "hello desk", "--url", "https://example.com/a?b=c",
                    "--to", "127.0.0.1:\(port)",
                ], stdin: "piped bytes\n")
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(receiver.wait(timeout: 30) == 0, "\(receiver.stderr.text)")
            #expect(try Data(contentsOf: inbox.appendingPathComponent("photo.png")) == Data(contentsOf: file))
            // Text piped in is a text, printed as --text is (not a file named stdin).
            #expect(!FileManager.default.fileExists(atPath: inbox.appendingPathComponent("stdin").path))
            // Standard output carries the received texts and nothing else; what happened is on standard error.
            #expect(
                receiver.stdout.text == "piped bytes\nhello desk\nhttps://example.com/a?b=c\n",
                "\(receiver.stdout.text)")
            #expect(receiver.stderr.text.contains("photo.png: offered public.png; chose public.png"))
            #expect(sent.stdout.isEmpty, "\(sent.stdout)")
            #expect(sent.stderr.contains("sent 4 of 4 items"))
            // Nothing but the received files: no partial, not even an empty partial store, is left behind.
            #expect(!FileManager.default.fileExists(atPath: inbox.appendingPathComponent(".share-partial").path))
        }

        @Test func proxyRepresentationWhenTheRichOneIsNotAccepted() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let (receiver, port) = try desk.startReceive(["--accept", "public.plain-text", "-v"], into: inbox)
            defer { receiver.stop() }
            let sent = laptop.run(["send", "--url", "https://example.com/x", "--to", "127.0.0.1:\(port)"])
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(receiver.wait(timeout: 30) == 0, "\(receiver.stderr.text.suffix(3000))")
            #expect(
                receiver.stderr.text.contains(
                    "offered public.url, public.utf8-plain-text; chose public.utf8-plain-text"))
            #expect(receiver.stdout.text == "https://example.com/x\n")
        }

        /// By default each item is one plain line (its name, size and kind as a person reads it) and the session a
        /// summary; the negotiation's reasoning only with --verbose; an error with --json is a JSON object too.
        @Test func plainWordsByDefaultAndTheReasoningWithVerbose() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let file = try laptop.folder("src").appendingPathComponent("firmware.bin")
            try makeFile(file, size: 3000)
            let (receiver, port) = try desk.startReceive(into: inbox)
            defer { receiver.stop() }
            let sent = laptop.run(["send", file.path, "--text", "hello", "--to", "127.0.0.1:\(port)"])
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(receiver.wait(timeout: 30) == 0)
            let lines = sent.stderr.split(separator: "\n")
            #expect(lines.first == "sending firmware.bin (2.9 KiB, BIN file)", "\(sent.stderr)")
            #expect(lines.count == 3 && lines.last?.hasPrefix("sent 2 of 2 items") == true, "\(sent.stderr)")
            for said in [sent.stderr, receiver.stderr.text] {
                #expect(!said.contains("dyn."), "\(said)")
                #expect(!said.contains("receiver's choice"), "\(said)")
            }

            let (verbose, port2) = try desk.startReceive(["-v"], into: inbox)
            defer { verbose.stop() }
            let told = laptop.run(["send", file.path, "--to", "127.0.0.1:\(port2)", "--verbose"])
            #expect(told.status == 0)
            #expect(verbose.wait(timeout: 30) == 0)
            #expect(told.stderr.contains("receiver's choice #1"), "\(told.stderr)")
            #expect(verbose.stderr.text.contains("receiver's choice #1"), "\(verbose.stderr.text)")

            let failed = laptop.run(["send", "--text", "x", "--to", "127.0.0.1:1", "--json"])
            #expect(failed.status == 69)
            let event = try #require(
                try JSONSerialization.jsonObject(with: Data(failed.stdout.utf8)) as? [String: Any], "\(failed.stdout)")
            #expect(event["event"] as? String == "error" && event["status"] as? Int == 69, "\(failed.stdout)")
        }

        @Test func refusalWhenNothingMatchesAndSizeLimits() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let source = try laptop.folder("src")
            let movie = source.appendingPathComponent("clip.mp4")
            try makeFile(movie, size: 5000)
            let (receiver, port) = try desk.startReceive(["--accept", "public.image", "--max-size", "1K"], into: inbox)
            defer { receiver.stop() }
            let photo = source.appendingPathComponent("big.png")
            try makeFile(photo, size: 4000)
            let sent = laptop.run(["send", movie.path, photo.path, "--to", "127.0.0.1:\(port)"])
            #expect(sent.status == 3)
            #expect(
                sent.stderr.contains(
                    "clip.mp4: no common representation: offered public.mpeg-4; receiver accepts public.image"
                ))
            #expect(sent.stderr.contains("big.png"))
            #expect(receiver.wait(timeout: 30) == 3)
            #expect(!FileManager.default.fileExists(atPath: inbox.appendingPathComponent("clip.mp4").path))
            #expect(!FileManager.default.fileExists(atPath: inbox.appendingPathComponent("big.png").path))
        }

        @Test func existingTargetsAreNeverOverwritten() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            try Data("keep me".utf8).write(to: inbox.appendingPathComponent("notes.md"))
            let source = try laptop.folder("src")
            let notes = source.appendingPathComponent("notes.md")
            try Data(String(repeating: "# notes\n", count: 200_000).utf8).write(to: notes)
            for expected in ["notes (2).md", "notes (3).md"] {
                let (receiver, port) = try desk.startReceive(into: inbox)
                defer { receiver.stop() }
                #expect(laptop.run(["send", notes.path, "--to", "127.0.0.1:\(port)"]).status == 0)
                #expect(receiver.wait(timeout: 30) == 0, "\(receiver.stderr.text.suffix(3000))")
                #expect(try Data(contentsOf: inbox.appendingPathComponent(expected)) == Data(contentsOf: notes))
            }
            #expect(try String(contentsOf: inbox.appendingPathComponent("notes.md"), encoding: .utf8) == "keep me")
        }

        @Test func untrustedSenderIsRefusedAndTheReceiverKeepsWaiting() throws {
            let desk = try TestDevice("desk")
            let stranger = try TestDevice("stranger")
            stranger.trust(desk)
            let inbox = try desk.folder("inbox")
            let (receiver, port) = try desk.startReceive(into: inbox)
            defer { receiver.stop() }
            let sent = stranger.run(["send", "--text", "hi", "--to", "127.0.0.1:\(port)"])
            #expect(sent.status == 77)
            #expect(sent.stderr.contains("share trust add \(stranger.id)"))
            #expect(receiver.stderr.waitForLine(containing: "not trusted", timeout: 10) != nil)
            #expect(receiver.process.isRunning)
            // A trusted device still gets through afterwards.
            let friend = try TestDevice("friend")
            desk.trust(friend)
            friend.trust(desk)
            #expect(friend.run(["send", "--text", "after", "--to", "127.0.0.1:\(port)"]).status == 0)
            #expect(receiver.wait(timeout: 30) == 0, "\(receiver.stderr.text.suffix(3000))")
            #expect(receiver.stdout.text == "after\n", "\(receiver.stdout.text)")
        }

        @Test func badArgumentsAndMissingFiles() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let missing = laptop.run(["send", "/nonexistent/file.txt", "--to", "127.0.0.1:9"])
            #expect(missing.status == 66)
            #expect(missing.stderr.contains("/nonexistent/file.txt"))
            #expect(missing.stderr.split(separator: "\n").count == 1)
            #expect(laptop.run(["send", "--to", "127.0.0.1:9"]).status == 64)
            #expect(laptop.run(["send", "--text", "x", "--to", "127.0.0.1:9", "--chunk-size", "1G"]).status == 64)
            #expect(
                laptop.run(["send", "--text", "x", "--to", "127.0.0.1:9", "--type", "com.nobody.nothing"]).status == 64)
            let unreachable = laptop.run(["send", "--text", "x", "--to", "127.0.0.1:1", "--timeout", "2"])
            #expect(unreachable.status == 69)
            #expect(desk.run(["receive", "--max-size", "lots"]).status == 64)
            #expect(desk.run(["receive", "--accept", "com.nobody.nothing", "--timeout", "1"]).status == 64)
        }
        @Test func fromAcceptsOnlyThatDevice() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let phone = try TestDevice("phone")
            desk.trust(phone)
            phone.trust(desk)
            let inbox = try desk.folder("inbox")
            let (receiver, port) = try desk.startReceive(["--from", "laptop"], into: inbox)
            defer { receiver.stop() }
            #expect(phone.run(["send", "--text", "not you", "--to", "127.0.0.1:\(port)"]).status == 77)
            #expect(laptop.run(["send", "--text", "me", "--to", "127.0.0.1:\(port)"]).status == 0)
            #expect(receiver.wait(timeout: 30) == 0, "\(receiver.stderr.text.suffix(3000))")
            #expect(!receiver.stdout.text.contains("not you"))
        }

        @Test func stoppingTheReceiverKeepsThePartialAndSaysHowToResume() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let file = try laptop.folder("src").appendingPathComponent("big.bin")
            try makeFile(file, size: 32 << 20)
            let (receiver, port) = try desk.startReceive(into: inbox)
            let proxy = try TCPProxy(upstreamPort: port)
            defer { proxy.stop() }
            proxy.bytesPerSecond = 8 << 20
            let sender = try laptop.background([
                "send", file.path, "--to", "127.0.0.1:\(proxy.port)", "--chunk-size", "256K",
            ])
            #expect(waitUntil(timeout: 30) { ledgerChunkCount(inbox) > 0 })
            kill(receiver.pid, SIGTERM)
            #expect(receiver.wait(timeout: 30) == 75, "\(receiver.stderr.text)")
            #expect(receiver.stderr.text.contains("partial items are kept"))
            #expect(sender.wait(timeout: 30) == 75)
            #expect(ledgerChunkCount(inbox) > 0)
        }

        @Test func anIdleReceiveStoppedSpeaksOfNoResume() throws {
            let desk = try TestDevice("desk")
            let (receiver, _) = try desk.startReceive(into: try desk.folder("inbox"))
            kill(receiver.pid, SIGTERM)
            #expect(receiver.wait(timeout: 30) == 75, "\(receiver.stderr.text)")
            #expect(receiver.stderr.text.contains("nothing was received"), "\(receiver.stderr.text)")
            #expect(!receiver.stderr.text.contains("resume"), "\(receiver.stderr.text)")
        }

        @Test func aSecondSenderIsToldTheReceiverIsBusy() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let file = try laptop.folder("src").appendingPathComponent("big.bin")
            try makeFile(file, size: 16 << 20)
            let (receiver, port) = try desk.startReceive(into: inbox)
            defer { receiver.stop() }
            let proxy = try TCPProxy(upstreamPort: port)
            defer { proxy.stop() }
            proxy.bytesPerSecond = 4 << 20
            let first = try laptop.background(["send", file.path, "--to", "127.0.0.1:\(proxy.port)"])
            #expect(waitUntil(timeout: 30) { ledgerChunkCount(inbox) > 0 })
            let second = laptop.run(["send", "--text", "me too", "--to", "127.0.0.1:\(port)"])
            #expect(second.status == 3)
            #expect(second.stderr.contains("busy"))
            #expect(first.wait(timeout: 60) == 0)
        }

        @Test func jsonEventsForScripts() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let (receiver, port) = try desk.startReceive(["--json"], into: inbox)
            defer { receiver.stop() }
            let sent = laptop.run(["send", "--text", "hi", "--to", "127.0.0.1:\(port)", "--json"])
            #expect(sent.status == 0)
            #expect(receiver.wait(timeout: 30) == 0, "\(receiver.stderr.text.suffix(3000))")
            for output in [sent.stdout, receiver.stdout.text] {
                for line in output.split(separator: "\n") {
                    let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                    #expect(object?["event"] is String, "\(line)")
                }
            }
            #expect(sent.stdout.contains("\"event\":\"delivered\""))
            #expect(receiver.stdout.text.contains("\"event\":\"received-text\""))
            #expect(receiver.stdout.text.contains("\"text\":\"hi\""))
        }
    }
}
