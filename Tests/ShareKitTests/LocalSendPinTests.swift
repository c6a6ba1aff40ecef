import Foundation
import Synchronization
import ShareTestSupport
import Testing

extension EndToEnd {
    /// Guessing a LocalSend PIN from many addresses: wrong PINs are counted over all of them together, a request
    /// without a PIN is only asked for one, and the lock is visible in `share status`.
    @Suite(.serialized) struct LocalSendPinTests {
        /// prepare-upload from the source address `from` (127.0.0.X) with `pin`; the HTTP status.
        static func prepare(port: Int, from: String, pin: String?) -> Int {
            let body =
                #"{"info":{"alias":"guesser","version":"2.1","deviceModel":"x","deviceType":"mobile","fingerprint":"0f","port":53317,"protocol":"https","download":false},"files":{"a":{"id":"a","fileName":"a.txt","size":1,"fileType":"text/plain"}}}"#
            let query = pin.map { "?pin=\($0)" } ?? ""
            let result = runTool(
                "/usr/bin/curl",
                [
                    "-sk", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10", "--interface", from, "-H",
                    "Content-Type: application/json", "--data-binary", body,
                    "https://127.0.0.1:\(port)/api/localsend/v2/prepare-upload\(query)",
                ])
            return Int(result.output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }

        /// A request head trickled over TLS a byte at a time is cut when the head's deadline passes (2 s here), with
        /// 408: 96 such connections from 8 addresses kept every new LocalSend device out for hours.
        @Test func aTrickledHeadIsCutAtItsDeadline() throws {
            let desk = try TestDevice("desk")
            let (agent, port, _) = try desk.startLocalSendAgent(environment: ["SHARE_TEST_HTTP_HEAD_SECONDS": "2"])
            defer { agent.stop() }
            let script = """
                import socket, ssl, sys, time
                context = ssl.create_default_context(); context.check_hostname = False; context.verify_mode = ssl.CERT_NONE
                conn = context.wrap_socket(socket.create_connection(("127.0.0.1", \(port)), timeout=10))
                started = time.monotonic(); answer = b""
                conn.settimeout(0.2)
                for byte in b"GET /api/localsend/v2/info HTTP/1.1\\r\\nHost: x\\r\\nX-Pad: " + b"a" * 40:
                    try:
                        conn.send(bytes([byte]))
                    except OSError:
                        break
                    try:
                        chunk = conn.recv(4096)
                        if not chunk: break
                        answer += chunk
                    except socket.timeout:
                        pass
                    except OSError:
                        break
                print("%.1f %s" % (time.monotonic() - started, answer.split(b"\\r\\n")[0].decode()), flush=True)
                """
            let client = try Spawned("/usr/bin/python3", ["-c", script])
            defer { client.stop() }
            #expect(client.wait(timeout: 30) == 0, "\(client.output)")
            let parts = client.output.split(separator: " ", maxSplits: 1)
            #expect(parts.count == 2 && parts[1].hasPrefix("HTTP/1.1 408"), "\(client.output)")
            #expect((Double(parts.first ?? "") ?? 99) < 6, "\(client.output)")
        }

        @Test func wrongPinsFromRotatingAddressesLockEveryone() throws {
            let desk = try TestDevice("desk")
            // An offer with the right PIN waits for the desk's user a second, not two minutes.
            try Data(#"{"localsend": {"answerTimeout": 1}}"#.utf8).write(
                to: desk.config.appendingPathComponent("agent.json"))
            let (agent, port, _) = try desk.startLocalSendAgent(environment: ["SHARE_LOCALSEND_PIN": "4711"])
            defer { agent.stop() }

            // Asking without a PIN is no guess: the right PIN still works from the same address afterwards.
            for _ in 0..<5 { #expect(Self.prepare(port: port, from: "127.0.0.2", pin: nil) == 401) }
            #expect(Self.prepare(port: port, from: "127.0.0.2", pin: "4711") != 429)

            // Three wrong guesses from each of ten new addresses, as the review's attacker rotated them: the
            // addresses side by side (each its own thread), so that all thirty fall within the lock's minute however
            // busy the machine is.
            let answers = Mutex<[Int]>([])
            let done = DispatchGroup()
            for host in 10..<20 {
                done.enter()
                Thread {
                    for guess in 0..<3 {
                        let status = Self.prepare(
                            port: port, from: "127.0.0.\(host)", pin: String(1000 + host * 3 + guess))
                        answers.withLock { $0.append(status) }
                    }
                    done.leave()
                }.start()
            }
            #expect(done.wait(timeout: .now() + Patience.seconds(120)) == .success)
            let statuses = answers.withLock { $0 }
            #expect(statuses.filter { $0 == 401 }.count == 10, "\(statuses)")
            #expect(statuses.filter { $0 == 429 }.count == 20, "\(statuses)")
            // The right PIN from an address never seen before is refused too while the lock lasts.
            #expect(Self.prepare(port: port, from: "127.0.0.99", pin: "4711") == 429)
            let status = desk.run(["status"])
            #expect(status.stdout.contains("PIN locked"), "\(status.stdout)")
        }
    }
}
