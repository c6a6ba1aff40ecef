import Foundation
import Testing

extension EndToEndAgents {
    /// Offers from devices that are not the owner's wait for the user: the agent holds them as pending (with a
    /// preview), `share accept` lets them in, `share decline` tells the sender why; `share receive --ask` asks on
    /// the terminal.
    @Suite(.serialized) struct AskFirstEndToEndTests {
        /// A desk with an agent, and a friend (a group device) that knows where it listens.
        func deskAndFriend() throws -> (
            desk: TestDevice, friend: TestDevice, agent: BackgroundShare, inbox: URL, port: Int
        ) {
            let desk = try TestDevice("desk")
            let friend = try TestDevice("friend")
            desk.trust(friend, flags: ["--group", "climbing"], asks: true)
            let inbox = try desk.folder("inbox")
            let (agent, port) = try desk.startAgent(["--no-discovery", "--inbox", inbox.path])
            friend.trust(desk, address: "127.0.0.1:\(port)", flags: ["--group", "climbing"])
            return (desk, friend, agent, inbox, port)
        }

        func pendingID(_ desk: TestDevice) -> String? {
            let listed = desk.run(["pending", "--json"]).stdout
            guard let entries = try? JSONSerialization.jsonObject(with: Data(listed.utf8)) as? [[String: Any]] else {
                return nil
            }
            return entries.first?["id"] as? String
        }

        /// A send waiting for the person's answer from a device the person then removes from the trust list: its
        /// offer goes from the pending list (nothing could reach it), and the sender, offering again, is refused
        /// and told what would let it in.
        @Test func aWaitingSendFromADeviceNoLongerTrustedIsRefusedAndItsOfferGoes() throws {
            let (desk, friend, agent, _, _) = try deskAndFriend()
            defer { agent.stop() }
            let file = try friend.folder("src").appendingPathComponent("topo.pdf")
            try makeFile(file, size: 30_000)
            let sender = try friend.background([
                "send", file.path, "--to", "desk", "--direct", "--answer-timeout", "60",
            ])
            defer { sender.stop() }
            #expect(sender.stderr.waitForLine(containing: "desk asks before accepting", timeout: 30) != nil)
            #expect(waitUntil(timeout: 30) { pendingID(desk) != nil })
            let removed = desk.run(["trust", "remove", "friend"])
            #expect(
                removed.status == 0 && removed.stderr.contains("its 1 offer(s) waiting for your answer are gone"),
                "\(removed.stderr)")
            #expect(pendingID(desk) == nil, "\(desk.run(["pending"]).stdout)")
            #expect(sender.wait(timeout: 30) == 77, "\(sender.stderr.text)\n\(agent.stderr.text)")
            #expect(sender.stderr.text.contains("refused this device"), "\(sender.stderr.text)")
            #expect(sender.stderr.text.contains("share trust add"), "\(sender.stderr.text)")
        }

        @Test func aGroupDevicesSendWaitsForAcceptWithItsPreview() throws {
            let (desk, friend, agent, inbox, _) = try deskAndFriend()
            defer { agent.stop() }
            let file = try friend.folder("src").appendingPathComponent("topo.pdf")
            try makeFile(file, size: 300_000)
            let thumbnail = try friend.folder("src").appendingPathComponent("topo.png")
            try Data(repeating: 7, count: 2_000).write(to: thumbnail)
            let sender = try friend.background([
                "send", file.path, "--preview", thumbnail.path, "--to", "desk", "--direct", "--answer-timeout", "60",
            ])
            defer { sender.stop() }
            #expect(sender.stderr.waitForLine(containing: "desk asks before accepting", timeout: 30) != nil)
            var id: String?
            #expect(
                waitUntil(timeout: 30) {
                    id = pendingID(desk); return id != nil
                })
            let id2 = try #require(id)
            let listed = desk.run(["pending"]).stdout
            #expect(listed.contains("\(id2)  from friend: 1 item(s)"), "\(listed)")
            #expect(listed.contains("topo.pdf — PDF document, 293.0 KiB"), "\(listed)")
            #expect(listed.contains("(preview: "), "\(listed)")
            #expect(desk.run(["status"]).stdout.contains("pending: \(id2) from friend"))
            #expect(!FileManager.default.fileExists(atPath: inbox.appendingPathComponent("friend/topo.pdf").path))
            let accepted = desk.run(["accept", id2])
            #expect(accepted.status == 0, "\(accepted.stderr)")
            #expect(sender.wait(timeout: 60) == 0, "\(sender.stderr.text)")
            #expect(try Data(contentsOf: inbox.appendingPathComponent("friend/topo.pdf")) == Data(contentsOf: file))
            #expect(pendingID(desk) == nil, "a used answer is forgotten")
        }

        @Test func aDeclineReachesTheSenderWithItsReason() throws {
            let (desk, friend, agent, _, _) = try deskAndFriend()
            defer { agent.stop() }
            let sender = try friend.background(["send", "--text", "lunch?", "--to", "desk", "--direct"])
            defer { sender.stop() }
            var id: String?
            #expect(
                waitUntil(timeout: 30) {
                    id = pendingID(desk); return id != nil
                })
            let declined = desk.run(["decline", try #require(id), "--reason", "not now"])
            #expect(declined.status == 0, "\(declined.stderr)")
            #expect(sender.wait(timeout: 60) == 3, "\(sender.stderr.text)")
            #expect(sender.stderr.text.contains("declined on desk: not now"), "\(sender.stderr.text)")
            #expect(!desk.run(["inbox"]).stdout.contains("lunch?"))
            #expect(desk.run(["accept", "nosuch"]).status == 64)
            // Nobody answers: the sender gives up after its --answer-timeout, as a refusal.
            let unanswered = friend.run([
                "send", "--text", "anyone?", "--to", "desk", "--direct", "--answer-timeout", "2",
            ])
            #expect(unanswered.status == 3, "\(unanswered.stderr)")
            #expect(
                unanswered.stderr.contains("desk did not answer within 2 s; nothing was sent"), "\(unanswered.stderr)")
        }

        /// Through the sender's agent the job stays queued while the desk's user has not answered, and is delivered
        /// after the answer; one of the owner's own devices goes straight in.
        @Test func aQueuedJobWaitsForTheAnswerAndTheOwnersDevicesGoStraightIn() throws {
            let (desk, friend, agent, inbox, port) = try deskAndFriend()
            defer { agent.stop() }
            let (friendAgent, _) = try friend.startAgent(["--no-discovery"])
            defer { friendAgent.stop() }
            let queued = friend.run(["send", "--text", "via the agent", "--to", "desk"])
            #expect(queued.status == 0, "\(queued.stderr)")
            var id: String?
            #expect(
                waitUntil(timeout: 30) {
                    id = pendingID(desk); return id != nil
                })
            #expect(
                waitUntil(timeout: 30) { friend.run(["jobs"]).stdout.contains("waiting for desk to accept") },
                "\(friend.run(["jobs"]).stdout)")
            #expect(desk.run(["accept", try #require(id)]).status == 0)
            #expect(
                waitUntil(timeout: 60) { desk.run(["inbox", "--inbox", inbox.path]).stdout.contains("via the agent") })

            let laptop = try TestDevice("laptop")
            desk.trust(laptop, flags: ["--team"])
            laptop.trust(desk, address: "127.0.0.1:\(port)", flags: ["--team"])
            let own = laptop.run(["send", "--text", "from my laptop", "--to", "desk", "--direct"])
            #expect(own.status == 0, "\(own.stderr)")
            #expect(pendingID(desk) == nil)
        }

        /// A job the desk's user declined is listed as declined (with who declined) in `share jobs`, `share status`
        /// and their JSON, never as delivered; `share send --wait` exits 3.
        @Test func aDeclinedJobIsListedAsDeclined() throws {
            let (desk, friend, agent, _, _) = try deskAndFriend()
            defer { agent.stop() }
            let (friendAgent, _) = try friend.startAgent(["--no-discovery"])
            defer { friendAgent.stop() }
            let queued = friend.run(["send", "--text", "lunch?", "--to", "desk"])
            #expect(queued.status == 0, "\(queued.stderr)")
            var id: String?
            #expect(
                waitUntil(timeout: 30) {
                    id = pendingID(desk); return id != nil
                })
            #expect(desk.run(["decline", try #require(id), "--reason", "busy"]).status == 0)
            #expect(
                waitUntil(timeout: 60) { friend.run(["jobs"]).stdout.contains("  declined  ") },
                "\(friend.run(["jobs"]).stdout)")
            let jobs = friend.run(["jobs"]).stdout
            #expect(jobs.contains("declined on desk: busy") && !jobs.contains("delivered"), "\(jobs)")
            let status = friend.run(["status"]).stdout
            #expect(status.contains(": declined (text)") && !status.contains("delivered"), "\(status)")
            let listed = friend.run(["jobs", "--json"]).stdout
            #expect(listed.contains("\"state\":\"declined\""), "\(listed)")
        }

        /// A pending offer whose sender stopped offering it says so, and accepting it says nothing can arrive now.
        @Test func aPendingOfferWhoseSenderIsGoneSaysSo() throws {
            let (desk, friend, agent, _, _) = try deskAndFriend()
            defer { agent.stop() }
            let unanswered = friend.run([
                "send", "--text", "anyone?", "--to", "desk", "--direct", "--answer-timeout", "2",
            ])
            #expect(unanswered.status == 3, "\(unanswered.stderr)")
            let id = try #require(pendingID(desk))
            let stale = ["SHARE_TEST_PENDING_STALE_SECONDS": "3"]
            // It leaves the list (said in one line), and no longer counts as waiting.
            #expect(
                waitUntil(timeout: 20) {
                    (try? desk.background(["pending"], environment: stale))
                        .map {
                            $0.wait(timeout: 10)
                            return !$0.stdout.text.contains(id) && $0.stderr.text.contains("stopped offering it")
                        } ?? false
                })
            let accept = try desk.background(["accept", id], environment: stale)
            #expect(accept.wait(timeout: 10) == 69, "\(accept.stderr.text)")
            #expect(accept.stderr.text.contains("nothing can arrive now"), "\(accept.stderr.text)")
        }

        /// `share receive --ask` shows the offer and asks; yes receives, no declines.
        @Test func receiveAskPromptsOnTheTerminal() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            for answer in ["y", "n"] {
                let receiver = try desk.background(
                    ["receive", "--port", "0", "--listen", "127.0.0.1", "--into", inbox.path, "--ask"],
                    interactive: true)
                defer { receiver.stop() }
                let line = try #require(receiver.stderr.waitForLine(containing: "waiting on port", timeout: 30))
                let port = try #require(TestDevice.port(in: line))
                let sender = try laptop.background(["send", "--text", "hello \(answer)", "--to", "127.0.0.1:\(port)"])
                defer { sender.stop() }
                #expect(receiver.stderr.waitForLine(containing: "laptop wants to send 1 item(s):", timeout: 30) != nil)
                #expect(waitUntil(timeout: 30) { receiver.stderr.text.contains("accept? [y/N]") })
                #expect(receiver.stderr.text.contains("text — "), "\(receiver.stderr.text)")
                receiver.answer(answer)
                if answer == "y" {
                    #expect(sender.wait(timeout: 30) == 0, "\(sender.stderr.text)")
                    #expect(receiver.wait(timeout: 30) == 0)
                    #expect(receiver.stdout.text == "hello y\n")
                } else {
                    #expect(sender.wait(timeout: 30) == 3, "\(sender.stderr.text)")
                    #expect(sender.stderr.text.contains("declined on desk"))
                    _ = receiver.wait(timeout: 30)
                    #expect(receiver.stdout.text.isEmpty)
                }
            }
        }
    }
}
