import ShareThreads
import Synchronization
import FoundationEssentials
import CoreTransferable
import Glibc
import ShareNet
import ShareTrust
import ShareProtocol
import UniformTypeIdentifiers

/// A request to the local agent over its control socket: one JSON object per line, one request per connection.
/// On the socket it is `{"op": "send" | "status" | "wait" | "copy", …}`, as every version has written it.
package enum ControlRequest: Codable, Sendable {
    /// Queue a job in the outbox.
    case send(OutboxJob)
    /// The agent's state: jobs, peers, watches, clipboard.
    case status
    /// Wait until the job has ended (or `timeout` seconds pass).
    case wait(id: String, timeout: Double?)
    /// Publish a clipboard item.
    case copy(ClipboardItem)
    /// Carry the trust notices now (one was just added).
    case notices
    /// Cancel a queued or running job.
    case cancel(id: String)
    /// A program receives through the agent (`ShareClient.receive`): what peers send is negotiated with its accept
    /// list and handed to it, one `ProgramEvent` per line on this connection, for as long as it stays open.
    case receive(ProgramRegistration)
    /// A new address of the agent's page (`share web` while the agent serves it): its secret opens one session.
    case pageLink
    /// Shared folders: every folder and its state, and the folders other devices offer (`share sync`); with
    /// `settledWithin`, answered once every folder is up to date and in step with its devices, or when that many
    /// seconds have passed (`share sync --wait`).
    case folders(settledWithin: Double? = nil)
    /// Shares a folder (`share sync add`).
    case folderAdd(SharedFolderSettings)
    /// Accepts a folder another device offered, into `path` (nil: the default place).
    case folderAccept(
        id: String, path: String?, kind: SharedFolderSettings.Kind? = nil, keepVersions: Int? = nil,
        maxConflicts: Int? = nil)
    /// Declines a folder another device offered.
    case folderDecline(id: String)
    /// Stops sharing a folder here (its files stay).
    case folderRemove(id: String)
    /// Receive-only: brings the others' versions back over what was changed here.
    case folderRevert(id: String)
    /// Send-only: pushes this device's state again everywhere.
    case folderOverride(id: String)
    /// Scans the whole folder now and answers when the scan is done (its time in the folder's status).
    case folderRescan(id: String)
    /// Lets the deletions a scan held back (more than half the folder gone at once) go.
    case folderAllowDeletes(id: String)
    /// Pauses a folder here (nothing scanned, taken, sent or announced; its index kept), or resumes it.
    case folderPause(id: String, paused: Bool)
    /// Stops sharing a folder with some of its devices (names or IDs) here.
    case folderUnshare(id: String, devices: [String])
    /// Changes a folder's own settings here: its type, its label, how long versions are kept, how many conflict
    /// copies.
    case folderSet(
        id: String, kind: SharedFolderSettings.Kind?, label: String?, keepVersions: Int?, maxConflicts: Int?)
    /// The versions a folder keeps (of `path`, or beneath it, when given).
    case folderVersions(id: String, path: String?)
    /// Puts a kept version of `path` back: the newest, or the newest kept at or before `at`.
    case folderRestore(id: String, path: String, at: Date?)

    private enum Operation: String, Codable {
        case send, status, wait, copy, notices, cancel, receive, pageLink, folders, folderAdd, folderAccept
        case folderDecline, folderRemove, folderRevert, folderOverride, folderRescan, folderAllowDeletes
        case folderVersions, folderRestore, folderPause, folderUnshare, folderSet
    }

    private enum CodingKeys: String, CodingKey {
        case op, job, id, timeout, clipboard, program, folder, path, kind, at, keepVersions, paused, devices, label
        case maxConflicts
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        switch try container.decode(Operation.self, forKey: .op) {
        case .send: self = .send(try container.decode(OutboxJob.self, forKey: .job))
        case .status: self = .status
        case .wait:
            self = .wait(
                id: try container.decode(String.self, forKey: .id),
                timeout: try container.decodeIfPresent(Double.self, forKey: .timeout))
        case .copy: self = .copy(try container.decode(ClipboardItem.self, forKey: .clipboard))
        case .notices: self = .notices
        case .cancel: self = .cancel(id: try container.decode(String.self, forKey: .id))
        case .receive: self = .receive(try container.decode(ProgramRegistration.self, forKey: .program))
        case .pageLink: self = .pageLink
        case .folders: self = .folders(settledWithin: try container.decodeIfPresent(Double.self, forKey: .timeout))
        case .folderAdd: self = .folderAdd(try container.decode(SharedFolderSettings.self, forKey: .folder))
        case .folderAccept:
            self = .folderAccept(
                id: try container.decode(String.self, forKey: .id),
                path: try container.decodeIfPresent(String.self, forKey: .path),
                kind: try container.decodeIfPresent(SharedFolderSettings.Kind.self, forKey: .kind),
                keepVersions: try container.decodeIfPresent(Int.self, forKey: .keepVersions),
                maxConflicts: try container.decodeIfPresent(Int.self, forKey: .maxConflicts))
        case .folderDecline: self = .folderDecline(id: try container.decode(String.self, forKey: .id))
        case .folderRemove: self = .folderRemove(id: try container.decode(String.self, forKey: .id))
        case .folderRevert: self = .folderRevert(id: try container.decode(String.self, forKey: .id))
        case .folderOverride: self = .folderOverride(id: try container.decode(String.self, forKey: .id))
        case .folderRescan: self = .folderRescan(id: try container.decode(String.self, forKey: .id))
        case .folderAllowDeletes: self = .folderAllowDeletes(id: try container.decode(String.self, forKey: .id))
        case .folderPause:
            self = .folderPause(
                id: try container.decode(String.self, forKey: .id),
                paused: try container.decode(Bool.self, forKey: .paused))
        case .folderSet:
            self = .folderSet(
                id: try container.decode(String.self, forKey: .id),
                kind: try container.decodeIfPresent(SharedFolderSettings.Kind.self, forKey: .kind),
                label: try container.decodeIfPresent(String.self, forKey: .label),
                keepVersions: try container.decodeIfPresent(Int.self, forKey: .keepVersions),
                maxConflicts: try container.decodeIfPresent(Int.self, forKey: .maxConflicts))
        case .folderUnshare:
            self = .folderUnshare(
                id: try container.decode(String.self, forKey: .id),
                devices: try container.decode([String].self, forKey: .devices))
        case .folderVersions:
            self = .folderVersions(
                id: try container.decode(String.self, forKey: .id),
                path: try container.decodeIfPresent(String.self, forKey: .path))
        case .folderRestore:
            self = .folderRestore(
                id: try container.decode(String.self, forKey: .id),
                path: try container.decode(String.self, forKey: .path),
                at: try container.decodeIfPresent(Date.self, forKey: .at))
        }
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .send(let job):
            try container.encode(Operation.send, forKey: .op)
            try container.encode(job, forKey: .job)
        case .status:
            try container.encode(Operation.status, forKey: .op)
        case .wait(let id, let timeout):
            try container.encode(Operation.wait, forKey: .op)
            try container.encode(id, forKey: .id)
            try container.encodeIfPresent(timeout, forKey: .timeout)
        case .copy(let item):
            try container.encode(Operation.copy, forKey: .op)
            try container.encode(item, forKey: .clipboard)
        case .notices:
            try container.encode(Operation.notices, forKey: .op)
        case .cancel(let id):
            try container.encode(Operation.cancel, forKey: .op)
            try container.encode(id, forKey: .id)
        case .receive(let program):
            try container.encode(Operation.receive, forKey: .op)
            try container.encode(program, forKey: .program)
        case .pageLink:
            try container.encode(Operation.pageLink, forKey: .op)
        case .folders(let within):
            try container.encode(Operation.folders, forKey: .op)
            try container.encodeIfPresent(within, forKey: .timeout)
        case .folderAdd(let settings):
            try container.encode(Operation.folderAdd, forKey: .op)
            try container.encode(settings, forKey: .folder)
        case .folderAccept(let id, let path, let kind, let keepVersions, let maxConflicts):
            try container.encode(Operation.folderAccept, forKey: .op)
            try container.encodeIfPresent(maxConflicts, forKey: .maxConflicts)
            try container.encode(id, forKey: .id)
            try container.encodeIfPresent(path, forKey: .path)
            try container.encodeIfPresent(kind, forKey: .kind)
            try container.encodeIfPresent(keepVersions, forKey: .keepVersions)
        case .folderDecline(let id):
            try container.encode(Operation.folderDecline, forKey: .op)
            try container.encode(id, forKey: .id)
        case .folderRemove(let id):
            try container.encode(Operation.folderRemove, forKey: .op)
            try container.encode(id, forKey: .id)
        case .folderRevert(let id):
            try container.encode(Operation.folderRevert, forKey: .op)
            try container.encode(id, forKey: .id)
        case .folderOverride(let id):
            try container.encode(Operation.folderOverride, forKey: .op)
            try container.encode(id, forKey: .id)
        case .folderRescan(let id):
            try container.encode(Operation.folderRescan, forKey: .op)
            try container.encode(id, forKey: .id)
        case .folderAllowDeletes(let id):
            try container.encode(Operation.folderAllowDeletes, forKey: .op)
            try container.encode(id, forKey: .id)
        case .folderPause(let id, let paused):
            try container.encode(Operation.folderPause, forKey: .op)
            try container.encode(id, forKey: .id)
            try container.encode(paused, forKey: .paused)
        case .folderSet(let id, let kind, let label, let keepVersions, let maxConflicts):
            try container.encode(Operation.folderSet, forKey: .op)
            try container.encode(id, forKey: .id)
            try container.encodeIfPresent(kind, forKey: .kind)
            try container.encodeIfPresent(label, forKey: .label)
            try container.encodeIfPresent(keepVersions, forKey: .keepVersions)
            try container.encodeIfPresent(maxConflicts, forKey: .maxConflicts)
        case .folderUnshare(let id, let devices):
            try container.encode(Operation.folderUnshare, forKey: .op)
            try container.encode(id, forKey: .id)
            try container.encode(devices, forKey: .devices)
        case .folderVersions(let id, let path):
            try container.encode(Operation.folderVersions, forKey: .op)
            try container.encode(id, forKey: .id)
            try container.encodeIfPresent(path, forKey: .path)
        case .folderRestore(let id, let path, let at):
            try container.encode(Operation.folderRestore, forKey: .op)
            try container.encode(id, forKey: .id)
            try container.encode(path, forKey: .path)
            try container.encodeIfPresent(at, forKey: .at)
        }
    }
}

/// A program that receives through the agent: its name (shown by `share status`), its accept list, and the folder
/// the agent keeps its items in.
package struct ProgramRegistration: Codable, Sendable, Equatable {
    package var name: String
    package var accept: AcceptList
    package var directory: String

    package init(name: String, accept: AcceptList, directory: String) {
        self.name = name
        self.accept = accept
        self.directory = directory
    }
}

/// What the agent tells a registered program, one JSON object per line: an item kept for it, or one refused.
package struct ProgramEvent: Codable, Sendable {
    package var item: ReceivedItem?
    package var refused: RefusedItem?

    package init(item: ReceivedItem? = nil, refused: RefusedItem? = nil) {
        self.item = item
        self.refused = refused
    }
}

/// The open connection of a request that stays (a registered program): lines written from any thread, never
/// after the connection is gone.
package final class ControlStream: Sendable {
    private let fd: Int32
    /// Whether the connection is open; held while a line is written, so none is written after it is gone.
    private let open = Mutex(true)

    init(fd: Int32) { self.fd = fd }

    /// Writes one JSON line; false once the other side has gone.
    @discardableResult
    package func send<T: Encodable>(_ value: T) -> Bool {
        guard let data = try? JSONEncoder.iso8601.encode(value) else { return false }
        return open.withLock { open in
            guard open else { return false }
            do {
                try Syscalls.writeAll(fd, Array(data) + [0x0A])
                return true
            } catch {
                open = false
                Syscalls.shutdownSocket(fd)
                return false
            }
        }
    }

    /// Closes the connection (the other side sees its end); the server's thread then finishes.
    package func close() {
        open.withLock { open in
            if open { Syscalls.shutdownSocket(fd) }
            open = false
        }
    }

    package var isOpen: Bool { open.withLock { $0 } }

    fileprivate func ended() {
        open.withLock { $0 = false }
    }
}

package struct ControlResponse: Codable, Sendable {
    package var ok: Bool
    package var error: String?
    /// What kind of failure `error` is (the agent's `ShareFailure.Code`): the command exits with its status.
    package var code: ShareFailure.Code?
    package var job: OutboxJob?
    package var jobs: [OutboxJob]?
    package var name: String?
    package var id: String?
    package var port: Int?
    package var version: String?
    package var uptime: Double?
    package var clipboard: ClipboardItem?
    /// Trusted devices (name and address) and what discovery heard.
    package var trusted: [String]?
    package var discovered: [DiscoveredPeer]?
    /// The agent's watches: name, and whether attached now.
    package var watches: [String]?
    /// Beyond the LAN: the relay it is joined to and each discovery server's standing, one line each.
    package var reach: [String]?
    /// The program receiving through the agent, when one is.
    package var program: String?
    /// LocalSend, when on: its port, fingerprint, the devices seen and the uploads under way, in one line.
    package var localsend: String?
    /// The agent's inbox folder.
    package var inbox: String?
    /// A new address of the agent's page.
    package var link: String?
    /// Shared folders and their state, the folders offered, and the one a request made or changed.
    package var folders: [FolderStatus]?
    package var offers: [FolderOffer]?
    /// The offers declined on that device (taken after all with `share sync accept`).
    package var declinedOffers: [FolderOffer]?
    package var folder: SharedFolderSettings?
    /// The versions a folder keeps (newest first), or the one put back.
    package var versions: [FolderVersion]?

    package init(ok: Bool, error: String? = nil) {
        self.ok = ok
        self.error = error
    }

    package static func failure(_ message: String, code: ShareFailure.Code = .failure) -> ControlResponse {
        var response = ControlResponse(ok: false, error: message)
        response.code = code
        return response
    }

    /// A request's failure as the agent answers it: a `ShareFailure` keeps its code, anything else is a failure.
    package static func failure(_ error: any Error) -> ControlResponse {
        if let failure = error as? ShareFailure { return .failure(failure.message, code: failure.code) }
        return .failure("\(error)")
    }
}

/// The agent's control socket: a Unix socket in the state directory, mode 0600 inside a 0700 folder, and a peer
/// whose user ID differs from the agent's is turned away even if it could open the socket.
package final class ControlServer: AgentPart, Sendable {
    package let path: String
    private let acceptor: Acceptor
    private struct State {
        var stopped = false
        var answer: (@Sendable (ControlRequest, _ hungUp: @escaping @Sendable () -> Bool) -> ControlResponse)?
        var attach: (@Sendable (ProgramRegistration, ControlStream) -> ControlResponse)?
        var streams: [ObjectIdentifier: ControlStream] = [:]
    }
    private let state = Mutex(State())
    package let partName = "control socket"

    package init(path: String) throws {
        self.path = path
        do {
            // Requests are short; the connections that stay open are programs' streams and event watchers.
            acceptor = Acceptor(
                listening: try Syscalls.unixListen(path), port: 0, name: "control",
                limits: AcceptorLimits(total: 128, perAddress: 128, whenFull: .refuseNew, key: .address),
                family: .local)
        } catch let error as Syscalls.SocketError {
            throw ShareFailure(.configuration, "cannot open the control socket: \(error.message)")
        }
    }

    /// Answers each request (set before the server starts); `hungUp` tells whether the client went away (a request
    /// that waits stops waiting then).
    package var handler: (@Sendable (ControlRequest, _ hungUp: @escaping @Sendable () -> Bool) -> ControlResponse)? {
        get { state.withLock { $0.answer } }
        set { state.withLock { $0.answer = newValue } }
    }

    /// Answers a program's registration; when the answer is ok the connection stays open for the stream until the
    /// program closes it (set before the server starts).
    package var attachProgram: (@Sendable (ProgramRegistration, ControlStream) -> ControlResponse)? {
        get { state.withLock { $0.attach } }
        set { state.withLock { $0.attach = newValue } }
    }

    package func start(failed: @escaping @Sendable (Error) -> Void) {
        acceptor.start(stackSize: 1 << 20, handler: { [self] in serve($0.fd) }, failed: failed)
    }

    package func stop() {
        let streams = state.withLock { state -> [ControlStream]? in
            guard !state.stopped else { return nil }
            state.stopped = true
            return Array(state.streams.values)
        }
        guard let streams else { return }
        acceptor.stop(grace: 5, cut: { for stream in streams { stream.close() } })
        unlink(path)
    }

    private func serve(_ client: Int32) {
        defer { Syscalls.close(client) }
        Syscalls.setTimeouts(client, seconds: 30)
        var response: ControlResponse
        if Syscalls.peerUID(client) != geteuid() {
            response = .failure("the control socket serves only its owner")
        } else if let line = try? Syscalls.readLine(client),
            let request = try? JSONDecoder.iso8601.decode(ControlRequest.self, from: Data(line))
        {
            if case .receive(let registration) = request {
                serve(client, program: registration)
                return
            }
            switch request {
            case .wait, .folders(settledWithin: .some): Syscalls.setTimeouts(client, seconds: 0)
            default: break
            }
            response =
                handler?(request, { Syscalls.waitHangUp(client, timeout: 0) }) ?? .failure("the agent is starting")
        } else {
            response = .failure("not a control request")
        }
        if let data = try? JSONEncoder.iso8601.encode(response) {
            try? Syscalls.writeAll(client, Array(data) + [0x0A])
        }
    }
}

extension ControlServer {
    /// A program's connection: the answer, then (when it was ok) the stream until the program closes it or the
    /// server stops.
    private func serve(_ client: Int32, program: ProgramRegistration) {
        let stream = ControlStream(fd: client)
        let key = ObjectIdentifier(stream)
        let registered = state.withLock { state -> Bool in
            guard !state.stopped else { return false }
            state.streams[key] = stream
            return true
        }
        defer {
            stream.ended()
            state.withLock { $0.streams[key] = nil }
        }
        Syscalls.setTimeouts(client, seconds: 0)
        let response =
            registered
            ? (attachProgram?(program, stream) ?? .failure("the agent is starting")) : .failure("the agent is stopping")
        guard stream.send(response), response.ok else { return }
        // The program says nothing more; its end (or the server's stop) ends the stream.
        while stream.isOpen, (try? Syscalls.readLine(client)).flatMap({ $0 }) != nil {}
    }
}

/// A client's connection to the agent's control socket: one JSON request per line, one JSON answer per line, then
/// for a program's registration one event per line. The only place a client opens, writes or reads that socket.
package final class ControlConnection: Sendable {
    package let fd: Int32

    /// Connects to the control socket of the device at `paths`; a missing or foreign socket is `unavailable` (or
    /// `notTrusted`: the socket serves its owner only).
    package init(paths: DevicePaths) throws {
        let path = ControlClient.socketPath(paths)
        do {
            fd = try Syscalls.unixConnect(path)
        } catch let error as Syscalls.SocketError {
            if error.code == EACCES || error.code == EPERM {
                throw ShareFailure(
                    .notTrusted, "\(path): permission denied; the agent's control socket serves only its owner")
            }
            throw ShareFailure(
                .unavailable, "no agent is running for this device (\(error.message)); start one with: share agent")
        }
    }

    /// Reads and writes give up after `seconds` (0: never).
    package func setTimeout(_ seconds: Double) { Syscalls.setTimeouts(fd, seconds: seconds) }

    /// Sends `request` and reads the agent's answer (at most `limit` bytes); an answer that is not `ok` is a
    /// failure with the agent's words (`refused` maps them first, when given).
    package func ask(
        _ request: ControlRequest, limit: Int = 64 << 20, refused: (String) -> String = { $0 }
    ) throws -> ControlResponse {
        do {
            try Syscalls.writeAll(fd, Array(try JSONEncoder.iso8601.encode(request)) + [0x0A])
            guard let line = try Syscalls.readLine(fd, limit: limit) else {
                throw ShareFailure(.unavailable, "the agent closed the control socket without answering")
            }
            let response = try JSONDecoder.iso8601.decode(ControlResponse.self, from: Data(line))
            if !response.ok {
                throw ShareFailure(
                    response.code ?? .failure, refused(response.error ?? "the agent refused the request"))
            }
            return response
        } catch let error as ShareFailure {
            throw error
        } catch {
            throw ShareFailure(.unavailable, "the agent's control socket failed: \(error)")
        }
    }

    /// The next line the agent writes (an event), nil when it closed the socket.
    package func readLine(limit: Int = 1 << 20) throws -> [UInt8]? { try Syscalls.readLine(fd, limit: limit) }

    /// Ends both directions: a thread blocked reading returns.
    package func shutdown() { Syscalls.shutdownSocket(fd) }

    package func close() { Syscalls.close(fd) }
}

/// The CLI's side of the control socket.
package enum ControlClient {
    /// The control socket of the device at `paths`.
    package static func socketPath(_ paths: DevicePaths) -> String {
        paths.state.appendingPathComponent("agent.sock").path
    }

    /// Whether an agent is listening on the control socket.
    package static func agentIsRunning(_ paths: DevicePaths) -> Bool {
        guard let connection = try? ControlConnection(paths: paths) else { return false }
        connection.close()
        return true
    }

    /// Sends one request and returns the answer. A missing or foreign socket is `unavailable`.
    package static func request(_ request: ControlRequest, paths: DevicePaths) throws -> ControlResponse {
        let connection = try ControlConnection(paths: paths)
        defer { connection.close() }
        switch request {
        case .wait, .folderRescan: break  // as long as the agent takes (each bounded there)
        case .folders(settledWithin: let within?): connection.setTimeout(max(0, min(within, 86_400)) + 30)
        default: connection.setTimeout(30)
        }
        return try connection.ask(request)
    }
}
