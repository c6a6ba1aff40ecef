import CoreTransferable
import Foundation
import ShareProtocol
import ShareTLS

/// What an agent receives and where it keeps it.
public struct AgentInbox: Sendable {
    /// Items land in `<directory>/<peer name>/`; text and URLs in `<directory>/history.jsonl`.
    public var directory: URL
    public var accept: AcceptList
    public var maxSize: UInt64?

    public init(directory: URL, accept: AcceptList = ReceiveOptions.everything, maxSize: UInt64? = nil) {
        self.directory = directory
        self.accept = accept
        self.maxSize = maxSize
    }

    public var history: TextHistory { TextHistory(file: directory.appendingPathComponent("history.jsonl")) }
}

/// The long-running service of one device: a TLS listener serving trusted peers — answering pings and receiving
/// what they send into the inbox, one session per peer at a time, several peers at once.
public final class Agent: @unchecked Sendable {  // `receiving` guarded by `lock`; the rest immutable after init
    public let device: LocalDevice
    public let trust: TrustCache
    public let inbox: AgentInbox
    public private(set) var listener: Listener!
    private let lock = NSLock()
    private var receiving: Set<DeviceID> = []

    public init(
        device: LocalDevice, host: String, port: Int, inbox: AgentInbox, timeouts: SessionTimeouts = SessionTimeouts()
    ) throws {
        self.device = device
        self.inbox = inbox
        trust = try TrustCache(file: device.paths.trustFile)
        do {
            try DevicePaths.ensurePrivateDirectory(inbox.directory)
        } catch {
            throw ShareError(.cannotCreate, "cannot use \(inbox.directory.path) as the inbox: \(error)")
        }
        let trust = trust
        let hello = ReceiveSession.hello(name: device.name, accept: inbox.accept)
        let agentHello = Hello(
            name: hello.name, role: .agent, accept: hello.accept, compression: hello.compression)
        listener = try Listener(
            device: device, host: host, port: port, verifier: { trust.isTrusted($0) },
            hello: { agentHello }, timeouts: timeouts
        ) { [weak self] session in
            self?.serve(session)
        }
    }

    public var port: Int { listener.port }

    public func start() { listener.start() }

    public func stop() { listener.stop() }

    private func serve(_ session: Session) {
        let peer = trust.store.device(session.peerID)?.name ?? session.peerID.short
        do {
            guard let first = try PingClient.answerPings(session) else { return }
            guard first.type == .offer else {
                throw ProtocolError(.badMessage, "unexpected \(first.type) at the start of a session")
            }
            try receive(session, peer: peer, first: first)
        } catch let error as TLSError where error.kind == .timeout {
            Log.line("session with \(peer) closed after being idle")
        } catch let error as ProtocolError {
            Log.line("session with \(peer) ended: \(error.message)")
            session.connection.fail(with: error)
        } catch {
            Log.line("session with \(peer) ended: \(error)")
        }
    }

    /// Receives one sending session into the peer's inbox folder.
    private func receive(_ session: Session, peer: String, first: Frame) throws {
        let claimed = lock.withLock { receiving.insert(session.peerID).inserted }
        guard claimed else {
            throw ProtocolError(.refused, "this agent is already receiving from \(peer); try again when it is done")
        }
        defer { _ = lock.withLock { receiving.remove(session.peerID) } }
        var options = ReceiveOptions(
            directory: inbox.directory.appendingPathComponent(FileNamesOnDisk.sanitize(peer, fallback: "peer")),
            accept: inbox.accept, maxSize: inbox.maxSize)
        options.catalogFile = device.paths.profilesFile
        options.mediaDirectory = device.paths.data
        options.history = inbox.history
        let receiver = try ReceiveSession(options: options, progress: ProgressReporter(mode: .quiet))
        let report = try receiver.serve(session, peerName: peer, first: first)
        let summary = [
            report.saved.isEmpty ? nil : "saved " + report.saved.map(\.lastPathComponent).joined(separator: ", "),
            report.printed.isEmpty ? nil : "\(report.printed.count) text item(s) kept",
            report.importedProfiles.isEmpty ? nil : "profiles " + report.importedProfiles.joined(separator: ", "),
            report.refused.isEmpty ? nil : "\(report.refused.count) refused",
        ].compactMap { $0 }
        Log.line("received from \(peer): \(summary.isEmpty ? "nothing" : summary.joined(separator: "; "))")
    }
}
