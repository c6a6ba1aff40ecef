import Foundation
import Glibc
import Testing

extension EndToEndAgents {
    /// The agent's page (`share agent --web`): what its guards refuse, byte for byte on a socket, and the page itself
    /// driven in a real browser (Tests/Browser/page_test.py: chromium through chromium-driver and selenium).
    @Suite(.serialized) struct WebPageEndToEndTests {
        static let browserScript = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Browser/page_test.py")

        /// A TCP connection to the page on 127.0.0.1, reads bounded to 10 s.
        func connectToPage(_ port: Int) throws -> Int32 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard connected == 0 else {
                close(fd)
                throw TestFailure("cannot connect to the page")
            }
            return fd
        }

        /// One raw HTTP/1.1 exchange on a new loopback connection: the status line and the whole answer.
        func exchange(_ port: Int, _ request: String) throws -> (status: Int, text: String, body: [UInt8]) {
            let fd = try connectToPage(port)
            defer { close(fd) }
            let bytes = Array(request.utf8)
            _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
            var answer: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let n = recv(fd, &buffer, buffer.count, 0)
                if n <= 0 { break }
                answer += buffer[0..<n]
                let text = String(decoding: answer, as: UTF8.self)
                // One answer is enough: its head, and a body of the length it gives.
                if let end = text.range(of: "\r\n\r\n"),
                    let length = text[..<end.lowerBound].split(separator: "\r\n").first(where: {
                        $0.lowercased().hasPrefix("content-length:")
                    }).flatMap({ Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }),
                    answer.count >= text.utf8.distance(from: text.utf8.startIndex, to: end.upperBound) + length
                {
                    break
                }
            }
            let text = String(decoding: answer, as: UTF8.self)
            let status = text.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap { Int($0) } ?? 0
            let headEnd = answer.indices.first { answer[$0...].starts(with: Array("\r\n\r\n".utf8)) }
            return (status, text, headEnd.map { Array(answer[($0 + 4)...]) } ?? [])
        }

        /// The page's port and secret, from the address the agent prints.
        func page(of agent: BackgroundShare) throws -> (port: Int, secret: String) {
            let line = try #require(agent.stdout.waitForLine(containing: "page at ", timeout: 30))
            let address = String(try #require(line.split(separator: " ").last))
            let port = try #require(Int(address.split(separator: ":")[2].prefix { $0.isNumber }))
            return (port, try #require(address.split(separator: "=").last.map(String.init)))
        }

        /// The session cookie a `Set-Cookie` line in `answer` sets, as a request header line.
        func cookie(in answer: String) throws -> String {
            let set = try #require(answer.split(separator: "\r\n").first { $0.hasPrefix("Set-Cookie: ") })
            return "Cookie: " + String(set.dropFirst("Set-Cookie: ".count).prefix { $0 != ";" }) + "\r\n"
        }

        @Test func theSecretTheHostTheOriginAndTheTokenGuardEveryRequest() throws {
            let desk = try TestDevice("desk")
            let (agent, _) = try desk.startAgent(["--no-discovery", "--web"])
            defer { agent.stop() }
            let (port, secret) = try page(of: agent)
            let host = "Host: 127.0.0.1:\(port)\r\n"

            // Without the secret, or with a wrong one: nothing.
            let bare = try exchange(port, "GET / HTTP/1.1\r\n\(host)\r\n")
            #expect(bare.status == 401 && !bare.text.contains("<html"), "\(bare.text)")
            let state = try exchange(port, "GET /api/state HTTP/1.1\r\n\(host)\r\n")
            #expect(state.status == 401 && !state.text.contains("desk"), "\(state.text)")
            let wrong = try exchange(port, "GET /?token=\(String(secret.reversed())) HTTP/1.1\r\n\(host)\r\n")
            #expect(wrong.status == 401 && !wrong.text.contains("Set-Cookie"), "\(wrong.text)")
            // The secret under another host name (a rebinding page's): refused before it is looked at.
            let rebound = try exchange(port, "GET /?token=\(secret) HTTP/1.1\r\nHost: attacker.example:\(port)\r\n\r\n")
            #expect(rebound.status == 403 && !rebound.text.contains("Set-Cookie"), "\(rebound.text)")

            // The secret opens a session: a cookie, and the address without the secret.
            let opened = try exchange(port, "GET /?token=\(secret) HTTP/1.1\r\n\(host)\r\n")
            #expect(opened.status == 303 && opened.text.contains("Location: /\r\n"), "\(opened.text)")
            let cookieLine = try #require(opened.text.split(separator: "\r\n").first { $0.hasPrefix("Set-Cookie: ") })
            #expect(cookieLine.contains("HttpOnly") && cookieLine.contains("SameSite=Strict"))
            let cookie = try cookie(in: opened.text)
            let page = try exchange(port, "GET / HTTP/1.1\r\n\(host)\(cookie)\r\n")
            #expect(page.status == 200 && page.text.contains("Content-Security-Policy"), "\(page.text.prefix(400))")
            let csrf = try #require(
                page.text.range(of: "name=\"csrf\" content=\"").map { page.text[$0.upperBound...].prefix(64) })
            let json = try exchange(port, "GET /api/state HTTP/1.1\r\n\(host)\(cookie)\r\n")
            #expect(json.status == 200 && json.text.contains("\"name\":\"desk\""), "\(json.text.prefix(400))")

            // Another site's page, even with the cookie (same site, another port): refused by its Origin.
            let foreign = try exchange(
                port, "GET /api/state HTTP/1.1\r\n\(host)\(cookie)Origin: http://127.0.0.1:\(port + 1)\r\n\r\n")
            #expect(foreign.status == 403 && !foreign.text.contains("desk"), "\(foreign.text)")
            // A change without the page's token, or with another: refused; with it, carried out.
            let forged = try exchange(
                port, "POST /api/pair/confirm?answer=yes HTTP/1.1\r\n\(host)\(cookie)Content-Length: 0\r\n\r\n")
            #expect(forged.status == 403, "\(forged.text)")
            let other = try exchange(
                port,
                "POST /api/pair/confirm?answer=yes HTTP/1.1\r\n\(host)\(cookie)X-CSRF-Token: \(String(repeating: "0", count: 64))\r\nContent-Length: 0\r\n\r\n"
            )
            #expect(other.status == 403, "\(other.text)")
            let honest = try exchange(
                port,
                "POST /api/pair/confirm?answer=yes HTTP/1.1\r\n\(host)\(cookie)X-CSRF-Token: \(csrf)\r\nContent-Length: 0\r\n\r\n"
            )
            #expect(honest.status == 409 && honest.text.contains("no pairing waits"), "\(honest.text)")
            // A received file and a preview are served only by names the inbox and the pending book hold.
            let climbing = try exchange(
                port, "GET /api/inbox/file?from=..&name=passwd HTTP/1.1\r\n\(host)\(cookie)\r\n")
            #expect(climbing.status == 404, "\(climbing.text)")
            let preview = try exchange(port, "GET /api/preview?name=../../keys.pem HTTP/1.1\r\n\(host)\(cookie)\r\n")
            #expect(preview.status == 404, "\(preview.text)")
        }

        /// A received folder downloads as NAME.tar: its name leads every path, the bytes are the files', a link that
        /// leaves it is left out, and the announced length is the stream's. A name that climbs out finds nothing.
        @Test func aReceivedFolderDownloadsAsATarOfItsOwnName() throws {
            let desk = try TestDevice("desk")
            let inbox = try desk.folder("inbox")
            let folder = inbox.appendingPathComponent("laptop/Trip photos")
            try FileManager.default.createDirectory(
                at: folder.appendingPathComponent("day 2"), withIntermediateDirectories: true)
            let big = (0..<300_000).map { UInt8($0 % 253) }
            try Data(big).write(to: folder.appendingPathComponent("day 2/beach.raw"))
            try Data("first day".utf8).write(to: folder.appendingPathComponent("notes.txt"))
            try FileManager.default.createSymbolicLink(
                atPath: folder.appendingPathComponent("escape").path, withDestinationPath: "/etc/passwd")
            let (agent, _) = try desk.startAgent(["--no-discovery", "--web", "--inbox", inbox.path])
            defer { agent.stop() }
            let (port, secret) = try page(of: agent)
            let host = "Host: 127.0.0.1:\(port)\r\n"
            let cookie = try cookie(in: exchange(port, "GET /?token=\(secret) HTTP/1.1\r\n\(host)\r\n").text)

            let tar = try exchange(
                port, "GET /api/inbox/file?from=laptop&name=Trip%20photos&download=1 HTTP/1.1\r\n\(host)\(cookie)\r\n")
            #expect(tar.status == 200, "\(tar.text.prefix(300))")
            #expect(tar.text.contains("Content-Type: application/x-tar"))
            #expect(tar.text.contains("filename=\"Trip photos.tar\""), "\(tar.text.prefix(600))")
            #expect(tar.text.contains("Content-Length: \(tar.body.count)\r\n"), "\(tar.text.prefix(600))")
            let file = desk.directory.appendingPathComponent("download.tar")
            try Data(tar.body).write(to: file)
            let listing = runTool("/usr/bin/tar", ["-tf", file.path])
            #expect(listing.status == 0, "\(listing.output)")
            #expect(
                listing.output.split(separator: "\n").sorted()
                    == ["Trip photos/", "Trip photos/day 2/", "Trip photos/day 2/beach.raw", "Trip photos/notes.txt"],
                "\(listing.output)")
            let out = desk.directory.appendingPathComponent("out")
            try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
            #expect(runTool("/usr/bin/tar", ["-xf", file.path, "-C", out.path]).status == 0)
            #expect(try Data(contentsOf: out.appendingPathComponent("Trip photos/day 2/beach.raw")) == Data(big))
            let climbing = try exchange(
                port, "GET /api/inbox/file?from=laptop&name=..%2F..&download=1 HTTP/1.1\r\n\(host)\(cookie)\r\n")
            #expect(climbing.status == 404, "\(climbing.text.prefix(300))")
        }

        /// What a person sees first: a loading state until the state arrives, an icon (no refused request in the
        /// log), this device never among its neighbours, a folder's size as its contents.
        @Test func thePageLoadsPlainlyAndSaysWhatIsTrue() throws {
            let desk = try TestDevice("desk")
            let inbox = try desk.folder("inbox")
            let folder = inbox.appendingPathComponent("laptop/Trip photos")
            try FileManager.default.createDirectory(
                at: folder.appendingPathComponent("day 2"), withIntermediateDirectories: true)
            try Data(count: 300_000).write(to: folder.appendingPathComponent("day 2/beach.raw"))
            try Data(count: 7_000).write(to: folder.appendingPathComponent("notes.txt"))
            // Its own earlier `share receive` and `share pair` runs, heard on the network.
            let state = desk.config.appendingPathComponent("state")
            try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
            let me =
                #"{"id":"\#(desk.id)","name":"desk","address":"192.0.2.7:4000","lastSeen":"2026-11-26T10:00:00Z","version":5}"#
            try Data("[\(me)]".utf8).write(to: state.appendingPathComponent("discovered.json"))
            let (agent, _) = try desk.startAgent(["--no-discovery", "--web", "--inbox", inbox.path])
            defer { agent.stop() }
            let (port, secret) = try page(of: agent)
            let host = "Host: 127.0.0.1:\(port)\r\n"

            let icon = try exchange(port, "GET /favicon.ico HTTP/1.1\r\n\(host)\r\n")
            #expect(icon.status == 200 && icon.text.contains("Content-Type: image/svg+xml"), "\(icon.text.prefix(300))")
            let cookie = try cookie(in: exchange(port, "GET /?token=\(secret) HTTP/1.1\r\n\(host)\r\n").text)
            let html = try exchange(port, "GET / HTTP/1.1\r\n\(host)\(cookie)\r\n")
            #expect(html.text.contains("Loading…"), "\(html.text.prefix(2000))")
            let answer = try exchange(port, "GET /api/state HTTP/1.1\r\n\(host)\(cookie)\r\n")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])
            let nearby = try #require(object["nearby"] as? [[String: Any]])
            #expect(!nearby.contains { $0["name"] as? String == "desk" }, "\(nearby)")
            let items = try #require(object["inbox"] as? [[String: Any]])
            let trip = try #require(items.first { $0["name"] as? String == "Trip photos" })
            #expect(trip["size"] as? Int == 307_000, "\(trip)")
        }

        /// Two requests on one connection, the second sent only after the first was answered (as browsers reuse
        /// connections): both answered. The second once waited forever, its head never searched.
        @Test func aKeptAliveConnectionCarriesTheNextRequest() throws {
            let desk = try TestDevice("desk")
            let (agent, _) = try desk.startAgent(["--no-discovery", "--web"])
            defer { agent.stop() }
            let (port, secret) = try page(of: agent)
            let fd = try connectToPage(port)
            defer { close(fd) }
            var buffer = [UInt8](repeating: 0, count: 65_536)
            // Opening the session (a 303 that keeps the connection), then the state with the cookie it set.
            var cookie = ""
            // The first request longer than the second, as a browser's first (with its Accept lines) often is.
            let padding = "Accept: " + String(repeating: "text/html;q=0.9, ", count: 40) + "*/*\r\n"
            for (round, target) in ["/?token=\(secret)", "/api/state"].enumerated() {
                let request = Array(
                    "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\(round == 0 ? padding : cookie)\r\n".utf8)
                _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
                let n = recv(fd, &buffer, buffer.count, 0)
                #expect(n > 0, "request \(round) was not answered")
                let answer = String(decoding: buffer[0..<max(0, n)], as: UTF8.self)
                #expect(answer.hasPrefix(round == 0 ? "HTTP/1.1 303" : "HTTP/1.1 200"), "\(answer)")
                if round == 0 { cookie = try self.cookie(in: answer) }
            }
        }

        /// A client without a session announces a large body and drips it a byte at a time: it is refused at once and
        /// the connection is closed within about a second, however slowly the body comes (it held a thread for as
        /// long as the drip went on before).
        @Test func aDrippedBodyAfterARefusalDoesNotHoldTheConnection() throws {
            let desk = try TestDevice("desk")
            let (agent, _) = try desk.startAgent(["--no-discovery", "--web"])
            defer { agent.stop() }
            let (port, _) = try page(of: agent)
            let fd = try connectToPage(port)
            defer { close(fd) }
            let head = Array(
                "POST /api/upload?name=x HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Length: 4194304\r\n\r\n".utf8)
            _ = head.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
            let started = ContinuousClock.now
            var answer: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            var closed = false
            // One byte every 100 ms for at most 10 s, reading what comes back in between.
            for _ in 0..<100 where !closed {
                var byte: UInt8 = 0x61
                _ = send(fd, &byte, 1, Int32(MSG_NOSIGNAL))
                var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                while poll(&ready, 1, 100) > 0 {
                    let n = recv(fd, &buffer, buffer.count, 0)
                    if n <= 0 {
                        closed = true
                        break
                    }
                    answer += buffer[0..<n]
                }
            }
            let held = ContinuousClock.now - started
            #expect(String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 401"))
            #expect(closed, "the connection was still open after 10 s of dripping")
            #expect(held < .seconds(4), "held for \(held)")
        }

        /// agent.json's `web` turns the page on (its port chosen there), and `"enabled": false` keeps it off.
        @Test func agentJSONTurnsThePageOnAndOff() throws {
            let desk = try TestDevice("desk")
            let file = desk.config.appendingPathComponent("agent.json")
            try Data(#"{"web": {"port": 0}}"#.utf8).write(to: file)
            let (on, _) = try desk.startAgent(["--no-discovery"])
            let line = on.stdout.waitForLine(containing: "page at http://127.0.0.1:", timeout: 30)
            on.stop()
            #expect(line != nil, "\(on.stderr.text)")
            try Data(#"{"web": {"enabled": false, "port": 0}}"#.utf8).write(to: file)
            let (off, _) = try desk.startAgent(["--no-discovery"])
            off.stop()
            #expect(!off.stdout.text.contains("page at"), "\(off.stdout.text)")
        }

        @Test func theBrowserDrivesThePage() throws {
            let work = try TestDevice("browser").directory
            let shots = URL(fileURLWithPath: ProcessInfo.processInfo.environment["SHARE_WEB_SCREENSHOTS"] ?? work.path)
                .appendingPathComponent("screenshots")
            let result = runTool(
                "/usr/bin/python3",
                [Self.browserScript.path, ShareBinary.url.path, work.path, "--screenshots", shots.path],
                timeout: 240)
            // The browser's own steps and the screenshots' paths, for the test log.
            print(result.output.split(separator: "\n").filter { !$0.hasPrefix("#") }.joined(separator: "\n"))
            #expect(result.status == 0 && result.output.contains("every check passed"), "\(result.output.suffix(3000))")
            for view in ["1-devices", "2-pending-offer", "3-inbox", "5-progress", "6-cancelled", "8-pairing-code"] {
                #expect(
                    FileManager.default.fileExists(atPath: shots.appendingPathComponent("\(view).png").path), "\(view)")
            }
        }
    }
}
