import ShareHTTP
import ShareThreads
import CoreTransferable
import FoundationEssentials
import ShareLocalSendRoute
import ShareText
import Logging
import ShareArchive
import ShareDisk
import ShareTrust
import ShareLocalSend
import ShareReach
import ShareTLS
import UniformTypeIdentifiers
import ShareNet
import ShareProtocol
import ShareEngine
import ShareKit
import ShareAgent

/// What the page shows and does, through the same code the command line uses: the agent's control socket for its
/// jobs, sends and cancels (`share jobs`, `share send`, `share cancel`), the pending book (`share accept`, `share
/// decline`), the inbox as `share inbox` lists it, pairing as `share pair` runs it. Files dropped on the page are
/// kept under `STATE/web/uploads` (through directory handles, free space checked first, bytes counted as they
/// arrive) until the jobs that send them have ended.
final class WebActions: Sendable {
    static let log = Log.logger("share.web")
    let device: LocalDevice
    private struct State {
        var cached: (at: ContinuousClock.Instant, state: WebState)?
        var pairing = PairingState()
        var pairingAnswer: Bool?
        var stopping = false
        var sweeping = false
    }
    private let guarded = Guarded(State())

    let discovery: (port: Int, interface: String?)?

    init(device: LocalDevice, discovery: (port: Int, interface: String?)?) {
        self.device = device
        self.discovery = discovery
    }

    var paths: DevicePaths { device.paths }

    func start() {
        guarded.withLock { $0.sweeping = true }
        Threads.start(name: "share-web-sweep", stackSize: 8 << 20) { [self] in
            defer { guarded.withLock { $0.sweeping = false } }
            var next = Date()
            while !guarded.withLock({ $0.stopping }) {
                if Date() >= next {
                    sweepUploads()
                    next = Date().addingTimeInterval(60)
                }
                guarded.wait(seconds: 1) { $0.stopping }
            }
        }
    }

    func stop() {
        guarded.withLock { state in
            state.stopping = true
            state.pairingAnswer = false
        }
        guarded.wait(seconds: 3) { !$0.sweeping }
    }

    // MARK: state

    /// The page's state, made at most about three times a second whoever asks.
    func state() -> WebState {
        let now = ContinuousClock.now
        if let cached = guarded.withLock({ $0.cached }), now - cached.at < .milliseconds(300) { return cached.state }
        var state = WebState(device: .init(name: device.name, id: device.id.description))
        let status = try? ControlClient.request(.status, paths: paths)
        state.agent = .init(
            running: status != nil, port: status?.port, localsend: status?.localsend,
            inbox: status?.inbox ?? paths.inbox.path)
        let trust = (try? TrustStore.load(paths.trustFile))?.devices ?? []
        let routes = RouteBook.load(paths)
        let discovered = DiscoveredPeer.load(paths)
        let heard = Dictionary(discovered.map { ($0.id, $0.lastSeen) }) { max($0, $1) }
        if status != nil, let folders = try? ControlClient.request(.folders(), paths: paths) {
            state.folders = folders.folders ?? []
            state.folderOffers = folders.offers ?? []
            state.declinedFolders = folders.declinedOffers ?? []
        }
        // Devices a folder link is open with now (one they opened here is in no route book).
        let linked = Set(state.folders.flatMap { $0.peers.filter(\.connected).map(\.id) })
        state.devices = trust.map { peer in
            let route = routes[peer.id.description]
            // The last contact as `share peers` knows it: reached (directly or through a relay) or heard; now,
            // while a folder link with it is open.
            let contact =
                linked.contains(peer.id.description)
                ? Date() : [route?.at, heard[peer.id.description]].compactMap { $0 }.max()
            return .init(
                name: peer.name, id: peer.id.description, relation: peer.relation.description,
                address: peer.address?.description, route: route?.route, lastSeen: contact, watch: peer.watch)
        }
        // Neither a trusted device (listed above) nor this device itself (its own earlier receive and pair runs,
        // heard announcing) is a neighbour.
        let known = Set(trust.map(\.id.description) + [device.id.description])
        let ownLocalSend =
            FileManager.default.fileExists(atPath: paths.state.appendingPathComponent("localsend/identity.pem").path)
            ? (try? LocalSendIdentity.load(paths)).flatMap { try? LocalSendIdentity.fingerprint($0) } : nil
        // Each device once (the newest of what was heard of it), with its ID's first group so that two of one name
        // are told apart; this device first, marked, never again among the others.
        var newest: [String: DiscoveredPeer] = [:]
        for peer in discovered where !known.contains(peer.id) {
            if newest[peer.id].map({ $0.lastSeen < peer.lastSeen }) ?? true { newest[peer.id] = peer }
        }
        var phones: [String: LocalSendSeen] = [:]
        for phone in LocalSendSeen.load(paths) where phone.fingerprint != ownLocalSend {
            if phones[phone.fingerprint].map({ $0.lastSeen < phone.lastSeen }) ?? true {
                phones[phone.fingerprint] = phone
            }
        }
        state.nearby =
            [
                .init(
                    name: device.name, kind: "share", detail: "this device",
                    address: status?.port.map { "port \($0)" } ?? "",
                    lastSeen: Date(), id: String(device.id.description.prefix(7)), this: true)
            ]
            + newest.values.sorted { $0.lastSeen > $1.lastSeen }.map {
                .init(
                    name: $0.name, kind: "share", detail: nil, address: $0.address.description, lastSeen: $0.lastSeen,
                    id: String($0.id.prefix(7)))
            }
            + phones.values.sorted { $0.lastSeen > $1.lastSeen }.map {
                .init(
                    name: $0.alias, kind: "LocalSend",
                    detail: [$0.deviceModel, $0.deviceType].compactMap { $0 }.joined(separator: ", "),
                    address: "\($0.host):\($0.port)", lastSeen: $0.lastSeen, id: String($0.fingerprint.prefix(8)))
            }
        state.pending = PendingOffers.load(paths).entries.filter { $0.answer == nil }.map { entry in
            .init(
                id: entry.id, from: entry.fromName, created: entry.created,
                items: entry.items.map {
                    .init(title: $0.title, label: $0.label, kind: $0.kind, size: $0.size, image: $0.image)
                })
        }
        state.jobs = (status?.jobs ?? []).sorted { $0.created > $1.created }.prefix(Self.listed).map { job in
            var line = WebState.Job(
                id: job.id, to: job.to, state: job.state.rawValue, summary: job.summary, error: job.lastError,
                created: job.created, bytesSent: job.bytesSent, sent: job.sentWords)
            if let progress = job.progress, !job.state.isFinal {
                line.item = progress.item
                // The session's bytes when the sender knows them, else the item's.
                if progress.total > 0 {
                    line.bytes = progress.bytes
                    line.total = progress.total
                } else {
                    line.bytes = progress.itemBytes
                    line.total = progress.itemTotal
                }
                line.rate = progress.rate
            }
            return line
        }
        let box = AgentInbox(directory: URL(fileURLWithPath: state.agent.inbox, isDirectory: true))
        state.texts = box.history.entries().suffix(50).reversed().map {
            .init(date: $0.date, from: $0.from, type: $0.type, text: $0.text)
        }
        state.inbox = box.listing().flatMap { peer in
            peer.items.map {
                WebState.InboxItem(
                    from: peer.name, name: $0.name, folder: $0.folder, size: $0.size,
                    modified: Date(timeIntervalSince1970: TimeInterval($0.modified)),
                    kind: $0.folder
                        ? "folder" : PendingOffers.kind(of: Self.type(of: $0.name).identifier, label: $0.name))
            }
        }.sorted { $0.modified > $1.modified }.prefix(Self.listed).map { $0 }
        state.pairing = guarded.withLock { $0.pairing }
        guarded.withLock { [state] in $0.cached = (now, state) }
        return state
    }

    private func invalidate() { guarded.withLock { $0.cached = nil } }

    /// The most jobs and received items the page lists (the newest): its state stays small whatever the inbox holds.
    static let listed = 200

    static func type(of name: String) -> UTType {
        let ext = PathText.pathExtension(name)
        return ext.isEmpty ? .data : UTType(filenameExtension: ext) ?? .data
    }

    static func mime(of name: String) -> String { type(of: name).preferredMIMEType ?? "application/octet-stream" }

    // MARK: pending offers

    /// A pending offer's preview image: only a name an offer lists.
    func preview(_ name: String) throws -> ([UInt8], String) {
        let listed = PendingOffers.load(paths).entries.contains { $0.items.contains { $0.image == name } }
        guard listed, (try? Directory.checkName(name)) != nil else { throw HTTPFailure(404, "no such preview") }
        let folder = try Directory.open(PendingOffers.folder(paths).path)
        guard let bytes = try folder.readFile(name, limit: 16 << 20) else { throw HTTPFailure(404, "no such preview") }
        return (bytes, Self.mime(of: name))
    }

    /// `share accept ID` / `share decline ID --reason R`.
    func answer(_ id: String, accept: Bool, reason: String?) throws -> String {
        let reason = reason.map { OutgoingItem.title($0) }
        guard let entry = try PendingOffers.answer(id, accept ? .accepted : .declined, reason: reason, paths: paths)
        else { throw HTTPFailure(404, "no offer \(id) waits for an answer") }
        invalidate()
        let phone = entry.from.hasPrefix("localsend:")
        return accept
            ? "accepted \(entry.itemCount) item(s) from \(entry.fromName): "
                + (phone ? "they arrive now if it still waits" : "they arrive when it offers them again")
            : "declined \(entry.itemCount) item(s) from \(entry.fromName)"
    }

    // MARK: shared folders

    /// Accepts (into its default place) or declines a folder another of the owner's devices offers.
    func answerFolder(_ id: String, accept: Bool) throws -> String {
        do {
            let answer = try ControlClient.request(
                accept ? .folderAccept(id: id, path: nil) : .folderDecline(id: id), paths: paths)
            invalidate()
            guard accept else { return "declined the folder \(id)" }
            return "accepted \(answer.folder?.label ?? id) into \(answer.folder?.path ?? "its place")"
        } catch let failure as ShareFailure {
            throw HTTPFailure(409, failure.message)
        }
    }

    /// `share sync versions ID [PATH]`.
    func folderVersions(_ id: String, path: String?) throws -> [FolderVersion] {
        do {
            return try ControlClient.request(.folderVersions(id: id, path: path), paths: paths).versions ?? []
        } catch let failure as ShareFailure {
            throw HTTPFailure(409, failure.message)
        }
    }

    /// `share sync restore ID PATH [--at TIME]` (the time as the page got it, ISO 8601).
    func restoreVersion(_ id: String, path: String, at: String?) throws -> String {
        var time: Date?
        if let at {
            guard let parsed = InternetDate.date(at) else {
                throw HTTPFailure(400, "at=\(at.prefix(40)) is not a time (ISO 8601)")
            }
            time = parsed
        }
        do {
            let answer = try ControlClient.request(.folderRestore(id: id, path: path, at: time), paths: paths)
            invalidate()
            return "put back \(answer.versions?.first?.path ?? path); it syncs to the other devices now"
        } catch let failure as ShareFailure {
            throw HTTPFailure(409, failure.message)
        }
    }

    /// `share sync allow-deletes ID`.
    func allowDeletes(_ id: String) throws -> String {
        do {
            let answer = try ControlClient.request(.folderAllowDeletes(id: id), paths: paths)
            invalidate()
            return "the deletions in \(answer.folder?.label ?? id) go to the other devices now"
        } catch let failure as ShareFailure {
            throw HTTPFailure(409, failure.message)
        }
    }

    /// `share sync pause ID` / `share sync resume ID`.
    func pause(_ id: String, _ paused: Bool) throws -> String {
        do {
            let answer = try ControlClient.request(.folderPause(id: id, paused: paused), paths: paths)
            invalidate()
            return "\(paused ? "paused" : "resumed") \(answer.folder?.label ?? id)"
        } catch let failure as ShareFailure {
            throw HTTPFailure(409, failure.message)
        }
    }

    // MARK: jobs

    /// `share cancel JOB`.
    func cancel(_ id: String) throws -> String {
        do {
            let answer = try ControlClient.request(.cancel(id: id), paths: paths)
            invalidate()
            return "cancelled job \(answer.job?.id ?? id) to \(answer.job?.to ?? "?")"
        } catch let failure as ShareFailure {
            throw HTTPFailure(409, failure.message)
        }
    }

    struct SendRequest: Codable {
        var to: [String]
        var uploads: [String]?
        var text: String?
    }

    struct SendAnswer: Codable {
        var jobs: [[String: String]] = []
        var errors: [String] = []
    }

    /// `share send FILE… --text T --to A --to B` with the agent running: one job per device in its outbox.
    func send(_ request: SendRequest) throws -> SendAnswer {
        guard !request.to.isEmpty else { throw HTTPFailure(400, "pick a device to send to") }
        guard ControlClient.agentIsRunning(paths) else {
            throw HTTPFailure(
                503, "no agent runs for this device: start one with share agent (the page sends through it)")
        }
        var items = SendItems()
        let folder = try uploads()
        for token in request.uploads ?? [] {
            guard token.count == 32, token.allSatisfy(\.isHexDigit),
                let upload = try? folder.directory(token), let name = upload.entries().first
            else { throw HTTPFailure(404, "no upload \(token): drop the file again") }
            try items.add(paths: [
                URL(fileURLWithPath: Self.uploadsPath(paths)).appendingPathComponent(token).appendingPathComponent(name)
            ])
        }
        if let text = request.text, !text.isEmpty { items.texts = [text] }
        guard !items.shareItems.isEmpty else { throw HTTPFailure(400, "nothing to send: drop a file or type a text") }
        let client = ShareClient(device: device)
        var answer = SendAnswer()
        for peer in request.to {
            var options = ShareClient.SendOptions()
            options.queue = true
            do {
                let delivery = try client.sendNow(items.shareItems, to: peer, options: options)
                answer.jobs.append(["to": peer, "job": delivery.job ?? "?"])
            } catch let failure as ShareFailure {
                answer.errors.append("\(peer): \(failure.message)")
            } catch {
                answer.errors.append("\(peer): \(error)")
            }
        }
        invalidate()
        return answer
    }

    // MARK: uploads

    static func uploadsPath(_ paths: DevicePaths) -> String { paths.state.appendingPathComponent("web/uploads").path }

    private func uploads() throws -> Directory {
        let web = try Directory.open(paths.state.path, create: true).directory("web", create: true)
        return try web.directory("uploads", create: true)
    }

    /// A file dropped on the page: its body, `length` bytes, kept under a token until the jobs that send it end.
    func upload(name raw: String, length: UInt64, from http: HTTPConnection) throws -> String {
        let name = OutgoingItem.title(PathText.lastComponent(raw))
        guard !name.isEmpty, name != ".", name != "..", (try? Directory.checkName(name)) != nil else {
            try http.discard(length)
            throw HTTPFailure(400, "a file needs a name")
        }
        let folder = try uploads()
        if let free = folder.freeSpace, free < length + (64 << 20) {
            throw HTTPFailure(
                507,
                "not enough free space for \(name): \(ProgressReporter.bytes(length)) asked, \(ProgressReporter.bytes(free)) free"
            )
        }
        let token = WebServer.randomToken().prefix(32).lowercased()
        let upload = try folder.directory(String(token), create: true)
        var kept = false
        defer { if !kept { _ = try? folder.removeTree(String(token)) } }
        let file = try upload.openFile(name, .create)
        defer { file.close() }
        var buffer = [UInt8](repeating: 0, count: 256 << 10)
        var offset: UInt64 = 0
        while offset < length {
            let n = try buffer.withUnsafeMutableBytes {
                try http.read(
                    into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<Int(min(UInt64($0.count), length - offset))]))
            }
            guard n > 0 else { throw HTTPFailure(400, "the upload of \(name) ended at \(offset) of \(length) bytes") }
            try file.write(buffer[0..<n], at: offset)
            offset += UInt64(n)
        }
        kept = true
        return String(token)
    }

    /// Removes uploads no job still needs: those older than ten minutes that no unfinished job names.
    func sweepUploads() {
        guard let folder = try? uploads() else { return }
        guard let status = try? ControlClient.request(.status, paths: paths) else { return }
        let base = Self.uploadsPath(paths) + "/"
        var needed: Set<String> = []
        for job in status.jobs ?? [] where !job.state.isFinal {
            for path in (job.items ?? []).compactMap(\.path) + job.files where path.hasPrefix(base) {
                needed.insert(String(path.dropFirst(base.count).prefix { $0 != "/" }))
            }
        }
        let now = Int64(Date().timeIntervalSince1970)
        for token in folder.entries() where !needed.contains(token) {
            guard let info = folder.info(token), now - info.modified > 600 else { continue }
            _ = try? folder.removeTree(token)
        }
    }

    // MARK: inbox

    /// The agent's inbox folder (as the running agent says, else the default).
    private func inboxPath() -> String {
        (try? ControlClient.request(.status, paths: paths))?.inbox ?? paths.inbox.path
    }

    /// The folder of a device in the inbox, for its item `name`: both single names, never hidden ones.
    private func deviceFolder(_ from: String, item name: String) throws -> (folder: Directory, inbox: String) {
        let inbox = inboxPath()
        guard (try? Directory.checkName(from)) != nil, (try? Directory.checkName(name)) != nil, !from.hasPrefix("."),
            let folder = try? Directory.open(inbox).directory(from)
        else { throw HTTPFailure(404, "no such item") }
        return (folder, inbox)
    }

    /// A received file, shown in the browser or downloaded; a received folder, downloaded as `NAME.tar` (pax, the
    /// folder's name leading every path, its length known before the first byte, links that leave it left out).
    /// Throws 404 unless `name` is an item in `from`'s inbox folder (a link is made only for one that is there).
    func checkInboxItem(from: String, name: String) throws {
        let (peer, _) = try deviceFolder(from, item: name)
        guard let info = peer.info(name), info.kind == .file || info.kind == .directory else {
            throw HTTPFailure(404, "no such item")
        }
    }

    func serveInboxFile(from: String, name: String, download: Bool, http: HTTPConnection) throws {
        let (peer, inbox) = try deviceFolder(from, item: name)
        guard let info = peer.info(name) else { throw HTTPFailure(404, "no such item") }
        if info.kind == .directory { return try serveInboxFolder(inbox: inbox, from: from, name: name, http: http) }
        guard info.kind == .file else { throw HTTPFailure(404, "no such item") }
        let file = try peer.openFile(name, .read)
        defer { file.close() }
        let size = try file.size
        try http.writeHead(
            200, headers: WebServer.fileHeaders(type: Self.mime(of: name), download: download ? name : nil),
            length: size)
        var buffer = [UInt8](repeating: 0, count: 256 << 10)
        var offset: UInt64 = 0
        while offset < size {
            let n = try buffer.withUnsafeMutableBytes { try file.read(into: $0, at: offset) }
            guard n > 0 else { throw HTTPFailure(500, "\(name) shrank while it was read") }
            try buffer.withUnsafeBytes { try http.write(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            offset += UInt64(n)
        }
    }

    private func serveInboxFolder(inbox: String, from: String, name: String, http: HTTPConnection) throws {
        let root = URL(fileURLWithPath: inbox).appendingPathComponent(from).appendingPathComponent(name)
        let plan: ArchivePlan
        do {
            let walked = try ArchivePlan.folder(root, measure: false)
            plan = try ArchivePlan(
                entries: walked.entries.map { entry in
                    var entry = entry
                    entry.path = entry.path == "./" ? "\(name)/" : "\(name)/\(entry.path)"
                    return entry
                })
        } catch {
            throw HTTPFailure(500, "cannot read \(name): \(error)")
        }
        try http.writeHead(
            200, headers: WebServer.fileHeaders(type: "application/x-tar", download: "\(name).tar"),
            length: plan.streamSize)
        // Once the head is out, a failure (a file changed while it was read) can only cut the connection: the
        // browser sees a download shorter than announced.
        let writer = try ArchiveWriter(format: .pax) { try http.write($0) }
        var buffer = [UInt8](repeating: 0, count: 256 << 10)
        try buffer.withUnsafeMutableBytes { try plan.write(to: writer, buffer: $0) }
    }

    /// Removes a received item (a file, or a folder with what it holds).
    func remove(from: String, name: String) throws -> String {
        let (peer, _) = try deviceFolder(from, item: name)
        guard (try? peer.removeTree(name)) == true else { throw HTTPFailure(404, "no such item") }
        invalidate()
        return "removed \(name) from \(from)"
    }

    // MARK: pairing

    struct PairRequest: Codable {
        /// The waiting device (a name on the LAN, or HOST:PORT); nil: this device waits.
        var peer: String?
        /// `trusted`, `team` or `group`.
        var relation: String?
        var group: String?
    }

    /// `share pair [NAME] [--team | --group G]`, its code compared on the page.
    func pair(_ request: PairRequest) throws -> String {
        var options = Pairing.Options()
        switch request.relation ?? "trusted" {
        case "team": options.relation = .team
        case "trusted": options.relation = .trusted
        case "group":
            guard let group = request.group, !group.isEmpty else { throw HTTPFailure(400, "a group needs a name") }
            options.relation = .group(group)
        default: throw HTTPFailure(400, "relation is trusted, team or group")
        }
        options.agentPort = try AgentPort.current(paths)
        options.announce = discovery
        if let peer = request.peer, PeerAddress(parsing: peer) == nil, discovery == nil {
            throw HTTPFailure(400, "discovery is off here: name the device by HOST:PORT")
        }
        let discovery = self.discovery
        let busy = guarded.withLock { state -> Bool in
            if ["waiting", "connecting", "confirm"].contains(state.pairing.state) { return true }
            state.pairing = PairingState(state: request.peer == nil ? "waiting" : "connecting")
            state.pairingAnswer = nil
            return false
        }
        guard !busy else { throw HTTPFailure(409, "a pairing is under way") }
        invalidate()
        let device = self.device
        let settings = options
        let confirm: Pairing.Confirm = { [self] name, id, code in
            guarded.withLock { state in
                state.pairing.state = "confirm"
                state.pairing.peer = name
                state.pairing.id = id.description
                state.pairing.code = code
                state.cached = nil
            }
            return guarded.withLock(
                when: { $0.pairingAnswer != nil || $0.stopping }, seconds: settings.decisionTimeout
            ) { state, _ in
                let yes = state.pairingAnswer ?? false
                state.pairingAnswer = nil
                state.pairing.state = yes ? "confirmed" : "declined"
                return yes
            }
        }
        Threads.start(name: "share-web-pair", stackSize: 8 << 20) { [self] in
            var message: String
            var outcome = "failed"
            do {
                let result: Pairing.Outcome
                if let peer = request.peer {
                    let target =
                        try PeerAddress(parsing: peer)
                        ?? Pairing.find(
                            name: peer, discoveryPort: discovery?.port ?? 21_847, interface: discovery?.interface,
                            timeout: 15)
                    result = try Pairing.connect(device: device, to: target, options: settings, confirm: confirm)
                } else {
                    result = try Pairing.listen(
                        device: device, host: "::", port: 0, options: settings,
                        ready: { [self] bound in
                            guarded.withLock { state in
                                state.pairing.message =
                                    "waiting to pair as \(device.name); on the other device run: share pair \(device.name) (or share pair HOST:\(bound))"
                                state.cached = nil
                            }
                        }, confirm: confirm)
                }
                outcome = "paired"
                message = "paired: now trusting \(result.peer.name) as \(result.peer.relation)"
            } catch let failure as ShareFailure {
                message = failure.message
            } catch {
                message = "\(error)"
            }
            guarded.withLock { [message, outcome] state in
                state.pairing.state = outcome
                state.pairing.message = message
                state.cached = nil
            }
        }
        return request.peer == nil ? "waiting to pair" : "looking for \(request.peer!)"
    }

    /// The user's answer to "does the other device show the same code?".
    func confirmPairing(_ yes: Bool) throws -> String {
        try guarded.withLock { state in
            guard state.pairing.state == "confirm" else { throw HTTPFailure(409, "no pairing waits for an answer") }
            state.pairingAnswer = yes
            state.cached = nil
            return yes ? "confirmed" : "declined"
        }
    }
}

/// What the page shows, as JSON.
struct WebState: Encodable {
    struct DeviceLine: Encodable {
        var name: String
        var id: String
    }
    struct Agent: Encodable {
        var running = false
        var port: Int?
        var localsend: String?
        var inbox = ""
    }
    struct Peer: Encodable {
        var name: String
        var id: String
        var relation: String
        var address: String?
        var route: String?
        var lastSeen: Date?
        var watch: Bool
    }
    struct Nearby: Encodable {
        var name: String
        var kind: String
        var detail: String?
        var address: String
        var lastSeen: Date
        /// The first group of its device ID (a LocalSend device's fingerprint's first characters).
        var id: String?
        /// This device itself.
        var this: Bool?
    }
    struct Pending: Encodable {
        struct Item: Encodable {
            var title: String
            var label: String
            var kind: String
            var size: UInt64?
            var image: String?
        }
        var id: String
        var from: String
        var created: Date
        var items: [Item]
    }
    struct Job: Encodable {
        var id: String
        var to: String
        var state: String
        var summary: String
        var error: String?
        var created: Date
        var bytesSent: UInt64
        /// "1.0 GiB sent: 134.0 KiB crossed, 1.0 GiB made from the copy there", as `share jobs` says it.
        var sent: String
        var item: String?
        var bytes: UInt64?
        var total: UInt64?
        var rate: UInt64?
    }
    struct Text: Encodable {
        var date: Date
        var from: String
        var type: String
        var text: String
    }
    struct InboxItem: Encodable {
        var from: String
        var name: String
        var folder: Bool
        var size: UInt64
        var modified: Date
        var kind: String
    }

    var device: DeviceLine
    var agent = Agent()
    var devices: [Peer] = []
    var nearby: [Nearby] = []
    var pending: [Pending] = []
    var jobs: [Job] = []
    var texts: [Text] = []
    var inbox: [InboxItem] = []
    var pairing = PairingState()
    /// Shared folders and how each stands, and the folders other devices offer this one.
    var folders: [FolderStatus] = []
    var folderOffers: [FolderOffer] = []
    /// Folders declined here, which the person may still take.
    var declinedFolders: [FolderOffer] = []
}

/// Where a pairing started on the page stands: idle, waiting, connecting, confirm (the code shown, an answer wanted),
/// confirmed or declined, paired, failed.
struct PairingState: Codable, Equatable {
    var state = "idle"
    var message: String?
    var peer: String?
    var id: String?
    var code: String?
}
