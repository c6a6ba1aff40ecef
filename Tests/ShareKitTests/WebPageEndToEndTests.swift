import Foundation
import Glibc
import Testing

extension EndToEndAgents {
    /// The agent's page (`share agent --web`): what its guards refuse, byte for byte on a socket, and the page itself
    /// driven in a real browser (Tests/Browser/page_test.py: chromium through chromium-driver and selenium).
    @Suite(.serialized) struct WebPageEndToEndTests {
        static let browserScript = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Browser/page_test.py")

        /// A TCP connection to the page on 127.0.0.1 (from `source`, a loopback address), reads bounded to 10 s.
        func connectToPage(_ port: Int, from source: String? = nil) throws -> Int32 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            if let source {
                var local = sockaddr_in()
                local.sin_family = sa_family_t(AF_INET)
                inet_pton(AF_INET, source, &local.sin_addr)
                _ = withUnsafePointer(to: &local) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
            }
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

        /// A session opened with the page's secret, as the page's script opens one: its `Authorization` header line.
        func session(_ port: Int, _ secret: String) throws -> String {
            let answer = try exchange(
                port,
                "POST /api/session HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nX-Share-Secret: \(secret)\r\nContent-Length: 0\r\n\r\n"
            )
            #expect(answer.status == 200 && !answer.text.contains("Set-Cookie"), "\(answer.text)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])
            return "Authorization: Bearer \(try #require(object["session"] as? String))\r\n"
        }

        /// Another local user's server on another port of 127.0.0.1 gets whatever the browser sends there: every
        /// cookie of 127.0.0.1 (browsers do not separate cookies by port). The page sets none, so nothing a browser
        /// sends elsewhere opens it; its shell holds nothing secret; everything else wants the session's token in a
        /// header, which only the page's own script (per-origin storage) has; a file opens by a one-use link.
        @Test func nothingABrowserSendsToAnotherPortOpensThePage() throws {
            let desk = try TestDevice("desk")
            let inbox = try desk.folder("inbox")
            try FileManager.default.createDirectory(
                at: inbox.appendingPathComponent("laptop"), withIntermediateDirectories: true)
            try Data("the plan\n".utf8).write(to: inbox.appendingPathComponent("laptop/plan.txt"))
            let (agent, _) = try desk.startAgent(["--no-discovery", "--web", "--inbox", inbox.path])
            defer { agent.stop() }
            let (port, secret) = try page(of: agent)
            let host = "Host: 127.0.0.1:\(port)\r\n"

            // Opening the printed address: the page's shell, and no cookie for anyone to collect.
            let opened = try exchange(port, "GET /?token=\(secret) HTTP/1.1\r\n\(host)\r\n")
            #expect(opened.status == 200 && !opened.text.contains("Set-Cookie"), "\(opened.text.prefix(600))")
            #expect(!opened.text.contains(secret), "the shell repeats the secret")
            // Without the secret: the same shell (nothing in it is secret), and nothing else.
            let bare = try exchange(port, "GET / HTTP/1.1\r\n\(host)\r\n")
            #expect(bare.status == 200 && !bare.text.contains("desk") && !bare.text.contains("csrf"), "\(bare.text)")
            for target in ["/api/state", "/api/events", "/api/inbox/file?from=laptop&name=plan.txt"] {
                let refused = try exchange(port, "GET \(target) HTTP/1.1\r\n\(host)Cookie: share=anything\r\n\r\n")
                #expect(refused.status == 401 && !refused.text.contains("plan"), "\(target): \(refused.text)")
            }
            let wrong = try exchange(
                port,
                "POST /api/session HTTP/1.1\r\n\(host)X-Share-Secret: \(String(secret.reversed()))\r\nContent-Length: 0\r\n\r\n"
            )
            #expect(wrong.status == 401 && !wrong.text.contains("session\""), "\(wrong.text)")
            // The secret under another host name (a rebinding page's): refused before it is looked at.
            let rebound = try exchange(
                port,
                "POST /api/session HTTP/1.1\r\nHost: attacker.example:\(port)\r\nX-Share-Secret: \(secret)\r\nContent-Length: 0\r\n\r\n"
            )
            #expect(rebound.status == 403, "\(rebound.text)")

            let auth = try session(port, secret)
            let page = try exchange(port, "GET / HTTP/1.1\r\n\(host)\r\n")
            #expect(page.text.contains("Content-Security-Policy"), "\(page.text.prefix(400))")
            let json = try exchange(port, "GET /api/state HTTP/1.1\r\n\(host)\(auth)\r\n")
            #expect(json.status == 200 && json.text.contains("\"name\":\"desk\""), "\(json.text.prefix(400))")
            // A made-up token, or the session's with another site's Origin: refused.
            let madeUp = try exchange(
                port,
                "GET /api/state HTTP/1.1\r\n\(host)Authorization: Bearer \(String(repeating: "0", count: 64))\r\n\r\n")
            #expect(madeUp.status == 401, "\(madeUp.text)")
            let foreign = try exchange(
                port, "GET /api/state HTTP/1.1\r\n\(host)\(auth)Origin: http://127.0.0.1:\(port + 1)\r\n\r\n")
            #expect(foreign.status == 403 && !foreign.text.contains("desk"), "\(foreign.text)")
            let honest = try exchange(
                port, "POST /api/pair/confirm?answer=yes HTTP/1.1\r\n\(host)\(auth)Content-Length: 0\r\n\r\n")
            #expect(honest.status == 409 && honest.text.contains("no pairing waits"), "\(honest.text)")

            // A file through a link made for it: once, for that file only.
            let made = try exchange(
                port, "POST /api/link?from=laptop&name=plan.txt HTTP/1.1\r\n\(host)\(auth)Content-Length: 0\r\n\r\n")
            let url = try #require(
                (try JSONSerialization.jsonObject(with: Data(made.body)) as? [String: Any])?["url"] as? String,
                "\(made.text)")
            let file = try exchange(port, "GET \(url) HTTP/1.1\r\n\(host)\r\n")
            #expect(file.status == 200 && file.body == Array("the plan\n".utf8), "\(url) \(file.text.prefix(300))")
            #expect(try exchange(port, "GET \(url) HTTP/1.1\r\n\(host)\r\n").status == 403, "a link opens once")
            // Nor another file (the link is spent by the attempt).
            let again = try exchange(
                port, "POST /api/link?from=laptop&name=plan.txt HTTP/1.1\r\n\(host)\(auth)Content-Length: 0\r\n\r\n")
            let second = try #require(
                (try JSONSerialization.jsonObject(with: Data(again.body)) as? [String: Any])?["url"] as? String)
            let other = second.replacingOccurrences(of: "name=plan.txt", with: "name=other.txt")
            #expect(try exchange(port, "GET \(other) HTTP/1.1\r\n\(host)\r\n").status == 403)
            #expect(try exchange(port, "GET \(second) HTTP/1.1\r\n\(host)\r\n").status == 403)

            // A received file and a preview are served only by names the inbox and the pending book hold.
            let climbing = try exchange(
                port, "POST /api/link?from=..&name=passwd HTTP/1.1\r\n\(host)\(auth)Content-Length: 0\r\n\r\n")
            #expect(climbing.status == 404, "\(climbing.text)")
            let preview = try exchange(port, "GET /api/preview?name=../../keys.pem HTTP/1.1\r\n\(host)\(auth)\r\n")
            #expect(preview.status == 404, "\(preview.text)")
        }

        /// `share web --open` hands xdg-open a file only this user can read, never the secret itself: a command
        /// line is visible to every local user (`ps -eo args`).
        @Test func openingThePageLeaksNoSecretOnACommandLine() throws {
            let desk = try TestDevice("desk")
            let bin = try desk.folder("bin")
            let runtime = try desk.folder("runtime")
            let said = desk.directory.appendingPathComponent("xdg-open.args")
            let fake = bin.appendingPathComponent("xdg-open")
            try Data("#!/bin/sh\nprintf '%s\\n' \"$@\" > '\(said.path)'\n".utf8).write(to: fake)
            chmod(fake.path, 0o755)
            let web = try desk.background(
                ["web", "--open", "--no-discovery"],
                environment: ["PATH": bin.path + ":/usr/bin:/bin", "XDG_RUNTIME_DIR": runtime.path])
            defer { web.stop() }
            let line = try #require(web.stdout.waitForLine(containing: "share web: http", timeout: 30))
            let secret = try #require(line.split(separator: "=").last.map(String.init))
            #expect(waitUntil(timeout: 30) { FileManager.default.fileExists(atPath: said.path) })
            let argument = try String(contentsOf: said, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(!argument.contains(secret), "the secret is on xdg-open's command line: \(argument)")
            #expect(argument.hasPrefix(runtime.path), "\(argument)")
            let attributes = try FileManager.default.attributesOfItem(atPath: argument)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
            #expect(try String(contentsOfFile: argument, encoding: .utf8).contains(secret))
            web.stop()
            #expect(!FileManager.default.fileExists(atPath: argument), "the opener outlived the page")
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
            // Two links that each stay inside, and together lead out once unpacked.
            try FileManager.default.createSymbolicLink(
                atPath: folder.appendingPathComponent("d").path, withDestinationPath: ".")
            try FileManager.default.createSymbolicLink(
                atPath: folder.appendingPathComponent("chain").path, withDestinationPath: "d/..")
            let (agent, _) = try desk.startAgent(["--no-discovery", "--web", "--inbox", inbox.path])
            defer { agent.stop() }
            let (port, secret) = try page(of: agent)
            let host = "Host: 127.0.0.1:\(port)\r\n"
            let auth = try session(port, secret)

            let tar = try exchange(
                port, "GET /api/inbox/file?from=laptop&name=Trip%20photos&download=1 HTTP/1.1\r\n\(host)\(auth)\r\n")
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
                    == [
                        "Trip photos/", "Trip photos/d", "Trip photos/day 2/", "Trip photos/day 2/beach.raw",
                        "Trip photos/notes.txt",
                    ],
                "\(listing.output)")
            let out = desk.directory.appendingPathComponent("out")
            try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
            #expect(runTool("/usr/bin/tar", ["-xf", file.path, "-C", out.path]).status == 0)
            #expect(try Data(contentsOf: out.appendingPathComponent("Trip photos/day 2/beach.raw")) == Data(big))
            let climbing = try exchange(
                port, "GET /api/inbox/file?from=laptop&name=..%2F..&download=1 HTTP/1.1\r\n\(host)\(auth)\r\n")
            #expect(climbing.status == 404, "\(climbing.text.prefix(300))")
        }

        /// The page's Folders panel: a folder another of the owner's devices offers, accepted from the page, then
        /// the folder with its state and each device's, in step once its files are here.
        @Test func theFoldersPanelShowsEachFolderAndTakesAnOffer() throws {
            let devices = try SyncDevices(["laptop", "desk"], options: [1: ["--web"]])
            let (port, secret) = try page(of: try #require(devices.agents[1]))
            let host = "Host: 127.0.0.1:\(port)\r\n"
            let auth = try session(port, secret)
            func state() throws -> [String: Any] {
                let answer = try exchange(port, "GET /api/state HTTP/1.1\r\n\(host)\(auth)\r\n")
                return try #require(try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])
            }
            let folder = try devices[0].folder("recipes")
            try Data("flour, water, salt\n".utf8).write(to: folder.appendingPathComponent("bread.txt"))
            let id = try devices.share(0, folder, with: [1])
            #expect(
                waitUntil(timeout: 30) {
                    ((try? state())?["folderOffers"] as? [[String: Any]])?.contains { $0["id"] as? String == id }
                        ?? false
                })
            let accepted = try exchange(
                port, "POST /api/folders/accept?id=\(id) HTTP/1.1\r\n\(host)\(auth)Content-Length: 0\r\n\r\n")
            #expect(accepted.status == 200 && accepted.text.contains("accepted recipes into"), "\(accepted.text)")
            var shown: [String: Any] = [:]
            #expect(
                waitUntil(timeout: 60) {
                    guard let folders = (try? state())?["folders"] as? [[String: Any]], let first = folders.first
                    else { return false }
                    shown = first
                    let peers = first["peers"] as? [[String: Any]] ?? []
                    return first["state"] as? String == "up to date" && first["files"] as? Int == 1
                        && peers.first?["name"] as? String == "laptop" && peers.first?["inStep"] as? Bool == true
                }, "\(shown)\n\(devices.logs)")
            // Linked now: the laptop is seen now, whichever device opened the link.
            let laptop = ((try state())["devices"] as? [[String: Any]])?.first { $0["name"] as? String == "laptop" }
            #expect(laptop?["lastSeen"] != nil, "\(laptop ?? [:])")
            let unknown = try exchange(
                port, "POST /api/folders/accept?id=nothing HTTP/1.1\r\n\(host)\(auth)Content-Length: 0\r\n\r\n")
            #expect(unknown.status == 409 && unknown.text.contains("no folder nothing is offered"), "\(unknown.text)")
            let shell = try exchange(port, "GET / HTTP/1.1\r\n\(host)\r\n")
            #expect(shell.text.contains("<section id=\"folders\"><h2>Shared folders</h2>"))
            // The laptop's edit replaces the desk's copy: the page lists the version kept and puts it back.
            let copy = try #require(shown["settings"] as? [String: Any])["path"] as? String ?? ""
            try Data("flour, water, salt, yeast\n".utf8).write(to: folder.appendingPathComponent("bread.txt"))
            var versions: [[String: Any]] = []
            #expect(
                waitUntil(timeout: 30) {
                    guard
                        let answer = try? exchange(
                            port, "GET /api/folders/versions?id=\(id) HTTP/1.1\r\n\(host)\(auth)\r\n"),
                        let listed = try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [[String: Any]]
                    else { return false }
                    versions = listed
                    return !listed.isEmpty
                }, "\(devices.logs)")
            #expect(versions.first?["path"] as? String == "bread.txt", "\(versions)")
            // The edit is among the changes the page lists (what the laptop did, as it was applied here).
            var changes: [[String: Any]] = []
            #expect(
                waitUntil(timeout: 30) {
                    changes =
                        ((try? state())?["folders"] as? [[String: Any]])?.first?["recentChanges"] as? [[String: Any]]
                        ?? []
                    return changes.last.map {
                        $0["action"] as? String == "changed" && $0["path"] as? String == "bread.txt"
                            && $0["by"] as? String == "laptop"
                    } == true
                }, "\(changes)")
            let at = try #require(versions.first?["time"] as? String)
            let encoded = at.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? at
            let restored = try exchange(
                port,
                "POST /api/folders/restore?id=\(id)&path=bread.txt&at=\(encoded) HTTP/1.1\r\n\(host)\(auth)Content-Length: 0\r\n\r\n"
            )
            #expect(restored.status == 200 && restored.text.contains("put back bread.txt"), "\(restored.text)")
            #expect(
                waitUntil(timeout: 30) {
                    (try? String(contentsOf: folder.appendingPathComponent("bread.txt"), encoding: .utf8))
                        == "flour, water, salt\n"
                }, "\(devices.logs)")
            #expect(FileManager.default.fileExists(atPath: copy + "/.share-versions"))
            let nowhere = try exchange(
                port,
                "POST /api/folders/restore?id=\(id)&path=none.txt HTTP/1.1\r\n\(host)\(auth)Content-Length: 0\r\n\r\n")
            #expect(nowhere.status == 409 && nowhere.text.contains("no version of none.txt"), "\(nowhere.text)")
            let unauthorised = try exchange(port, "GET /api/folders/versions?id=\(id) HTTP/1.1\r\n\(host)\r\n")
            #expect(unauthorised.status == 401, "\(unauthorised.status)")
            // Paused from the page, and resumed.
            let pause = { (paused: Int) in
                try exchange(
                    port,
                    "POST /api/folders/pause?id=\(id)&paused=\(paused) HTTP/1.1\r\n\(host)\(auth)Content-Length: 0\r\n\r\n"
                )
            }
            let paused = try pause(1)
            #expect(paused.status == 200 && paused.text.contains("paused recipes"), "\(paused.text)")
            #expect(((try state())["folders"] as? [[String: Any]])?.first?["state"] as? String == "paused")
            #expect(try pause(1).status == 409)
            let resumed = try pause(0)
            #expect(resumed.status == 200 && resumed.text.contains("resumed recipes"), "\(resumed.text)")
            #expect(
                waitUntil(timeout: 30) {
                    ((try? state())?["folders"] as? [[String: Any]])?.first?["state"] as? String == "up to date"
                }, "\(devices.logs)")
        }

        /// What a person sees first: a loading state until the state arrives, an icon (no refused request in the
        /// log), this device once among the devices heard (marked), two of one name told apart by their IDs, a
        /// trusted device's last contact as `share peers` knows it, a folder's size as its contents.
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
            // Two other devices of one name, told apart by their IDs; a trusted one heard but never reached.
            let twins = ["AAAAAAA-BBBBBBB", "CCCCCCC-DDDDDDD"].map {
                #"{"id":"\#($0)","name":"laptop","address":"192.0.2.8:4000","lastSeen":"2026-11-26T10:00:00Z","version":5}"#
            }
            let phone = try TestDevice("phone")
            desk.trust(phone)
            let heard =
                #"{"id":"\#(phone.id)","name":"phone","address":"192.0.2.9:4000","lastSeen":"2026-11-26T11:00:00Z","version":5}"#
            try Data("[\(([me, heard] + twins).joined(separator: ","))]".utf8).write(
                to: state.appendingPathComponent("discovered.json"))
            let (agent, _) = try desk.startAgent(["--no-discovery", "--web", "--inbox", inbox.path])
            defer { agent.stop() }
            let (port, secret) = try page(of: agent)
            let host = "Host: 127.0.0.1:\(port)\r\n"

            let icon = try exchange(port, "GET /favicon.ico HTTP/1.1\r\n\(host)\r\n")
            #expect(icon.status == 200 && icon.text.contains("Content-Type: image/svg+xml"), "\(icon.text.prefix(300))")
            let auth = try session(port, secret)
            let html = try exchange(port, "GET / HTTP/1.1\r\n\(host)\r\n")
            #expect(html.text.contains("Loading…"), "\(html.text.prefix(2000))")
            let answer = try exchange(port, "GET /api/state HTTP/1.1\r\n\(host)\(auth)\r\n")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])
            let nearby = try #require(object["nearby"] as? [[String: Any]])
            // This device once, marked; each other device once with its ID's first group.
            let desks = nearby.filter { $0["name"] as? String == "desk" }
            #expect(desks.count == 1 && desks.first?["this"] as? Bool == true, "\(nearby)")
            let laptops = nearby.filter { $0["name"] as? String == "laptop" }.compactMap { $0["id"] as? String }
            #expect(Set(laptops) == ["AAAAAAA", "CCCCCCC"], "\(nearby)")
            let devices = try #require(object["devices"] as? [[String: Any]])
            let known = try #require(devices.first { $0["name"] as? String == "phone" })
            #expect(known["lastSeen"] as? String == "2026-11-26T11:00:00Z", "\(known)")
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
            // The shell, then the state with a session, on one connection.
            let auth = try session(port, secret)
            // The first request longer than the second, as a browser's first (with its Accept lines) often is.
            let padding = "Accept: " + String(repeating: "text/html;q=0.9, ", count: 40) + "*/*\r\n"
            for (round, target) in ["/?token=\(secret)", "/api/state"].enumerated() {
                let request = Array(
                    "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\(round == 0 ? padding : auth)\r\n".utf8)
                _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
                var answer = ""
                // Each answer whole (the shell is larger than one read).
                while true {
                    let n = recv(fd, &buffer, buffer.count, 0)
                    #expect(n > 0, "request \(round) was not answered")
                    guard n > 0 else { break }
                    answer += String(decoding: buffer[0..<n], as: UTF8.self)
                    if let end = answer.range(of: "\r\n\r\n"),
                        let length = answer[..<end.lowerBound].split(separator: "\r\n").first(where: {
                            $0.lowercased().hasPrefix("content-length:")
                        }).flatMap({ Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }),
                        answer.utf8.count >= answer.utf8.distance(from: answer.startIndex, to: end.upperBound) + length
                    {
                        break
                    }
                }
                #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer.prefix(300))")
            }
        }

        /// A client without a session announces a large body and drips it a byte at a time: it is refused at once and
        /// the connection is closed within about a second, however slowly the body comes (it held a thread for as
        /// long as the drip went on before).
        /// Sends `bytes` one at a time, one every `every` milliseconds, reading what comes back in between, until the
        /// server closes the connection; what it answered, and whether it closed.
        func drip(_ fd: Int32, bytes: [UInt8], every: Int32) -> (answer: [UInt8], closed: Bool) {
            var answer: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            for var byte in bytes {
                _ = send(fd, &byte, 1, Int32(MSG_NOSIGNAL))
                var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                while poll(&ready, 1, every) > 0 {
                    let n = recv(fd, &buffer, buffer.count, 0)
                    if n <= 0 { return (answer, true) }
                    answer += buffer[0..<n]
                }
            }
            return (answer, false)
        }

        /// A head trickled a byte at a time (each byte well within the idle timeout) is cut when the head's own
        /// deadline passes (2 s here), with 408: 32 such connections kept the page from answering its own user.
        @Test func aTrickledHeadIsCutAtItsDeadline() throws {
            let desk = try TestDevice("desk")
            let (agent, _) = try desk.startAgent(
                ["--no-discovery", "--web"], environment: ["SHARE_TEST_HTTP_HEAD_SECONDS": "2"])
            defer { agent.stop() }
            let (port, _) = try page(of: agent)
            let fd = try connectToPage(port)
            defer { close(fd) }
            let started = ContinuousClock.now
            let head = Array("GET /api/state HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nX-Pad: ".utf8)
            // One byte every 200 ms for at most 8 s.
            let (answer, closed) = drip(
                fd, bytes: Array((head + [UInt8](repeating: 0x61, count: 40)).prefix(40)), every: 200)
            let held = ContinuousClock.now - started
            #expect(
                String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 408"),
                "\(String(decoding: answer, as: UTF8.self))")
            #expect(closed, "the connection was still open after 8 s of trickling")
            #expect(held < .seconds(6), "held for \(held)")
        }

        /// Connections held open from one address take at most its share: another address is still served (32
        /// from one address once kept the page from everyone).
        @Test func connectionsHeldFromOneAddressDoNotKeepAnotherOut() throws {
            let desk = try TestDevice("desk")
            let (agent, _) = try desk.startAgent(["--no-discovery", "--web"])
            defer { agent.stop() }
            let (port, _) = try page(of: agent)
            var held: [Int32] = []
            defer { for fd in held { close(fd) } }
            for _ in 0..<32 { held.append(try connectToPage(port, from: "127.0.0.1")) }
            let fd = try connectToPage(port, from: "127.0.0.5")
            defer { close(fd) }
            let request = Array("GET /favicon.ico HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n".utf8)
            _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = recv(fd, &buffer, buffer.count, 0)
            #expect(n > 0 && String(decoding: buffer[0..<max(0, n)], as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        }

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
            // One byte every 100 ms for at most 10 s.
            let (answer, closed) = drip(fd, bytes: [UInt8](repeating: 0x61, count: 100), every: 100)
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
