import ShareText
import ShareHTTP
import Synchronization
import CoreTransferable
import FoundationEssentials
import ShareLocalSendRoute
import ShareThreads
import Logging
import ShareDisk
import ShareLocalSend
import ShareTLS
import ShareNet
import ShareTrust
import ShareProtocol
import UniformTypeIdentifiers
import ShareEngine

/// LocalSend's upload API on the agent: what a phone's LocalSend app calls to send here. An upload is an offer
/// like any other: the policy decides (a LocalSend device may deliver into the inbox and nothing else), the user
/// accepts or declines it in `share pending` unless the device's fingerprint is trusted without asking, and files
/// land in that device's inbox folder through the directory-handle layer, counted as bytes arrive, checked against
/// the size and SHA-256 announced, and named only once complete.
package final class LocalSendInbox: Sendable {
    static let log = Log.logger("share.localsend")
    /// Files in one upload, at most (LocalSend sends a folder as its files).
    package static let maxFiles = 4_000
    /// Uploads accepted and not finished, at most.
    static let maxSessions = 16
    static let maxJSON = 8 << 20

    let device: LocalDevice
    let inbox: AgentInbox
    let settings: LocalSendSettings
    let info: LocalSendInfo
    let peers: LocalSendPeers
    private struct State {
        var sessions: [String: Upload] = [:]
        var pinFailures: [String: (count: Int, since: Date)] = [:]
        /// Wrong PINs of the last minute from every address together: an attacker moving to a new address every
        /// three guesses (5,165 tries found a 4-digit PIN in 46 s) meets this bound instead.
        var recentWrongPins: [Date] = []
        /// While set, no PIN is taken from anyone (shown by `share status`).
        var pinLockedUntil: Date?
    }
    private let state = Mutex(State())
    static let maxWrongPinsPerMinute = 10

    /// "PIN locked for 42 s after 10 wrong PINs from every address together", while it is.
    package var pinLock: String? {
        state.withLock { state in
            guard let until = state.pinLockedUntil, until > Date() else { return nil }
            return "PIN locked for \(Int(until.timeIntervalSinceNow.rounded(.up))) s after "
                + "\(Self.maxWrongPinsPerMinute) wrong PINs in a minute"
        }
    }

    final class Upload: Sendable {
        let id: String
        let alias: String
        let fingerprint: String
        let host: String
        let files: [String: LocalSendFile]
        let tokens: [String: String]
        let folder: Directory
        struct Progress {
            var done: Set<String> = []
            var busy: Set<String> = []
            var stored: [String] = []
            var touched = Date()
        }
        let progress = Mutex(Progress())
        var done: Set<String> { progress.withLock { $0.done } }
        var touched: Date { progress.withLock { $0.touched } }

        init(
            id: String, alias: String, fingerprint: String, host: String, files: [String: LocalSendFile],
            folder: Directory
        ) {
            self.id = id
            self.alias = alias
            self.fingerprint = fingerprint
            self.host = host
            self.files = files
            self.folder = folder
            tokens = files.mapValues { _ in SecureRandom.bytes(16).hexString }
        }
    }

    package init(
        device: LocalDevice, inbox: AgentInbox, settings: LocalSendSettings, info: LocalSendInfo, peers: LocalSendPeers
    ) {
        self.device = device
        self.inbox = inbox
        self.settings = settings
        self.info = info
        self.peers = peers
    }

    private func json<T: Encodable>(_ value: T) -> [UInt8] { Array((try? JSONEncoder().encode(value)) ?? Data()) }

    /// LocalSend's routes. Any failure answers with its status and ends the connection.
    package func route(_ head: HTTPHead, _ http: HTTPConnection, _ caller: LocalSendCaller) throws -> Bool {
        // Counted or chunked (some LocalSend apps upload in chunks): the body reader bounds either as it arrives.
        let body = try http.body(of: head)
        let prefix = LocalSend.apiPrefix
        switch (head.method, head.path) {
        case ("GET", prefix + "/info"), ("GET", "/api/localsend/v1/info"):
            try body.discard()
            try http.writeResponse(200, json: json(info.answer))
            return true
        case ("POST", prefix + "/register"):
            var seen = try JSONDecoder().decode(
                LocalSendInfo.self, from: Data(try body.readAll(limit: 64 << 10)))
            // Only a certificate proves a fingerprint; a claim is recorded as one.
            if let proved = caller.certificateFingerprint { seen.fingerprint = proved }
            peers.saw(seen, at: caller.host, proved: caller.certificateFingerprint != nil)
            try http.writeResponse(200, json: json(info.answer))
            return true
        case ("POST", prefix + "/prepare-upload"):
            return try prepare(head, http, caller, body: body)
        case ("POST", prefix + "/upload"):
            return try upload(head, http, caller, body: body)
        case ("POST", prefix + "/cancel"):
            try body.discard()
            if let id = head.query["sessionId"] { cancel(id, from: caller.host) }
            try http.writeResponse(200)
            return true
        default:
            throw HTTPFailure(404, "no route \(head.method) \(head.path)")
        }
    }

    // MARK: prepare-upload

    private func prepare(_ head: HTTPHead, _ http: HTTPConnection, _ caller: LocalSendCaller, body request: HTTPBody)
        throws -> Bool
    {
        if let pin = settings.pin, !pin.isEmpty {
            try checkPin(head.query["pin"], pin, host: caller.host)
        }
        let body: LocalSendPrepareUpload
        do {
            body = try JSONDecoder().decode(
                LocalSendPrepareUpload.self, from: Data(try request.readAll(limit: Self.maxJSON)))
        } catch let failure as HTTPFailure {
            throw failure
        } catch {
            throw HTTPFailure(400, "the upload's description does not parse: \(error)")
        }
        guard !body.files.isEmpty else {
            try http.writeResponse(204)
            return true
        }
        guard body.files.count <= Self.maxFiles else {
            throw HTTPFailure(413, "\(body.files.count) files in one upload; at most \(Self.maxFiles)")
        }
        var total: UInt64 = 0
        for (key, file) in body.files {
            guard key == file.id, !file.id.isEmpty, file.id.utf8.count <= 128 else {
                throw HTTPFailure(400, "a file's id does not match its key")
            }
            if let max = inbox.maxSize, file.size > max {
                throw HTTPFailure(
                    413,
                    "\(file.fileName) is \(Format.bytes(file.size)); this device accepts at most \(Format.bytes(UInt64(max)))"
                )
            }
            let (sum, overflow) = total.addingReportingOverflow(file.size)
            guard !overflow else { throw HTTPFailure(400, "sizes that overflow") }
            total = sum
        }
        let alias = String(OutgoingItem.title(body.info.alias).prefix(64))
        // Who it is: the certificate's fingerprint when one was shown, else only what the body claims.
        let claimed = body.info.fingerprint.uppercased()
        let proved = caller.certificateFingerprint
        // Only a certificate proves a fingerprint; a claim (or nothing) names the offer and the folder.
        let digits = String(claimed.filter { $0.isHexDigit }.prefix(64))
        let who = proved ?? (digits.isEmpty ? "UNKNOWN" : digits)
        let trusted = proved.flatMap { LocalSendTrust.load(device.paths).device($0) }
        guard case .allowed = AccessPolicy.decide(.sendToInbox, stranger: .localSend, localName: device.name) else {
            throw HTTPFailure(403, "refused by the policy")
        }
        // A fingerprint no certificate proved is a claim: shown as one, and never sharing a folder with the device
        // that proved it (a stranger could claim a trusted phone's fingerprint and alias).
        let name = proved == nil ? alias + " (LocalSend, unproved)" : (trusted?.name ?? alias) + " (LocalSend)"
        if trusted?.asks == false {
            Self.log.info("an upload from a trusted LocalSend device", metadata: ["from": "\(name)"])
        } else {
            switch try waitForAnswer(
                body, name: name, fingerprint: who, proved: proved != nil, caller: caller, http: http)
            {
            case .proceed: break
            case .decline(let reason):
                Self.log.notice("declined a LocalSend upload", metadata: ["from": "\(name)", "reason": "\(reason)"])
                try http.writeResponse(403, close: true)
                return false
            case .hold:
                Self.log.notice(
                    "no answer in time to a LocalSend upload; it stays pending", metadata: ["from": "\(name)"])
                try http.writeResponse(403, close: true)
                return false
            }
        }
        // A message: LocalSend sends a text as one text/plain file with the text as its preview, and needs no upload.
        if body.files.count == 1, let file = body.files.values.first, file.fileType.hasPrefix("text/plain"),
            let text = file.preview, UInt64(text.utf8.count) == file.size
        {
            try inbox.history.append(TextHistory.Entry(date: Date(), from: name, type: "public.plain-text", text: text))
            Self.log.notice("received a text by LocalSend", metadata: ["from": "\(name)"])
            try http.writeResponse(204)
            return true
        }
        if let free = try? Directory.open(inbox.directory.path).freeSpace, free < total &+ (16 << 20) {
            throw HTTPFailure(
                507, "\(Format.bytes(total)) do not fit; \(Format.bytes(UInt64(free))) are free on this device")
        }
        let folderName =
            FileNamesOnDisk.sanitize(alias, fallback: "LocalSend device")
            + (proved == nil ? " (LocalSend unproved \(who.prefix(8)))" : " (LocalSend \(who.prefix(8)))")
        let folder = try Directory.open(inbox.directory.path).directory(folderName, create: true)
        let upload = Upload(
            id: SecureRandom.bytes(16).hexString, alias: name, fingerprint: who, host: caller.host,
            files: body.files, folder: folder)
        let admitted: Bool = state.withLock { state in
            state.sessions = state.sessions.filter { -$0.value.touched.timeIntervalSinceNow < 3600 }
            guard state.sessions.count < Self.maxSessions else { return false }
            state.sessions[upload.id] = upload
            return true
        }
        guard admitted else { throw HTTPFailure(409, "\(Self.maxSessions) uploads are under way; try again soon") }
        Self.log.notice(
            "a LocalSend upload begins",
            metadata: ["from": "\(name)", "files": "\(body.files.count)", "bytes": "\(total)"])
        try http.writeResponse(200, json: json(LocalSendUploadSession(sessionId: upload.id, files: upload.tokens)))
        return true
    }

    /// Three wrong PINs from one address lock it out for a minute (LocalSend's 429).
    private func checkPin(_ given: String?, _ pin: String, host: String) throws {
        // Asking without a PIN is how every LocalSend app learns that one is needed: no guess.
        guard let given else { throw HTTPFailure(401, "a PIN is required") }
        let now = Date()
        let right =
            Array(given.utf8).count == Array(pin.utf8).count
            && zip(given.utf8, pin.utf8).reduce(UInt8(0), { $0 | ($1.0 ^ $1.1) }) == 0
        // Checked and counted in one step: guesses arriving side by side cannot all pass the check before any of
        // them is counted.
        let failure: HTTPFailure? = state.withLock { state in
            if let until = state.pinLockedUntil, until > now {
                return HTTPFailure(
                    429,
                    "PIN locked after too many wrong PINs; try again in \(Int(until.timeIntervalSince(now).rounded(.up))) s"
                )
            }
            if let failures = state.pinFailures[host], now.timeIntervalSince(failures.since) > 60 {
                state.pinFailures[host] = nil
            }
            if (state.pinFailures[host]?.count ?? 0) >= 3 {
                return HTTPFailure(429, "too many wrong PINs from \(host)")
            }
            if right { return nil }
            let earlier = state.pinFailures[host] ?? (0, now)
            state.pinFailures[host] = (earlier.count + 1, earlier.since)
            if state.pinFailures.count > 4096 { state.pinFailures = state.pinFailures.filter { $0.key == host } }
            state.recentWrongPins = state.recentWrongPins.filter { now.timeIntervalSince($0) < 60 } + [now]
            if state.recentWrongPins.count >= Self.maxWrongPinsPerMinute {
                state.pinLockedUntil = now.addingTimeInterval(60)
                state.recentWrongPins = []
                Self.log.warning(
                    "LocalSend PIN locked for a minute", metadata: ["wrong PINs": "\(Self.maxWrongPinsPerMinute)"])
            }
            return HTTPFailure(401, "a wrong PIN")
        }
        if let failure { throw failure }
    }

    /// Records the upload as a pending offer and waits, while the sender stays connected, for the user's answer.
    private func waitForAnswer(
        _ body: LocalSendPrepareUpload, name: String, fingerprint: String, proved: Bool, caller: LocalSendCaller,
        http: HTTPConnection
    ) throws -> PendingOffers.Decision {
        let files = body.files.values.sorted { $0.fileName < $1.fileName }
        let key = Hex.string(
            SHA256Hasher().digest(
                Array(
                    (["localsend", fingerprint] + files.map { "\($0.fileName)\u{0}\($0.size)\u{0}\($0.sha256 ?? "")" })
                        .joined(separator: "\n").utf8)))
        let paths = device.paths
        let localName = device.name
        let trusted = proved && LocalSendTrust.load(paths).device(fingerprint) != nil
        let ask = { () throws -> PendingOffers.Decision in
            try PendingOffers.decide(
                key: key, from: "localsend:" + fingerprint, name: name, paths: paths, localName: localName,
                address: caller.host, trusted: trusted, count: files.count, announce: DesktopNotice.announce
            ) { _, _ in
                files.map { file in
                    let isText = file.fileType.hasPrefix("text/plain") && file.preview != nil
                    return PendingOffers.Item(
                        title: isText ? OutgoingItem.title(file.preview ?? "") : OutgoingItem.title(file.fileName),
                        label: file.fileName,
                        kind: isText
                            ? "text"
                            : PendingOffers.kind(
                                of: UTType(mimeType: file.fileType)?.identifier ?? "", label: file.fileName),
                        size: file.size, image: nil)
                }
            }
        }
        let deadline = Date().addingTimeInterval(settings.answerTimeout ?? 120)
        while true {
            let decision = try ask()
            guard case .hold = decision else { return decision }
            // The sender gave up (LocalSend's cancel closes the connection): the offer stays pending.
            if Syscalls.isReadable(http.tls.fileDescriptor) && !http.tls.hasBufferedData {
                // Abandoned: nobody will learn an answer, so the offer leaves the book at once.
                PendingOffers.forget(key: key, paths: paths)
                throw HTTPFailure(409, "the sender went away while the offer waited")
            }
            if Date() >= deadline { return decision }
            Threads.sleep(seconds: 0.2)
        }
    }

    // MARK: upload

    private func upload(_ head: HTTPHead, _ http: HTTPConnection, _ caller: LocalSendCaller, body: HTTPBody) throws
        -> Bool
    {
        guard let id = head.query["sessionId"], let fileID = head.query["fileId"], let token = head.query["token"]
        else {
            throw HTTPFailure(400, "an upload without sessionId, fileId and token")
        }
        let claimed: (Upload, LocalSendFile)? = state.withLock { state in
            guard let upload = state.sessions[id], upload.host == caller.host, let expected = upload.tokens[fileID],
                Self.same(expected, token), let file = upload.files[fileID]
            else { return nil }
            let taken = upload.progress.withLock { progress -> Bool in
                guard !progress.done.contains(fileID), !progress.busy.contains(fileID) else { return false }
                progress.busy.insert(fileID)
                progress.touched = Date()
                return true
            }
            return taken ? (upload, file) : nil
        }
        guard let (upload, file) = claimed else { throw HTTPFailure(403, "no such upload, or a wrong token") }
        defer { upload.progress.withLock { _ = $0.busy.remove(fileID) } }
        if let length = body.declaredLength, length != file.size {
            throw HTTPFailure(400, "\(file.fileName): \(length) bytes sent for \(file.size) announced")
        }
        let temporary =
            ".localsend-\(upload.id.prefix(12))-\(fileID.utf8.count <= 40 ? fileID.filter { $0.isLetter || $0.isNumber } : String(SHA256Hasher.hash(Array(fileID.utf8)).hexString.prefix(16))).part"
        let handle = try upload.folder.openFile(temporary, .create, mode: 0o600)
        var kept = false
        defer {
            handle.close()
            if !kept { _ = try? upload.folder.remove(temporary) }
        }
        let hasher = file.sha256 == nil ? nil : SHA256Hasher()
        var buffer = [UInt8](repeating: 0, count: 256 << 10)
        var offset: UInt64 = 0
        while offset < file.size {
            let want = Int(min(UInt64(buffer.count), file.size - offset))
            let n = try buffer.withUnsafeMutableBytes { raw in
                try body.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<want]))
            }
            guard n > 0 else { throw HTTPFailure(400, "\(file.fileName) ended after \(offset) of \(file.size) bytes") }
            try buffer.withUnsafeBytes { raw in
                let chunk = UnsafeRawBufferPointer(rebasing: raw[0..<n])
                hasher?.update(chunk)
                try handle.write(chunk, at: offset)
            }
            offset += UInt64(n)
        }
        // A chunked body must end where the announced size does: one more byte is a lie about the file.
        var probe: UInt8 = 0
        guard try withUnsafeMutableBytes(of: &probe, { try body.read(into: $0) }) == 0 else {
            throw HTTPFailure(400, "\(file.fileName): more bytes sent than the \(file.size) announced")
        }
        if let hasher, let expected = file.sha256, hasher.finalize().hexString != expected.lowercased() {
            throw HTTPFailure(422, "\(file.fileName) does not match its SHA-256")
        }
        let name = Self.storedName(file.fileName)
        let final = upload.folder.freeName(for: name)
        try upload.folder.rename(temporary, to: final, in: upload.folder)
        kept = true
        let finished: Bool = state.withLock { state in
            let all = upload.progress.withLock { progress in
                progress.done.insert(fileID)
                progress.stored.append(final)
                return progress.done.count == upload.files.count
            }
            if all { state.sessions[upload.id] = nil }
            return all
        }
        if finished {
            Self.log.notice(
                "received by LocalSend",
                metadata: [
                    "from": "\(upload.alias)", "files": "\(upload.done.count)", "folder": "\(upload.folder.path)",
                ])
        }
        try http.writeResponse(200)
        return true
    }

    /// The name a LocalSend file is kept under: the last part of the path it names (LocalSend sends a folder's files
    /// as `folder/name`), made safe.
    static func storedName(_ sent: String) -> String {
        let last = sent.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
        return FileNamesOnDisk.sanitize(last, fallback: "file")
    }

    static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        return x.count == y.count && zip(x, y).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    private func cancel(_ id: String, from host: String) {
        let removed: Upload? = state.withLock { state in
            guard let upload = state.sessions[id], upload.host == host else { return nil }
            state.sessions[id] = nil
            return upload
        }
        if let removed {
            Self.log.notice(
                "a LocalSend upload was cancelled by its sender",
                metadata: ["from": "\(removed.alias)", "received": "\(removed.done.count) of \(removed.files.count)"])
        }
    }

    /// Uploads accepted and not finished.
    package var openUploads: Int { state.withLock { $0.sessions.count } }
}
