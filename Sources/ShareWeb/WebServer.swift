import Foundation
import Glibc
import Logging
import ShareKit
import ShareLink
import ShareLocalSend

/// The agent's own page (`share web`, or `share agent --web`): HTTP on 127.0.0.1 only, for the user of this machine.
///
/// Protected as Syncthing's and Jupyter's pages are: the address `share web` prints carries a random secret; opening
/// it sets a session cookie (HttpOnly, SameSite=Strict) and the secret leaves the address bar. Every request must
/// name this server in its Host header (a DNS-rebinding page names its own), a request that carries an Origin must be
/// this page's, and every change carries the session's CSRF token in a header. Without a session, nothing but a
/// one-line refusal is served. Every action goes through the same code as the command line (`WebActions`).
public final class WebServer: @unchecked Sendable {  // mutable state guarded by `lock`
    static let log = Log.logger("share.web")
    public struct Limits: Sendable {
        /// Connections at once (the page holds one for its events and a few for requests).
        public var connections = 32
        /// Event streams at once.
        public var streams = 8
        /// Seconds a connection may be idle between requests.
        public var idleTimeout = 30.0
        public init() {}
    }

    public let port: Int
    /// The secret in the address; a session is opened with it.
    public let secret: String
    let actions: WebActions
    private let fd: Int32
    private let limits: Limits
    private let lock = NSCondition()
    /// Session cookie → CSRF token.
    private var sessions: [String: String] = [:]
    private var sessionOrder: [String] = []
    private var open = 0
    private var streams = 0
    private var stopping = false
    private var acceptDone = true
    private var connections: [Int32: Int32] = [:]

    /// Listens on 127.0.0.1:`port` (0 picks a free port). `discovery`: where a pairing started on the page says
    /// that it waits, and looks for a device by name (LAN discovery's UDP port and interface, as `share pair`
    /// takes them); nil: it does not, and a device is named by HOST:PORT.
    public init(
        device: LocalDevice, port: Int = 0, limits: Limits = Limits(),
        discovery: (port: Int, interface: String?)? = (21_847, nil)
    ) throws {
        Syscalls.ignoreSIGPIPE()
        (fd, self.port) = try Syscalls.listen(host: "127.0.0.1", port: port)
        secret = Self.randomToken()
        self.limits = limits
        actions = WebActions(device: device, discovery: discovery)
    }

    /// The address to open: it carries the secret.
    public var address: String { "http://127.0.0.1:\(port)/?token=\(secret)" }

    public func start() {
        lock.withLock { acceptDone = false }
        actions.start()
        let thread = Thread { [self] in
            defer {
                lock.withLock {
                    acceptDone = true
                    lock.broadcast()
                }
            }
            while !lock.withLock({ stopping }) {
                guard let accepted = try? Syscalls.accept(fd, timeout: 0.25) else { continue }
                admit(accepted.fd)
            }
        }
        thread.name = "share-web-accept"
        thread.start()
    }

    /// Stops accepting, ends every open connection and waits (bounded) for their threads.
    public func stop() {
        let wasRunning = lock.withLock { () -> Bool in
            guard !stopping else { return false }
            stopping = true
            for socket in connections.values { Syscalls.shutdownSocket(socket) }
            return true
        }
        guard wasRunning else { return }
        actions.stop()
        let deadline = Date().addingTimeInterval(5)
        lock.withLock {
            while (!acceptDone || open > 0) && lock.wait(until: deadline) {}
        }
        Syscalls.close(fd)
    }

    private func admit(_ client: Int32) {
        let admitted: Bool = lock.withLock {
            guard !stopping, open < limits.connections else { return false }
            open += 1
            connections[client] = client
            return true
        }
        guard admitted else {
            Syscalls.close(client)
            return
        }
        let thread = Thread { [self] in
            defer {
                lock.withLock {
                    connections[client] = nil
                    open -= 1
                    lock.broadcast()
                }
                Syscalls.close(client)
            }
            Syscalls.setTimeouts(client, seconds: limits.idleTimeout)
            serve(HTTPConnection(plain: PlainSocket(fd: client)), client)
        }
        thread.name = "share-web"
        thread.stackSize = 1 << 20
        thread.start()
    }

    private func serve(_ http: HTTPConnection, _ client: Int32) {
        while !lock.withLock({ stopping }) {
            let head: HTTPHead
            do {
                guard let next = try http.readHead(request: true) else { return }
                head = next
            } catch let failure as HTTPFailure {
                try? http.writeResponse(
                    failure.status, headers: Self.textHeaders, body: Array("\(failure.message)\n".utf8), close: true)
                return
            } catch {
                return
            }
            Self.log.debug("request", metadata: ["method": "\(head.method)", "path": "\(head.path)"])
            do {
                guard try answer(head, http) else { return }
            } catch let failure as HTTPFailure {
                Self.log.info(
                    "refused",
                    metadata: ["path": "\(head.path)", "status": "\(failure.status)", "why": "\(failure.message)"])
                try? http.writeResponse(
                    failure.status, headers: Self.textHeaders, body: Array("\(failure.message)\n".utf8), close: true)
                // The rest of a refused body is read off (a second and 4 MiB at most, however slowly it comes), so
                // that closing does not reset the connection under the answer.
                Syscalls.drain(client, limit: 4 << 20, seconds: 1)
                return
            } catch {
                return
            }
        }
    }

    static let textHeaders = [
        ("Content-Type", "text/plain; charset=utf-8"), ("Cache-Control", "no-store"),
        ("X-Content-Type-Options", "nosniff"),
    ]

    /// The names this server answers to: a page served under any other (a rebinding attacker's) gets nothing.
    private var hosts: Set<String> { ["127.0.0.1:\(port)", "localhost:\(port)"] }
    private var origins: Set<String> { Set(hosts.map { "http://\($0)" }) }
    private var cookieName: String { "share_web_\(port)" }

    /// Checks where a request comes from and who sends it, then routes it. Returns whether the connection may carry
    /// another request.
    private func answer(_ head: HTTPHead, _ http: HTTPConnection) throws -> Bool {
        guard let host = head.headers["host"], hosts.contains(host.lowercased()) else {
            throw HTTPFailure(403, "this page answers only at 127.0.0.1:\(port)")
        }
        if let origin = head.headers["origin"], !origins.contains(origin.lowercased()) {
            throw HTTPFailure(403, "a request from another site (\(origin)) is refused")
        }
        if head.headers["sec-fetch-site"] == "cross-site" {
            throw HTTPFailure(403, "a request from another site is refused")
        }
        let length = try head.contentLength()
        // The page's icon is no secret: served to any request that passed the Host and Origin checks (a browser asks
        // for it without the session; refusing it filled the log with one refusal per load).
        if head.method == "GET", head.path == "/favicon.ico" {
            try http.discard(length)
            try http.writeResponse(
                200, headers: Self.pageHeaders(type: "image/svg+xml"), body: Array(WebPage.icon.utf8))
            return true
        }
        // Opening the printed address: a session, then the address without its secret.
        if head.method == "GET", head.path == "/", let token = head.query["token"] {
            try http.discard(length)
            guard Self.same(token, secret) else {
                throw HTTPFailure(401, "a wrong secret: open the address share web printed")
            }
            let cookie = openSession()
            try http.writeResponse(
                303,
                headers: [
                    ("Location", "/"), ("Cache-Control", "no-store"),
                    ("Set-Cookie", "\(cookieName)=\(cookie); Path=/; HttpOnly; SameSite=Strict"),
                ], body: [])
            return true
        }
        guard let csrf = session(of: head) else {
            throw HTTPFailure(401, "no session: open the address share web printed (it carries the page's secret)")
        }
        if head.method != "GET" && head.method != "HEAD" {
            guard let sent = head.headers["x-csrf-token"], Self.same(sent, csrf) else {
                throw HTTPFailure(403, "a change without this page's token is refused")
            }
        }
        return try route(head, http, csrf: csrf, length: length)
    }

    private func route(_ head: HTTPHead, _ http: HTTPConnection, csrf: String, length: UInt64) throws -> Bool {
        switch (head.method, head.path) {
        case ("GET", "/"):
            try http.discard(length)
            try http.writeResponse(
                200, headers: Self.pageHeaders(type: "text/html; charset=utf-8"),
                body: Array(WebPage.html(csrf: csrf).utf8))
        case ("GET", "/app.js"):
            try http.writeResponse(
                200, headers: Self.pageHeaders(type: "text/javascript; charset=utf-8"), body: Array(WebPage.script.utf8)
            )
        case ("GET", "/app.css"):
            try http.writeResponse(
                200, headers: Self.pageHeaders(type: "text/css; charset=utf-8"), body: Array(WebPage.style.utf8))
        case ("GET", "/api/state"):
            try json(http, actions.state())
        case ("GET", "/api/events"):
            return try events(http)
        case ("GET", "/api/preview"):
            let (bytes, type) = try actions.preview(head.query["name"] ?? "")
            try http.writeResponse(200, headers: Self.fileHeaders(type: type, download: nil), body: bytes)
        case ("GET", "/api/inbox/file"):
            try actions.serveInboxFile(
                from: head.query["from"] ?? "", name: head.query["name"] ?? "", download: head.query["download"] != nil,
                http: http)
        case ("POST", "/api/upload"):
            try json(http, ["upload": try actions.upload(name: head.query["name"] ?? "", length: length, from: http)])
        case ("POST", "/api/send"):
            let request = try JSONDecoder().decode(
                WebActions.SendRequest.self, from: Data(try http.readBody(length: length, limit: 16 << 20)))
            try json(http, try actions.send(request))
        case ("POST", "/api/pending/accept"), ("POST", "/api/pending/decline"):
            try http.discard(length)
            let accept = head.path.hasSuffix("accept")
            try json(
                http, ["said": try actions.answer(head.query["id"] ?? "", accept: accept, reason: head.query["reason"])]
            )
        case ("POST", "/api/jobs/cancel"):
            try http.discard(length)
            try json(http, ["said": try actions.cancel(head.query["id"] ?? "")])
        case ("POST", "/api/inbox/remove"):
            try http.discard(length)
            try json(http, ["said": try actions.remove(from: head.query["from"] ?? "", name: head.query["name"] ?? "")])
        case ("POST", "/api/pair"):
            let request = try JSONDecoder().decode(
                WebActions.PairRequest.self, from: Data(try http.readBody(length: length, limit: 64 << 10)))
            try json(http, ["said": try actions.pair(request)])
        case ("POST", "/api/pair/confirm"):
            try http.discard(length)
            try json(http, ["said": try actions.confirmPairing(head.query["answer"] == "yes")])
        case (_, "/"), (_, "/api/state"), (_, "/api/events"), (_, "/api/upload"), (_, "/api/send"):
            throw HTTPFailure(405, "\(head.method) is not answered at \(head.path)")
        default:
            throw HTTPFailure(404, "nothing at \(head.path)")
        }
        return true
    }

    private func json<T: Encodable>(_ http: HTTPConnection, _ value: T) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        try http.writeResponse(
            200, headers: [("Content-Type", "application/json"), ("Cache-Control", "no-store")],
            body: Array(try encoder.encode(value)))
    }

    /// Server-sent events: the page's state whenever it changes (looked at twice a second), a comment every 15 s.
    private func events(_ http: HTTPConnection) throws -> Bool {
        let admitted = lock.withLock { () -> Bool in
            guard streams < limits.streams else { return false }
            streams += 1
            return true
        }
        guard admitted else { throw HTTPFailure(429, "too many event streams open; close a tab of this page") }
        defer { lock.withLock { streams -= 1 } }
        try http.writeHead(
            200, headers: [("Content-Type", "text/event-stream"), ("Cache-Control", "no-store")], length: nil,
            close: true)
        var last: [UInt8] = []
        var quiet = 0
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        while !lock.withLock({ stopping }) {
            let state = try encoder.encode(actions.state())
            if Array(state) != last {
                last = Array(state)
                try http.write(Array("event: state\ndata: ".utf8) + last + Array("\n\n".utf8))
                quiet = 0
            } else if quiet >= 30 {
                try http.write(Array(": still here\n\n".utf8))
                quiet = 0
            }
            quiet += 1
            lock.withLock { _ = lock.wait(until: Date().addingTimeInterval(0.5)) }
        }
        return false
    }

    static func pageHeaders(type: String) -> [(String, String)] {
        [
            ("Content-Type", type), ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff"),
            ("X-Frame-Options", "DENY"), ("Referrer-Policy", "no-referrer"),
            (
                "Content-Security-Policy",
                "default-src 'self'; img-src 'self' blob:; script-src 'self'; style-src 'self'; connect-src 'self'; "
                    + "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
            ),
        ]
    }

    /// A received file, shown or downloaded: in a sandbox of its own origin, so a received page cannot act as this one.
    static func fileHeaders(type: String, download: String?) -> [(String, String)] {
        var headers = [
            ("Content-Type", type), ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff"),
            (
                "Content-Security-Policy",
                "sandbox; default-src 'none'; img-src 'self'; media-src 'self'; style-src 'unsafe-inline'"
            ),
            ("Referrer-Policy", "no-referrer"),
        ]
        if let download {
            let ascii = String(
                download.unicodeScalars.map {
                    $0.isASCII && $0.value >= 0x20 && $0 != "\"" && $0 != "\\" ? Character($0) : "_"
                })
            let encoded = download.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ascii
            headers.append(("Content-Disposition", "attachment; filename=\"\(ascii)\"; filename*=UTF-8''\(encoded)"))
        }
        return headers
    }

    private func openSession() -> String {
        let cookie = Self.randomToken()
        lock.withLock {
            sessions[cookie] = Self.randomToken()
            sessionOrder.append(cookie)
            if sessionOrder.count > 64 { sessions[sessionOrder.removeFirst()] = nil }
        }
        return cookie
    }

    /// The CSRF token of the request's session, nil without one.
    private func session(of head: HTTPHead) -> String? {
        guard let header = head.headers["cookie"] else { return nil }
        for part in header.split(separator: ";") {
            let pair = part.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, pair[0].trimmingCharacters(in: .whitespaces) == cookieName else { continue }
            let value = pair[1].trimmingCharacters(in: .whitespaces)
            if let csrf = lock.withLock({ sessions[value] }) { return csrf }
        }
        return nil
    }

    /// 32 random bytes (the system's CSPRNG), as hex.
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    /// Compares in time independent of where the two differ.
    static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for index in x.indices { difference |= x[index] ^ y[index] }
        return difference == 0
    }
}
