import Foundation
import ShareTestSupport
import Testing

extension EndToEnd {
    /// `share send --code` and `share receive CODE` between devices that never paired, and with the real `wormhole`
    /// command (Debian's magic-wormhole 0.12) both ways, through a local mailbox server and transit relay.
    @Suite(.serialized) struct CodeEndToEndTests {
        let servers: LocalWormholeServers

        init() throws { servers = try LocalWormholeServers() }

        /// The servers, and direct connections on loopback only.
        var serverFlags: [String] {
            [
                "--server", servers.mailboxURL, "--relay", "tcp:127.0.0.1:\(servers.relayPort)", "--advertise",
                "127.0.0.1",
            ]
        }

        func wormhole(_ arguments: [String], in directory: URL) throws -> Spawned {
            try Spawned(
                "/usr/bin/wormhole", servers.wormholeArguments + arguments, directory: directory,
                environment: ["LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"])
        }

        /// Starts `share send --code …` and returns it with the code it printed.
        func sendByCode(_ device: TestDevice, _ arguments: [String]) throws -> (BackgroundShare, String) {
            let sender = try device.background(["send", "--code"] + serverFlags + arguments)
            guard let line = sender.stderr.waitForLine(containing: "share receive ", timeout: 30),
                line.hasPrefix("code "), let code = line.split(separator: " ").dropFirst().first
            else {
                sender.stop()
                throw TestFailure("no code printed: \(sender.stderr.text)")
            }
            return (sender, String(code))
        }

        func digest(_ url: URL) -> String {
            let result = try? run("/usr/bin/sha256sum", [url.path])
            return String(result?.1.split(separator: " ").first ?? "")
        }

        @Test func devicesThatNeverPairedSendByCodeWithTheWholeEngine() throws {
            let laptop = try TestDevice("laptop")
            let desk = try TestDevice("desk")
            let source = try laptop.folder("src")
            let file = source.appendingPathComponent("report.pdf")
            try makeFile(file, size: 3 << 20)
            let folder = try sampleFolder(at: source.appendingPathComponent("Photos"), bigFile: 1 << 20)
            let (sender, code) = try sendByCode(laptop, [file.path, folder.path, "--text", "see you at 8"])
            defer { sender.stop() }
            let inbox = try desk.folder("inbox")
            let received = desk.run(["receive", code, "--yes", "--into", inbox.path] + serverFlags)
            #expect(received.status == 0, "\(received.stderr)")
            #expect(sender.wait(timeout: 60) == 0, "\(sender.stderr.text)")
            #expect(received.stdout == "see you at 8\n", "\(received.stdout)")
            #expect(digest(inbox.appendingPathComponent("report.pdf")) == digest(file))
            // Everything but the link that leaves the folder, which a sender never offers.
            var expected = tree(folder, times: false)
            expected.removeValue(forKey: "outside")
            #expect(tree(inbox.appendingPathComponent("Photos"), times: false) == expected)
            #expect(sender.stderr.text.contains("sent 3 of 3 items to desk by code"), "\(sender.stderr.text)")
            // The first line says which mailbox server carries the exchange; the hint carries it to the other side.
            let said = sender.stderr.text.split(separator: "\n").filter { !$0.hasPrefix("left out ") }
            #expect(said.first == "by code through the mailbox server \(servers.mailboxURL)", "\(sender.stderr.text)")
            #expect(
                said.contains { $0.contains("share receive --server \(servers.mailboxURL) \(code)") },
                "\(sender.stderr.text)")
            #expect(received.stderr.hasPrefix("by code through the mailbox server"), "\(received.stderr)")
            #expect(sender.stderr.text.contains("direct"), "\(sender.stderr.text)")
            // Nothing was trusted on either side.
            for device in [laptop, desk] {
                let list = device.run(["trust", "list"])
                #expect(!list.stdout.contains("laptop") && !list.stdout.contains("desk"), "\(list.stdout)")
            }
        }

        /// Neither side listens: the transit relay carries share's own TLS session.
        @Test func throughTheTransitRelayWhenNeitherSideListens() throws {
            let laptop = try TestDevice("laptop")
            let desk = try TestDevice("desk")
            let file = try laptop.folder("src").appendingPathComponent("movie.mov")
            try makeFile(file, size: 5 << 20)
            let (sender, code) = try sendByCode(laptop, [file.path, "--no-listen"])
            defer { sender.stop() }
            let inbox = try desk.folder("inbox")
            let received = desk.run(["receive", code, "--yes", "--no-listen", "--into", inbox.path] + serverFlags)
            #expect(received.status == 0, "\(received.stderr)")
            #expect(sender.wait(timeout: 60) == 0, "\(sender.stderr.text)")
            #expect(digest(inbox.appendingPathComponent("movie.mov")) == digest(file))
            #expect(sender.stderr.text.contains("via relay 127.0.0.1:\(servers.relayPort)"), "\(sender.stderr.text)")
        }

        /// A transfer by code that breaks resumes where the receiver stopped when both ends run again with the same
        /// code: the receiver keeps its partial under an id derived from the code (the certificates are one-off).
        @Test func aBrokenTransferResumesWhenBothRunAgainWithTheSameCode() throws {
            let laptop = try TestDevice("laptop")
            let desk = try TestDevice("desk")
            let file = try laptop.folder("src").appendingPathComponent("backup.tar")
            try makeFile(file, size: 96 << 20)
            let code = "\(Int.random(in: 200...900))-resume-test"
            let inbox = try desk.folder("inbox")
            let args = ["--yes", "--into", inbox.path] + serverFlags
            let first = try laptop.background(
                ["send", "--use-code", code, "--chunk-size", "256K", file.path] + serverFlags)
            defer { first.stop() }
            #expect(first.stderr.waitForLine(containing: "share receive", timeout: 30) != nil)
            let cut = try desk.background(["receive", code] + args)
            #expect(waitUntil(timeout: 60) { ledgerChunkCount(inbox) >= 40 }, "\(cut.stderr.text)")
            kill(cut.pid, SIGKILL)
            _ = cut.wait(timeout: 10)
            first.stop()
            let held = ledgerChunkCount(inbox)
            let second = try laptop.background(
                ["send", "--use-code", code, "--chunk-size", "256K", "--json", file.path] + serverFlags)
            defer { second.stop() }
            #expect(second.stdout.waitForLine(containing: "\"code\"", timeout: 30) != nil, "\(second.stderr.text)")
            let received = desk.run(["receive", code] + args)
            #expect(received.status == 0, "\(received.stderr)")
            #expect(second.wait(timeout: 60) == 0, "\(second.stderr.text)")
            #expect(digest(inbox.appendingPathComponent("backup.tar")) == digest(file))
            let sent = try #require(summary(second.stdout.text)?["bytesSent"] as? Int)
            #expect(sent <= (96 << 20) - (held - 8) * (256 << 10), "held \(held) chunks, sent \(sent)")
        }

        @Test func theReceiverSeesTheOfferAndDeclines() throws {
            let laptop = try TestDevice("laptop")
            let desk = try TestDevice("desk")
            let file = try laptop.folder("src").appendingPathComponent("secret.txt")
            try makeFile(file, size: 1000)
            let (sender, code) = try sendByCode(laptop, [file.path])
            defer { sender.stop() }
            let inbox = try desk.folder("inbox")
            let receiver = try desk.background(
                ["receive", code, "--into", inbox.path] + serverFlags, interactive: true)
            defer { receiver.stop() }
            #expect(receiver.stderr.waitForLine(containing: "accept? [y/N]", timeout: 30) != nil)
            #expect(receiver.stderr.text.contains("secret.txt"), "\(receiver.stderr.text)")
            receiver.answer("n")
            #expect(receiver.wait(timeout: 30) == 3, "\(receiver.stderr.text)")
            #expect(sender.wait(timeout: 30) == 3, "\(sender.stderr.text)")
            #expect((try? FileManager.default.contentsOfDirectory(atPath: inbox.path))?.isEmpty == true)
        }

        @Test func aWrongCodeFailsOnBothSidesWithOneSentence() throws {
            let laptop = try TestDevice("laptop")
            let desk = try TestDevice("desk")
            let (sender, code) = try sendByCode(laptop, ["--text", "for the right person"])
            defer { sender.stop() }
            let nameplate = code.split(separator: "-")[0]
            let received = desk.run(["receive", "\(nameplate)-wrong-guess", "--yes"] + serverFlags)
            #expect(received.status == 3, "\(received.stderr)")
            #expect(failureLines(received.stderr).count == 1, "\(received.stderr)")
            #expect(received.stderr.contains("code was wrong"), "\(received.stderr)")
            #expect(sender.wait(timeout: 30) == 3, "\(sender.stderr.text)")
            #expect(sender.stderr.text.contains("code was wrong"), "\(sender.stderr.text)")
            #expect(received.stdout.isEmpty)
        }

        @Test func aTextBothWaysWithTheWormholeCommand() throws {
            let desk = try TestDevice("desk")
            let scratch = try desk.folder("scratch")
            // wormhole → share
            let sender = try wormhole(["send", "--text", "from wormhole ✓"], in: scratch)
            defer { sender.stop() }
            let line = try #require(sender.waitForLine(containing: "Wormhole code is: "), "\(sender.output)")
            let code = line.components(separatedBy: "Wormhole code is: ").last!.trimmingCharacters(in: .whitespaces)
            let received = desk.run(["receive", code, "--yes"] + serverFlags)
            #expect(received.status == 0, "\(received.stderr)")
            #expect(received.stdout == "from wormhole ✓\n", "\(received.stdout)")
            #expect(sender.wait(timeout: 30) == 0, "\(sender.output)")
            // share → wormhole
            let (shareSender, shareCode) = try sendByCode(desk, ["--text", "from share ✓"])
            defer { shareSender.stop() }
            let receiver = try wormhole(["receive", "--only-text", shareCode], in: scratch)
            defer { receiver.stop() }
            #expect(receiver.wait(timeout: 30) == 0, "\(receiver.output)")
            #expect(receiver.output.contains("from share ✓"), "\(receiver.output)")
            #expect(shareSender.wait(timeout: 30) == 0, "\(shareSender.stderr.text)")
        }

        /// `share receive CODE` applies its accept list and --max-size to what the `wormhole` command offers: a
        /// text file to an images-only receiver, and 6 bytes to a 3-byte limit, are refused and nothing is written
        /// (both were taken).
        @Test func aCodeReceiveObeysItsAcceptListAndLimits() throws {
            let desk = try TestDevice("desk")
            let scratch = try desk.folder("scratch")
            try Data("sixsix".utf8).write(to: scratch.appendingPathComponent("notes.txt"))
            for limits in [["--accept", "public.image"], ["--max-size", "3"]] {
                let sender = try wormhole(["send", "notes.txt"], in: scratch)
                defer { sender.stop() }
                let line = try #require(sender.waitForLine(containing: "Wormhole code is: "), "\(sender.output)")
                let code = line.components(separatedBy: "Wormhole code is: ").last!.trimmingCharacters(in: .whitespaces)
                let inbox = try desk.folder("inbox-\(limits[0].dropFirst(2))")
                let received = desk.run(["receive", code, "--yes", "--into", inbox.path] + limits + serverFlags)
                #expect(
                    received.status == 3,
                    "\(limits): \(received.stderr) — the wormhole client said: \(sender.output)")
                #expect(
                    try FileManager.default.contentsOfDirectory(atPath: inbox.path).isEmpty,
                    "\(limits): something was written")
                // The wormhole client is told and ends (a wait that lapses is no exit).
                let ended = sender.wait(timeout: 30)
                #expect(ended != nil && ended != 0, "\(sender.output)")
            }
        }

        /// Several items for a wormhole client, which takes one per code: the client is told why and exits, as it
        /// does when wormhole's own sender fails, instead of waiting.
        @Test func severalItemsToTheWormholeCommandTellItWhy() throws {
            let desk = try TestDevice("desk")
            let scratch = try desk.folder("scratch")
            let (sender, code) = try sendByCode(desk, ["--text", "one", "--text", "two"])
            defer { sender.stop() }
            let receiver = try wormhole(["receive", "--only-text", code], in: scratch)
            defer { receiver.stop() }
            let status = receiver.wait(timeout: 30)
            #expect(status != nil && status != 0, "\(receiver.output)")
            #expect(receiver.output.contains("several items"), "\(receiver.output)")
            #expect(sender.wait(timeout: 30) == 64, "\(sender.stderr.text)")
        }

        /// 1 GiB each way with the reference client (its pace bounds the time: about 10 s per direction here).
        @Test func aGibibyteBothWaysWithTheWormholeCommand() throws {
            let desk = try TestDevice("desk")
            let scratch = try desk.folder("scratch")
            let file = scratch.appendingPathComponent("disk image.iso")
            try makeFile(file, size: 1 << 30)
            let expected = digest(file)
            // wormhole → share (the wormhole side does not listen: it connects to share's loopback hint)
            let sender = try wormhole(["send", "--hide-progress", "--no-listen", file.path], in: scratch)
            defer { sender.stop() }
            let line = try #require(sender.waitForLine(containing: "Wormhole code is: "), "\(sender.output)")
            let code = line.components(separatedBy: "Wormhole code is: ").last!.trimmingCharacters(in: .whitespaces)
            let inbox = try desk.folder("inbox")
            let received = desk.run(["receive", code, "--yes", "--into", inbox.path] + serverFlags, timeout: 300)
            #expect(received.status == 0, "\(received.stderr)")
            #expect(sender.wait(timeout: 60) == 0, "\(sender.output)")
            #expect(digest(inbox.appendingPathComponent("disk image.iso")) == expected)
            try? FileManager.default.removeItem(at: inbox.appendingPathComponent("disk image.iso"))
            // share → wormhole
            let out = try desk.folder("out")
            let (shareSender, shareCode) = try sendByCode(desk, [file.path])
            defer { shareSender.stop() }
            let receiver = try wormhole(
                ["receive", "--accept-file", "--hide-progress", "--no-listen", shareCode], in: out)
            defer { receiver.stop() }
            #expect(receiver.wait(timeout: 300) == 0, "\(receiver.output)")
            #expect(shareSender.wait(timeout: 30) == 0, "\(shareSender.stderr.text)")
            #expect(digest(out.appendingPathComponent("disk image.iso")) == expected)
        }
    }
}
