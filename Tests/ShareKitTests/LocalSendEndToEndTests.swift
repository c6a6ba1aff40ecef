import Foundation
import Glibc
import ShareTestSupport
import Testing

extension EndToEnd {
    /// The agent speaking LocalSend with a LocalSend implementation nobody here wrote (localsendd, from PyPI) as
    /// the phone, both in a network namespace of the test's own (multicast discovery on its loopback): discovery
    /// both ways, uploads from the phone through `share pending`, sends to the phone, a PIN, a decline, a cancel half
    /// way and a resend, 100 small files and 1 GiB.
    @Suite(.serialized) struct LocalSendEndToEndTests {
        let namespace: TestNamespace

        init() throws {
            guard let namespace = TestNamespace() else {
                throw TestFailure("LocalSend tests need root and ip netns (scripts/setup.sh installs iproute2)")
            }
            self.namespace = namespace
        }

        /// The desk's agent in the namespace, LocalSend on port 53318.
        func agent(_ desk: TestDevice, environment: [String: String] = [:]) throws -> BackgroundShare {
            let agent = try BackgroundShare(
                desk.withConfig([
                    "agent", "--port", "0", "--listen", "127.0.0.1", "--no-discovery", "--localsend",
                    "--localsend-port",
                    "53318",
                ]), environment: environment, wrapper: namespace.wrapper)
            guard agent.stderr.waitForLine(containing: "LocalSend on port", timeout: 30) != nil else {
                agent.stop()
                throw TestFailure("the agent did not start LocalSend: \(agent.stderr.text)")
            }
            return agent
        }

        /// `share` in the namespace.
        func share(_ desk: TestDevice, _ arguments: [String], timeout: Double = 300) throws -> CommandResult {
            let process = try BackgroundShare(desk.withConfig(arguments), wrapper: namespace.wrapper)
            let status = process.wait(timeout: timeout) ?? -9
            return CommandResult(status: status, stdout: process.stdout.text, stderr: process.stderr.text)
        }

        /// Waits until each side has seen the other by multicast: the phone lists the desk, `share peers` the phone.
        func meet(_ desk: TestDevice, _ phone: LocalSendPhone) throws {
            let control = try phone.control()
            _ = try control.waitForState(timeout: 30) { state in
                ((state["devices"] as? [[String: Any]]) ?? []).contains { $0["alias"] as? String == desk.name }
            }
            #expect(waitUntil(timeout: 30) { desk.run(["peers"]).stdout.contains("\(phone.alias)\tLocalSend") })
        }

        /// The id of the one offer `share pending` lists, once it is there.
        func pendingOffer(_ desk: TestDevice) -> String? {
            var id: String?
            _ = waitUntil(timeout: 60) {
                let listed = desk.run(["pending"]).stdout
                id = listed.split(separator: "\n").first { $0.contains("(LocalSend)") }?.split(separator: " ").first
                    .map(String.init)
                return id != nil
            }
            return id
        }

        func inboxFolder(_ desk: TestDevice, _ phone: LocalSendPhone) -> URL {
            desk.config.appendingPathComponent("data/inbox").appendingPathComponent(
                "\(phone.alias) (LocalSend \(phone.fingerprint.prefix(8)))")
        }

        func digest(_ url: URL) -> String {
            let result = try? run("/usr/bin/sha256sum", [url.path])
            return String(result?.1.split(separator: " ").first ?? "")
        }

        @Test func aPhoneSendsAHundredFilesAndTheUserAcceptsThemInPending() throws {
            let desk = try TestDevice("desk")
            let daemon = try agent(desk)
            defer { daemon.stop() }
            let phone = try LocalSendPhone(in: namespace, alias: "phone")
            try meet(desk, phone)
            #expect(desk.run(["status"]).stdout.contains("LocalSend: port 53318"), "\(desk.run(["status"]).stdout)")
            let photos = try desk.folder("photos")
            var files: [URL] = []
            for number in 0..<100 {
                let file = photos.appendingPathComponent(String(format: "IMG_%04d.jpg", number))
                try makeFile(file, size: 1_000 + number * 397)
                files.append(file)
            }
            let outcome = Outcome()
            let all = files
            Thread.detachNewThread { outcome.set(Result { try phone.send(all, to: "desk", timeout: 120) }) }
            let id = try #require(pendingOffer(desk), "no pending offer")
            let listed = desk.run(["pending"]).stdout
            #expect(listed.contains("phone (LocalSend): 100 item(s)"), "\(listed)")
            #expect(listed.contains("IMG_0000.jpg — JPEG image"), "\(listed)")
            #expect(desk.run(["accept", id]).status == 0)
            let (kind, detail) = try #require(try outcome.wait(timeout: 120)?.get())
            #expect(kind == "sent", "\(detail)")
            let inbox = inboxFolder(desk, phone)
            for file in files {
                #expect(digest(inbox.appendingPathComponent(file.lastPathComponent)) == digest(file))
            }
            let left = try FileManager.default.contentsOfDirectory(atPath: inbox.path)
            #expect(left.count == 100 && !left.contains { $0.hasSuffix(".part") }, "\(left)")
        }

        @Test func aPinIsAskedForAndADeclineReachesThePhone() throws {
            let desk = try TestDevice("desk")
            // The PIN from agent.json (beside another section the agent does not use itself).
            try Data(
                #"{"localsend": {"pin": "4711", "answerTimeout": 60}, "wormhole": {"server": "ws://127.0.0.1:1/v1"}}"#
                    .utf8
            ).write(to: desk.config.appendingPathComponent("agent.json"))
            let daemon = try agent(desk)
            defer { daemon.stop() }
            let phone = try LocalSendPhone(in: namespace, alias: "phone")
            try meet(desk, phone)
            let note = try desk.folder("out").appendingPathComponent("note.txt")
            try Data("the key is under the mat\n".utf8).write(to: note)
            #expect(try phone.send([note], to: "desk").kind == "pin_required")
            #expect(try phone.send([note], to: "desk", pin: "1234").kind == "pin_required")
            let outcome = Outcome()
            Thread.detachNewThread { outcome.set(Result { try phone.send([note], to: "desk", pin: "4711") }) }
            let id = try #require(pendingOffer(desk))
            #expect(desk.run(["decline", id]).status == 0)
            let (kind, _) = try #require(try outcome.wait(timeout: 60)?.get())
            #expect(kind == "declined")
            #expect(
                !FileManager.default.fileExists(
                    atPath: inboxFolder(desk, phone).appendingPathComponent("note.txt").path))
        }

        @Test func theDeskSendsFilesAFolderAndATextToPhonesThatAskForAPinOrDecline() throws {
            let desk = try TestDevice("desk")
            let daemon = try agent(desk)
            defer { daemon.stop() }
            let phone = try LocalSendPhone(in: namespace, alias: "phone", pin: "2468")
            let pocket = try LocalSendPhone(in: namespace, alias: "pocket", port: 53319, unattended: false)
            try meet(desk, phone)
            try meet(desk, pocket)
            let out = try desk.folder("out")
            let report = out.appendingPathComponent("report.pdf")
            try makeFile(report, size: 3 << 20)
            let album = out.appendingPathComponent("album")
            try FileManager.default.createDirectory(
                at: album.appendingPathComponent("day 2"), withIntermediateDirectories: true)
            try makeFile(album.appendingPathComponent("a.jpg"), size: 20_000)
            try makeFile(album.appendingPathComponent("day 2/b.jpg"), size: 30_000)

            let refused = try share(desk, ["send", "--direct", report.path, "--to", "phone"])
            #expect(refused.status != 0)
            #expect(
                failureLines(refused.stderr) == ["share: phone (LocalSend) asks for a PIN; give it with --pin"],
                "\(refused.stderr)")
            let sent = try share(
                desk,
                [
                    "send", "--direct", report.path, album.path, "--text", "dinner at 8", "--to", "phone", "--pin",
                    "2468",
                ])
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(sent.stderr.contains("sent 3 file(s) and 1 text(s) to phone by LocalSend"), "\(sent.stderr)")
            #expect(digest(phone.downloads.appendingPathComponent("report.pdf")) == digest(report))
            #expect(
                digest(phone.downloads.appendingPathComponent("b.jpg"))
                    == digest(album.appendingPathComponent("day 2/b.jpg")))
            let texts = try FileManager.default.contentsOfDirectory(atPath: phone.downloads.path).filter {
                $0.hasPrefix("message")
            }
            #expect(texts.count == 1)
            #expect(
                try String(contentsOf: phone.downloads.appendingPathComponent(texts[0]), encoding: .utf8)
                    == "dinner at 8")

            // The pocket's user says no.
            let control = try pocket.control()
            let sender = try BackgroundShare(
                desk.withConfig(["send", "--direct", report.path, "--to", "pocket"]), wrapper: namespace.wrapper)
            defer { sender.stop() }
            let asked = try control.waitForState(timeout: 60) { ($0["incoming"] as? [String: Any]) != nil }
            let session = try #require((asked["incoming"] as? [String: Any])?["sessionId"] as? String)
            _ = try control.call("confirm_receive", ["sessionId": session, "confirmed": false])
            #expect(sender.wait(timeout: 60) == 3, "\(sender.stderr.text)")
            #expect(
                failureLines(sender.stderr.text) == ["share: pocket (LocalSend) declined the files"],
                "\(sender.stderr.text)")
        }

        @Test func aPhoneThatIsAwayGetsItsJobWhenItIsBack() throws {
            let desk = try TestDevice("desk")
            let daemon = try agent(desk)
            defer { daemon.stop() }
            let phone = try LocalSendPhone(in: namespace, alias: "phone")
            try meet(desk, phone)
            let seen = phone.fingerprint
            phone.switchOff()
            let photo = try desk.folder("out").appendingPathComponent("beach.jpg")
            try makeFile(photo, size: 700_000)
            // The agent runs: the send becomes a job of its outbox, which waits for the phone.
            let queued = try share(desk, ["send", photo.path, "--to", "phone"])
            #expect(queued.status == 0, "\(queued.stderr)")
            #expect(queued.stderr.contains("queued job"), "\(queued.stderr)")
            #expect(
                waitUntil(timeout: 30) {
                    desk.run(["jobs"]).stdout.contains("not on the network")
                        || desk.run(["jobs"]).stdout.contains("cannot reach")
                })
            #expect(!FileManager.default.fileExists(atPath: phone.downloads.appendingPathComponent("beach.jpg").path))
            try phone.switchOn()
            #expect(phone.fingerprint == seen)
            #expect(
                waitUntil(timeout: 60) {
                    FileManager.default.fileExists(atPath: phone.downloads.appendingPathComponent("beach.jpg").path)
                })
            #expect(
                waitUntil(timeout: 30) { desk.run(["jobs"]).stdout.contains("delivered") },
                "\(desk.run(["jobs"]).stdout)")
            #expect(digest(phone.downloads.appendingPathComponent("beach.jpg")) == digest(photo))
        }

        @Test func aJobCancelledHalfWayTellsThePhone() throws {
            let desk = try TestDevice("desk")
            let daemon = try agent(desk)
            defer { daemon.stop() }
            let phone = try LocalSendPhone(in: namespace, alias: "phone", unattended: false)
            try meet(desk, phone)
            let big = try desk.folder("big").appendingPathComponent("film.mkv")
            try makeFile(big, size: 1 << 30)
            let control = try phone.control()
            let queued = try share(desk, ["send", big.path, "--to", "phone"])
            let job = try #require(
                queued.stderr.components(separatedBy: "queued job ").last?.split(separator: " ").first.map(String.init))
            // The phone's user accepts; half way the desk's user cancels the job.
            let asked = try control.waitForState(timeout: 60) { ($0["incoming"] as? [String: Any]) != nil }
            let session = try #require((asked["incoming"] as? [String: Any])?["sessionId"] as? String)
            _ = try control.call("confirm_receive", ["sessionId": session, "confirmed": true])
            _ = try control.waitForState(timeout: 60) { state in
                ((state["active"] as? [String: Any])?["bytesDone"] as? Int ?? 0) > 150 << 20
            }
            let cancelled = desk.run(["cancel", job])
            #expect(cancelled.status == 0, "\(cancelled.stderr)")
            let ended = try control.waitForState(timeout: 60) { ($0["result"] as? [String: Any]) != nil }
            let kind = (ended["result"] as? [String: Any])?["kind"] as? String
            #expect(kind == "recv_cancelled" || kind == "recv_failed", "\(ended)")
            #expect(
                waitUntil(timeout: 30) {
                    ((try? FileManager.default.contentsOfDirectory(atPath: phone.downloads.path)) ?? ["?"]).isEmpty
                })
            #expect(desk.run(["jobs"]).stdout.contains("cancelled"))
        }

        @Test func aGibibyteBothWaysAndACancelHalfWayThenAResend() throws {
            let desk = try TestDevice("desk")
            let daemon = try agent(desk)
            defer { daemon.stop() }
            let phone = try LocalSendPhone(in: namespace, alias: "phone")
            try meet(desk, phone)
            // Trusted by fingerprint without asking: uploads go straight in.
            let trusted = desk.run(["trust", "add", "--localsend", phone.fingerprint, "--name", "my phone", "--no-ask"])
            #expect(trusted.status == 0, "\(trusted.stderr)")
            let big = try desk.folder("big").appendingPathComponent("video.mp4")
            try makeFile(big, size: 1 << 30)

            // Cancelled by the phone half way: nothing of it stays in the inbox. (The control connection is closed
            // afterwards: while one is open, the phone asks its user before taking an upload.)
            do {
                let control = try phone.control()
                _ = try? control.call("dismiss_result")
                _ = try control.call("send", ["to": "desk", "files": [big.path]])
                _ = try control.waitForState(timeout: 60) { state in
                    ((state["active"] as? [String: Any])?["bytesDone"] as? Int ?? 0) > 200 << 20
                }
                _ = try control.call("cancel")
                let cancelled = try control.waitForState(timeout: 60) { ($0["result"] as? [String: Any]) != nil }
                #expect((cancelled["result"] as? [String: Any])?["kind"] as? String == "cancelled")
            }
            let inbox = inboxFolder(desk, phone)
            #expect(
                waitUntil(timeout: 30) {
                    ((try? FileManager.default.contentsOfDirectory(atPath: inbox.path)) ?? []).isEmpty
                })

            // Sent again, whole.
            let started = Date()
            #expect(try phone.send([big], to: "desk").kind == "sent")
            print(
                "LocalSend phone -> share agent, 1 GiB: \(String(format: "%.2f", Date().timeIntervalSince(started))) s")
            #expect(digest(inbox.appendingPathComponent("video.mp4")) == digest(big))

            let back = Date()
            // Through the agent's outbox, followed to the end (--wait).
            let sent = try share(desk, ["send", big.path, "--to", "phone", "--wait"])
            #expect(sent.status == 0, "\(sent.stderr)")
            print("share send -> LocalSend phone, 1 GiB: \(String(format: "%.2f", Date().timeIntervalSince(back))) s")
            #expect(digest(phone.downloads.appendingPathComponent("video.mp4")) == digest(big))
        }
    }
}

/// A result handed from a thread to the test.
final class Outcome: @unchecked Sendable {  // guarded by `condition`
    private let condition = NSCondition()
    private var value: Result<(kind: String, detail: String), any Error>?

    func set(_ value: Result<(kind: String, detail: String), any Error>) {
        condition.withLock {
            self.value = value
            condition.broadcast()
        }
    }

    func wait(timeout: Double) throws -> Result<(kind: String, detail: String), any Error>? {
        let deadline = Date().addingTimeInterval(timeout)
        return condition.withLock {
            while value == nil, condition.wait(until: deadline) {}
            return value
        }
    }
}
