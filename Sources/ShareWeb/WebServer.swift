import ShareHTTP
import ShareThreads
import FoundationEssentials
import ShareText
import Glibc
import Logging
import ShareTrust
import ShareNet
import ShareProtocol
import ShareEngine
import ShareAgent

/// The agent's own page (`share web`, or `share agent --web`): HTTP on 127.0.0.1 only, for the user of this machine.
///
/// Protected as Syncthing's and Jupyter's pages are, without their cookie: the address `share web` prints carries a
/// random secret; the page's script sends it once (a header) for a session token it keeps in the tab's own storage
/// and sends as `Authorization: Bearer` with every request. A browser sends cookies of 127.0.0.1 to every port, so a
/// cookie would reach any other local user's server; a token in per-origin storage reaches none. Files open through
/// links made for one item, usable once within a minute. Every request must name this server in its Host header (a
/// DNS-rebinding page names its own), and one that carries an Origin must be this page's. Without a session, only the
/// page's shell (nothing secret in it) and a one-line refusal are served. Every action goes through the same code as
/// the command line (`WebActions`).
public final class WebServer: PageLinks, Sendable {
    static let log = Log.logger("share.web")
    public struct Limits: Sendable {
        /// Connections at once (the page holds one for its events and a few for requests), and from one address.
        public var connections = 32
        public var connectionsPerAddress = 24
        /// Event streams at once.
        public var streams = 8
        /// Seconds a connection may be idle between requests.
        public var idleTimeout = 30.0
        /// Seconds a request head may take once its first byte came.
        public var headTimeout = HTTPConnection.defaultHeadSeconds
        public init() {}
    }

    public let port: Int
    package let partName = "page"
    /// The secret in the address printed last; one session is opened with it, and then it is spent.
    public var secret: String { state.withLock { $0.secret } }
    let actions: WebActions
    private let limits: Limits
    /// The sessions' tokens, sent by the page's script as `Authorization: Bearer TOKEN`.
    private struct Ticket {
        var from: String
        var name: String
        var download: Bool
        var expires: Date
    }
    private struct State {
        /// The secret of the address printed last, until it opens a session (nil then).
        var secret: String
        var sessions: Set<String> = []
        /// One-use links to received files.
        var tickets: [String: Ticket] = [:]
        var sessionOrder: [String] = []
        var streams = 0
        var stopping = false
    }
    private let state: Guarded<State>
    private let acceptor: Acceptor

    /// Listens on 127.0.0.1:`port` (0 picks a free port). `discovery`: where a pairing started on the page says
    /// that it waits, and looks for a device by name (LAN discovery's UDP port and interface, as `share pair`
    /// takes them); nil: it does not, and a device is named by HOST:PORT. `accept`: the acceptor's system call,
    /// replaced by tests that make it fail.
    public convenience init(
        device: LocalDevice, port: Int = 0, limits: Limits = Limits(),
        discovery: (port: Int, interface: String?)? = (21_847, nil)
    ) throws {
        try self.init(device: device, port: port, limits: limits, discovery: discovery, accept: nil)
    }

    package init(
        device: LocalDevice, port: Int = 0, limits: Limits = Limits(), discovery: (port: Int, interface: String?)?,
        accept: AcceptOverride?
    ) throws {
        acceptor = try Acceptor(
            host: "127.0.0.1", port: port, name: "web",
            limits: Self.acceptorLimits(limits),
            override: accept)
        self.port = acceptor.port
        state = Guarded(State(secret: Self.randomToken()))
        self.limits = limits
        actions = WebActions(device: device, discovery: discovery)
    }

    /// The page serves one person: another local user's connections are closed at once, and when the count is full
    /// a connection that has not yet sent a request with a session (or the secret) gives way to a new one.
    static func acceptorLimits(_ limits: Limits) -> AcceptorLimits {
        var counted = AcceptorLimits(
            total: limits.connections, perAddress: limits.connectionsPerAddress, whenFull: .evictFromBusiest,
            key: .network)
        counted.ownUserOnly = true
        return counted
    }

    /// The address to open: it carries the secret, which opens one session (the browser tab keeps it).
    public var address: String { "http://127.0.0.1:\(port)/?token=\(secret)" }

    /// A new address for another tab or browser: a new secret, the one printed before no longer opening anything.
    public func freshAddress() -> String {
        let secret = Self.randomToken()
        state.withLock { $0.secret = secret }
        return "http://127.0.0.1:\(port)/?token=\(secret)"
    }

    /// A session for the address's secret, which is then spent: the address in a terminal's scrollback or a
    /// browser's history opens nothing more (`share web` prints a new one).
    private func tradeSecret(_ sent: String) -> String? {
        let traded = state.withLock { state -> Bool in
            guard Self.same(sent, state.secret) else { return false }
            state.secret = Self.randomToken()
            return true
        }
        return traded ? openSession() : nil
    }

    /// Starts accepting; `failed` hears once if accepting stops for another reason than `stop`.
    public func start(failed: @escaping @Sendable (Error) -> Void = { _ in }) {
        actions.start()
        acceptor.start(
            stackSize: 1 << 20,
            handler: { [self] connection in
                defer { Syscalls.close(connection.fd) }
                Syscalls.setTimeouts(connection.fd, seconds: limits.idleTimeout)
                let http = HTTPConnection(plain: PlainSocket(fd: connection.fd))
                http.idleSeconds = limits.idleTimeout
                http.headSeconds = limits.headTimeout
                serve(http, connection.fd) { acceptor.markActive(connection) }
            }, failed: failed)
    }

    /// Stops accepting, ends every open connection and waits (bounded) for their threads.
    public func stop() {
        let wasRunning = state.withLock { state -> Bool in
            guard !state.stopping else { return false }
            state.stopping = true
            return true
        }
        guard wasRunning else { return }
        acceptor.stop(grace: 5, cut: { actions.stop() })
    }

    /// `active`: called once a request came with the page's session or secret.
    private func serve(_ http: HTTPConnection, _ client: Int32, active: () -> Void) {
        while !state.withLock({ $0.stopping }) {
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
                guard try answer(head, http, active: active) else { return }
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

    /// Checks where a request comes from and who sends it, then routes it. Returns whether the connection may carry
    /// another request.
    private func answer(_ head: HTTPHead, _ http: HTTPConnection, active: () -> Void) throws -> Bool {
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
        switch (head.method, head.path) {
        case ("GET", "/favicon.ico"), ("GET", "/"), ("GET", "/app.js"), ("GET", "/app.css"):
            // The shell, its script, style and icon hold nothing secret: served to any request that passed the Host
            // and Origin checks (the script then asks for a session; a browser asks for the icon without one).
            try http.discard(length)
            try serveStatic(head.path, http)
            return true
        case ("POST", "/api/session"):
            // The printed address's secret, sent by the page's script in a header, for a session token the script
            // keeps in the tab's own storage. No cookie: a browser sends cookies of 127.0.0.1 to every port, so any
            // local user's server could collect one.
            try http.discard(length)
            guard let sent = head.headers["x-share-secret"], let session = tradeSecret(sent) else {
                throw HTTPFailure(401, "a wrong or used secret: open the address share web printed again")
            }
            active()
            try json(http, ["session": session])
            return true
        case ("GET", "/api/inbox/file") where head.query["ticket"] != nil:
            // A link made for one file (the page's session is a header, which a link cannot carry).
            try http.discard(length)
            guard let ticket = head.query["ticket"], let from = head.query["from"], let name = head.query["name"],
                useTicket(ticket, from: from, name: name, download: head.query["download"] != nil)
            else { throw HTTPFailure(403, "this link is used or expired: open the file from the page again") }
            try actions.serveInboxFile(from: from, name: name, download: head.query["download"] != nil, http: http)
            return true
        default:
            break
        }
        // Everything else needs the session's token in the Authorization header, which only this page's script can
        // send (another origin's request would need a CORS preflight, which this server never grants): it is both
        // the credential and the protection against cross-site requests.
        guard session(of: head) else {
            throw HTTPFailure(401, "no session: open the address share web printed (it carries the page's secret)")
        }
        active()
        return try route(head, http, length: length)
    }

    /// The page's public files.
    private func serveStatic(_ path: String, _ http: HTTPConnection) throws {
        switch path {
        case "/favicon.ico":
            try http.writeResponse(
                200, headers: Self.pageHeaders(type: "image/svg+xml"), body: Array(WebPage.icon.utf8))
        case "/app.js":
            try http.writeResponse(
                200, headers: Self.pageHeaders(type: "text/javascript; charset=utf-8"), body: Array(WebPage.script.utf8)
            )
        case "/app.css":
            try http.writeResponse(
                200, headers: Self.pageHeaders(type: "text/css; charset=utf-8"), body: Array(WebPage.style.utf8))
        default:
            try http.writeResponse(
                200, headers: Self.pageHeaders(type: "text/html; charset=utf-8"), body: Array(WebPage.html().utf8))
        }
    }

    private func route(_ head: HTTPHead, _ http: HTTPConnection, length: UInt64) throws -> Bool {
        switch (head.method, head.path) {
        case ("GET", "/api/state"):
            try json(http, actions.state())
        case ("GET", "/api/events"):
            return try events(http)
        case ("GET", "/api/folders/versions"):
            try json(http, try actions.folderVersions(head.query["id"] ?? "", path: head.query["path"]))
        case ("POST", "/api/folders/restore"):
            try http.discard(length)
            try json(
                http,
                [
                    "said": try actions.restoreVersion(
                        head.query["id"] ?? "", path: head.query["path"] ?? "", at: head.query["at"])
                ])
        case ("POST", "/api/folders/allow-deletes"):
            try http.discard(length)
            try json(http, ["said": try actions.allowDeletes(head.query["id"] ?? "")])
        case ("POST", "/api/folders/pause"):
            try http.discard(length)
            try json(http, ["said": try actions.pause(head.query["id"] ?? "", head.query["paused"] != "0")])
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
        case ("POST", "/api/link"):
            try http.discard(length)
            let from = head.query["from"] ?? ""
            let name = head.query["name"] ?? ""
            let download = head.query["download"] != nil
            try actions.checkInboxItem(from: from, name: name)
            let ticket = makeTicket(from: from, name: name, download: download)
            var query = URLComponents()
            query.queryItems =
                [URLQueryItem(name: "from", value: from), URLQueryItem(name: "name", value: name)]
                + (download ? [URLQueryItem(name: "download", value: "1")] : [])
                + [URLQueryItem(name: "ticket", value: ticket)]
            try json(http, ["url": "/api/inbox/file?" + (query.percentEncodedQuery ?? "")])
        case ("POST", "/api/folders/accept"), ("POST", "/api/folders/decline"):
            try http.discard(length)
            try json(
                http, ["said": try actions.answerFolder(head.query["id"] ?? "", accept: head.path.hasSuffix("accept"))])
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
        let admitted = state.withLock { state -> Bool in
            guard state.streams < limits.streams else { return false }
            state.streams += 1
            return true
        }
        guard admitted else { throw HTTPFailure(429, "too many event streams open; close a tab of this page") }
        defer { state.withLock { $0.streams -= 1 } }
        try http.writeHead(
            200, headers: [("Content-Type", "text/event-stream"), ("Cache-Control", "no-store")], length: nil,
            close: true)
        var last: [UInt8] = []
        var quiet = 0
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        while !state.withLock({ $0.stopping }) {
            let now = try encoder.encode(actions.state())
            if Array(now) != last {
                last = Array(now)
                try http.write(Array("event: state\ndata: ".utf8) + last + Array("\n\n".utf8))
                quiet = 0
            } else if quiet >= 30 {
                try http.write(Array(": still here\n\n".utf8))
                quiet = 0
            }
            quiet += 1
            self.state.wait(seconds: 0.5) { $0.stopping }
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
            let encoded = download.percentEncoded()
            headers.append(("Content-Disposition", "attachment; filename=\"\(ascii)\"; filename*=UTF-8''\(encoded)"))
        }
        return headers
    }

    private func openSession() -> String {
        let token = Self.randomToken()
        state.withLock { state in
            state.sessions.insert(token)
            state.sessionOrder.append(token)
            if state.sessionOrder.count > 64 { state.sessions.remove(state.sessionOrder.removeFirst()) }
        }
        return token
    }

    /// Whether the request carries a session's token (`Authorization: Bearer TOKEN`).
    private func session(of head: HTTPHead) -> Bool {
        guard let header = head.headers["authorization"], header.hasPrefix("Bearer ") else { return false }
        let token = String(header.dropFirst("Bearer ".count)).trimmedSpaces
        return state.withLock { $0.sessions.contains { Self.same($0, token) } }
    }

    /// A link for one received file, usable once within a minute.
    private func makeTicket(from: String, name: String, download: Bool) -> String {
        let ticket = Self.randomToken()
        state.withLock { state in
            let now = Date()
            state.tickets = state.tickets.filter { $0.value.expires > now }
            if state.tickets.count >= 256,
                let oldest = state.tickets.min(by: { $0.value.expires < $1.value.expires })
            {
                state.tickets[oldest.key] = nil
            }
            state.tickets[ticket] = Ticket(
                from: from, name: name, download: download, expires: now.addingTimeInterval(60))
        }
        return ticket
    }

    /// Takes the ticket when it names this file this way and has not expired.
    private func useTicket(_ ticket: String, from: String, name: String, download: Bool) -> Bool {
        state.withLock { state in
            guard let found = state.tickets.first(where: { Self.same($0.key, ticket) }) else { return false }
            state.tickets[found.key] = nil
            let t = found.value
            return t.from == from && t.name == name && t.download == download && t.expires > Date()
        }
    }

    /// 32 random bytes (the system's CSPRNG), as hex.
    public static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in Format.hex(UInt64(UInt8.random(in: 0...255, using: &generator)), width: 2) }.joined()
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
