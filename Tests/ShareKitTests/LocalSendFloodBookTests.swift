import Foundation
import ShareTestSupport
import Testing

extension EndToEndAgents {
    /// The pending book under floods from the LAN: made-up fingerprints from one address, offers of thousands of
    /// items, claimed fingerprints. Strangers are bounded per address and together, apart from trusted devices; the
    /// book stays small and readable; a claim is shown as one.
    @Suite(.serialized) struct LocalSendFloodBookTests {
        /// Offers `count` uploads at once from `source` (each a new claimed fingerprint, `files` files), holding each
        /// connection until answered or `hold` seconds pass; prints one status per offer ("held" when unanswered).
        static let flood = """
            import json, socket, ssl, sys, threading, uuid
            port, count, files, source, hold = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
            context = ssl.create_default_context(); context.check_hostname = False; context.verify_mode = ssl.CERT_NONE
            lock = threading.Lock()
            def offer(n):
                info = {"alias": "phone %d" % n, "version": "2.1", "deviceModel": "x", "deviceType": "mobile",
                        "fingerprint": uuid.uuid4().hex * 2, "port": 53317, "protocol": "https", "download": False}
                listed = {"f%d" % i: {"id": "f%d" % i, "fileName": "photo-%05d-%s.jpg" % (i, "x" * 60), "size": 1000,
                                     "fileType": "image/jpeg"} for i in range(files)}
                body = json.dumps({"info": info, "files": listed}).encode()
                status = "error"
                try:
                    raw = socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(source, 0))
                    conn = context.wrap_socket(raw)
                    conn.sendall(b"POST /api/localsend/v2/prepare-upload HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\nContent-Length: %d\\r\\n\\r\\n" % len(body) + body)
                    conn.settimeout(hold)
                    try:
                        status = conn.recv(64).split(b" ")[1].decode()
                    except socket.timeout:
                        status = "held"
                    conn.close()
                except Exception as error:
                    status = "error " + str(error)
                with lock:
                    print(status, flush=True)
            slots = threading.Semaphore(10)
            def limited(n):
                with slots: offer(n)
            threads = [threading.Thread(target=limited, args=(n,)) for n in range(count)]
            for t in threads: t.start()
            for t in threads: t.join()
            """

        /// The desk's agent: it, its LocalSend port and its own port.
        func startAgent(_ desk: TestDevice) throws -> (BackgroundShare, Int, Int) {
            let answer = Int(Patience.seconds(600))
            try Data(#"{"localsend": {"answerTimeout": \#(answer)}}"#.utf8).write(
                to: desk.config.appendingPathComponent("agent.json"))
            return try desk.startLocalSendAgent()
        }

        func flood(port: Int, count: Int, files: Int, from source: String, hold: Double) throws -> Spawned {
            try Spawned(
                "/usr/bin/python3", ["-c", Self.flood, "\(port)", "\(count)", "\(files)", source, "\(hold)"])
        }

        func pendingCount(_ desk: TestDevice) -> Int {
            let listed = desk.run(["pending", "--json"]).stdout
            return ((try? JSONSerialization.jsonObject(with: Data(listed.utf8))) as? [[String: Any]])?.count ?? -1
        }

        /// A friend (trusted, asks first) sends while strangers flood: held for the user, not refused. Returns how
        /// many offers were pending when the friend's was seen among them (it leaves the list some seconds after the
        /// friend's send gives up waiting, as any offer whose sender has gone does).
        @discardableResult
        func aFriendIsHeld(_ desk: TestDevice, agentPort: Int) throws -> Int {
            let friend = try TestDevice("friend")
            desk.trust(friend, flags: ["--group", "climbing"], asks: true)
            friend.trust(desk, address: "127.0.0.1:\(agentPort)", flags: ["--group", "climbing"])
            // Tried again while the agent is too busy to answer at all (a loaded machine); held once it answers.
            var sent = CommandResult(status: -1, stdout: "", stderr: "")
            for _ in 0..<3 {
                sent = friend.run(["send", "--text", "lunch?", "--to", "desk", "--direct", "--answer-timeout", "5"])
                if sent.stderr.contains("asks before accepting") || sent.stderr.contains("too many offers") { break }
            }
            #expect(
                sent.stderr.contains("asks before accepting") && !sent.stderr.contains("too many offers"),
                "\(sent.stderr)")
            // Read as JSON, again if a busy machine cut the listing short.
            var count = 0
            #expect(
                waitUntil(timeout: 30) {
                    let listed = desk.run(["pending", "--json"]).stdout
                    let entries = (try? JSONSerialization.jsonObject(with: Data(listed.utf8))) as? [[String: Any]]
                    count = entries?.count ?? 0
                    return entries?.contains { $0["fromName"] as? String == "friend" } ?? false
                }, "the friend's offer is not pending")
            return count
        }

        /// The review's flood: offers from one address, each with a new made-up fingerprint, each connection dropped
        /// after a second. Abandoned offers leave the book at once, so it never fills; a friend is then held for the
        /// user, not refused.
        @Test func madeUpFingerprintsFromOneAddressDoNotLockFriendsOut() throws {
            let desk = try TestDevice("desk")
            let (agent, port, agentPort) = try startAgent(desk)
            defer { agent.stop() }
            let flooding = try flood(port: port, count: 60, files: 1, from: "127.0.0.7", hold: 1)
            defer { flooding.stop() }
            var most = 0
            var slowest = 0.0
            while flooding.process.isRunning {
                most = max(most, pendingCount(desk))
                let started = Date()
                #expect(desk.run(["status"]).status == 0)
                slowest = max(slowest, Date().timeIntervalSince(started))
                if let kib = residentKiB(agent.pid) { #expect(kib < 128 << 10, "agent at \(kib) KiB") }
                if most > 16 { break }
            }
            // A bound loose enough for a loaded machine (the figure is printed for the record).
            #expect(slowest < Patience.seconds(5), "share status took \(slowest) s during the flood")
            print(
                "flood: share status answered in at most \(String(format: "%.2f", slowest)) s; \(most) offers at once")
            #expect(flooding.wait(timeout: 60) == 0, "\(flooding.output)")
            #expect(most <= 16, "\(most) offers waited at once from one address")
            #expect(waitUntil(timeout: 10) { pendingCount(desk) == 0 }, "abandoned offers stay: \(pendingCount(desk))")
            try aFriendIsHeld(desk, agentPort: agentPort)
        }

        @Test func offersOfThousandsOfItemsKeepTheBookSmallAndWhole() throws {
            let desk = try TestDevice("desk")
            let (agent, port, agentPort) = try startAgent(desk)
            defer { agent.stop() }
            // The strangers wait for an answer longer than the test can take on a loaded machine.
            let flooding = try flood(
                port: port, count: 10, files: 3_999, from: "127.0.0.8", hold: Patience.seconds(600))
            defer { flooding.stop() }
            #expect(waitUntil(timeout: 60) { pendingCount(desk) == 10 }, "\(pendingCount(desk))")
            let book = desk.config.appendingPathComponent("state/pending/offers.json")
            let size = (try FileManager.default.attributesOfItem(atPath: book.path)[.size] as? NSNumber)?.intValue ?? 0
            #expect(size < 1 << 20, "the book is \(size) bytes")
            #expect(desk.run(["pending"]).stdout.contains("… and 3949 more"))
            if let kib = residentKiB(agent.pid) { #expect(kib < 128 << 10, "agent at \(kib) KiB") }
            // A friend's offer beside them is kept, and so is the book.
            #expect(try aFriendIsHeld(desk, agentPort: agentPort) == 11)
            flooding.stop()
        }

        /// A stranger claiming the fingerprint and alias of a trusted phone is shown as unproved and never lands in
        /// the phone's folder.
        @Test func aClaimedFingerprintIsShownAsUnproved() throws {
            let desk = try TestDevice("desk")
            let (agent, port, _) = try startAgent(desk)
            defer { agent.stop() }
            let flooding = try flood(port: port, count: 1, files: 1, from: "127.0.0.9", hold: Patience.seconds(60))
            defer { flooding.stop() }
            #expect(waitUntil(timeout: 30) { pendingCount(desk) == 1 })
            let listed = desk.run(["pending"]).stdout
            #expect(listed.contains("(LocalSend, unproved)"), "\(listed)")
        }
    }
}
