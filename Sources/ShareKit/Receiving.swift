import ShareDisk
import Glibc
import ShareThreads
import Synchronization
import CoreTransferable
import FoundationEssentials
import ShareTrust
import ShareProtocol
import ShareNet
import UniformTypeIdentifiers
import ShareEngine

/// What a receiving program is asked about an offered file, to name an earlier version of it
/// (`ShareClient.ReceiveOptions.earlierVersion`).
public struct EarlierVersionQuery: Sendable {
    /// The name the file arrives under.
    public let fileName: String
    /// Its type, as the receiver chose it.
    public let contentType: UTType?
    /// Its size in bytes.
    public let size: UInt64
    /// The sending device, as this device knows it.
    public let from: String
}

extension ShareClient {
    /// How a program receives.
    public struct ReceiveOptions: Sendable {
        /// Who receives on the network for the program.
        public enum Mode: Sendable, Equatable {
            /// Through the running agent when there is one, else listening on `port` on every address.
            case automatic(port: Int = 0)
            /// Through the device's running agent (its discovery, its address and relays): the agent negotiates
            /// what its peers send with this program's types and hands the items over; fails when no agent runs.
            case agent
            /// This program listens itself, on `host` and `port` (0 picks a port; `IncomingItems.source` tells
            /// which). Peers send to it with `share send --to HOST:PORT` or a `ShareClient` naming that address.
            case listen(host: String = "::", port: Int = 0)
        }

        /// Who receives for the program (default: the agent when it runs, else the program itself on any port).
        public var mode: Mode = .automatic()
        /// Where items are kept. Nil: a private folder in the device's state folder, removed with what is left in
        /// it once neither the `IncomingItems` nor any of its items is held (load or move what you keep).
        public var directory: URL?
        /// Largest item accepted, in bytes; a larger one is refused before any byte moves.
        public var maxSize: UInt64?
        /// The name `share status` shows for this program while it receives through the agent.
        public var name: String = ProcessInfo.processInfo.processName
        /// Called for each item refused (nothing in common with the accepted types, too large); the sender is told
        /// the same reason.
        public var refused: (@Sendable (RefusedItem) -> Void)?
        /// What happens, as it happens, when this program listens itself (offers, choices, progress).
        public var events: (@Sendable (TransferEvent) -> Void)?
        /// An earlier version of an offered file that this program holds, when it listens itself (nil: none). The
        /// file then arrives as a delta against it — only what changed crosses — and the earlier file is only read,
        /// never changed. Called on the session's thread, before any byte of the item moves.
        public var earlierVersion: (@Sendable (EarlierVersionQuery) -> URL?)?

        /// The defaults: through the agent when one runs, a private folder, no size limit beyond the device's.
        public init() {}
    }

    /// Receives items as the types given, most wanted first: the accept list is every type's
    /// `importedContentTypes()` in that order, so each item arrives as the first of them the sender can produce
    /// (`[Recipe.self, String.self]`: a recipe where the sender offers one, else its text). Only trusted devices
    /// may send. Throws when none of the types imports anything, when the agent is asked for and does not run, or
    /// when the port cannot be opened.
    public func receive(accepting types: [any Transferable.Type], options: ReceiveOptions = ReceiveOptions()) throws
        -> IncomingItems
    {
        let accept = Self.acceptList(for: types, maxSize: options.maxSize)
        guard !accept.entries.isEmpty else {
            throw ShareFailure(
                .usage, "none of \(types.map { "\($0)" }.joined(separator: ", ")) declares an importing representation")
        }
        let made = options.directory == nil
        let directory =
            options.directory?.standardizedFileURL
            ?? device.paths.state.appendingPathComponent("incoming", isDirectory: true)
            .appendingPathComponent("\(getpid())-\(UUID().uuidString.prefix(8))", isDirectory: true)
        if made {
            try DevicePaths.ensurePrivateDirectory(directory.deletingLastPathComponent())
            Self.removeAbandoned(in: directory.deletingLastPathComponent())
        }
        let folder = ReceiveFolder(url: directory, owned: made)
        // The reception's threads may outlive the program's hold on the folder (they end after `stop()` returns);
        // they see it only while the items or the sequence keep it, so it goes as soon as the program lets go.
        let held = HeldFolder(folder)
        let (stream, continuation) = AsyncThrowingStream<IncomingItem, Error>.makeStream()
        let refused = options.refused
        let viaAgent: Bool
        switch options.mode {
        case .agent: viaAgent = true
        case .listen: viaAgent = false
        case .automatic: viaAgent = ControlClient.agentIsRunning(device.paths)
        }
        let ending: @Sendable () -> Void
        // Run once the reception has ended (its end may call `stop` again, which must not wait for itself).
        var finishing: @Sendable () -> Void = {}
        let source: IncomingItems.Source
        if viaAgent {
            let reception = try AgentReception(
                paths: device.paths,
                registration: ProgramRegistration(name: options.name, accept: accept, directory: directory.path)
            ) { event in
                if let item = event.item, let folder = held.folder {
                    continuation.yield(IncomingItem(item, folder: folder))
                }
                if let item = event.refused { refused?(item) }
            } ended: { error in
                continuation.finish(throwing: error)
            }
            ending = { reception.stop() }
            source = .agent
        } else {
            var receiving = ShareEngine.ReceiveOptions(directory: directory, accept: accept, maxSize: options.maxSize)
            receiving.folderMode = 0o700
            receiving.versions = try? Versions(directory: device.paths.versions)
            if let earlierVersion = options.earlierVersion {
                receiving.earlierVersion = { name, type, size, from in
                    earlierVersion(
                        EarlierVersionQuery(fileName: name, contentType: UTType(type), size: size, from: from))
                }
            }
            receiving.handOver = { item in
                if let folder = held.folder { continuation.yield(IncomingItem(item, folder: folder)) }
            }
            let (host, port): (String, Int)
            switch options.mode {
            case .listen(let h, let p): (host, port) = (h, p)
            case .automatic(let p): (host, port) = ("::", p)
            case .agent: (host, port) = ("::", 0)
            }
            let reception = try ListeningReception(
                device: device, host: host, port: port, options: receiving, events: options.events,
                refused: { item in refused?(item) })
            ending = { reception.stop() }
            finishing = { continuation.finish() }
            source = .listening(port: reception.port)
        }
        let stopping = Guarded((begun: false, ended: false))
        let finish = finishing
        let stop: @Sendable () -> Void = {
            // Every caller returns once the reception has ended (the first ends it): a program that leaves its loop
            // and exits does not cut a session still acknowledging the item it just handed over.
            let first = stopping.withLock { state in
                defer { state.begun = true }
                return !state.begun
            }
            guard first else {
                // (Through the agent, a second stop comes from the event thread itself as it ends, and the first
                // stop already waits for that thread.)
                if !viaAgent { stopping.wait(seconds: 30) { $0.ended } }
                return
            }
            ending()
            stopping.withLock { $0.ended = true }
            finish()
        }
        continuation.onTermination = { _ in stop() }
        return IncomingItems(source: source, folder: folder, stream: stream, stop: stop)
    }

    /// Folders of receives whose process has gone without removing them (named `PID-…`).
    static func removeAbandoned(in parent: URL) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: parent.path) else { return }
        for name in names {
            guard let pid = name.split(separator: "-").first.flatMap({ Int32($0) }), pid != getpid(),
                kill(pid, 0) != 0, errno == ESRCH
            else { continue }
            PathOperations.removeIfPresent(parent.appendingPathComponent(name).path)
        }
    }

    /// The accept list for `types`: their imported content types in order (each once), with declarations of the
    /// custom ones so a sender's types can be matched by conformance.
    static func acceptList(for types: [any Transferable.Type], maxSize: UInt64?) -> AcceptList {
        var seen: Set<String> = []
        var wanted: [UTType] = []
        for type in types {
            for contentType in type.importedContentTypes() where seen.insert(contentType.identifier).inserted {
                wanted.append(contentType)
            }
        }
        return AcceptList(
            wanted.map { AcceptedType($0, maxSize: maxSize) },
            declarations: OutgoingItem.customDeclarations(for: wanted))
    }
}

/// True the first time only.
final class Once: Sendable {
    private let done = Atomic(false)

    func first() -> Bool { !done.exchange(true, ordering: .acquiringAndReleasing) }
}

/// A program's registration with the running agent: the agent's answer, then one event per line until either side
/// ends it.
final class AgentReception: Sendable {
    private let connection: ControlConnection
    private struct State {
        var stopping = false
        var open = true
        var running = true
    }
    private let state = Guarded(State())
    /// The event thread's ID, so that `stop` called from it does not wait for itself.
    private let eventThread = Mutex<pthread_t?>(nil)

    init(
        paths: DevicePaths, registration: ProgramRegistration,
        event: @escaping @Sendable (ProgramEvent) -> Void, ended: @escaping @Sendable (Error?) -> Void
    ) throws {
        connection = try ControlConnection(paths: paths)
        connection.setTimeout(30)
        do {
            _ = try connection.ask(.receive(registration), limit: 1 << 20) { reason in
                reason == "not a control request"
                    ? "the running agent is older and cannot hand items to a program; restart it (share agent)"
                    : reason
            }
        } catch {
            connection.close()
            throw error
        }
        connection.setTimeout(0)
        Threads.start(name: "share-client-rx") { [self] in
            eventThread.withLock { $0 = pthread_self() }
            var failure: Error?
            do {
                while let line = try connection.readLine() {
                    if let decoded = try? JSONDecoder.iso8601.decode(ProgramEvent.self, from: Data(line)) {
                        event(decoded)
                    }
                }
                if !state.withLock({ $0.stopping }) {
                    failure = ShareFailure(.unavailable, "the agent stopped; start it again and receive again")
                }
            } catch {
                if !state.withLock({ $0.stopping }) {
                    failure = ShareFailure(.unavailable, "the agent's control socket failed: \(error)")
                }
            }
            state.withLock { state in
                connection.close()
                state.open = false
            }
            ended(failure)
            state.withLock { $0.running = false }
        }
    }

    /// Ends the registration: the agent forgets the program, and returns once the event thread has finished (so no
    /// item is handed over after it, and nothing of the reception still holds the program's folder), unless called
    /// from that thread.
    func stop() {
        state.withLock { state in
            if !state.stopping {
                state.stopping = true
                if state.open { connection.shutdown() }
            }
        }
        if let thread = eventThread.withLock({ $0 }), pthread_equal(thread, pthread_self()) != 0 { return }
        state.wait { !$0.running }
    }
}

/// A program listening itself: its own listener over the same identity and trust as the agent's, each trusted
/// sender's session received into the program's folder.
final class ListeningReception: Sendable {
    private let listener: Listener
    let port: Int

    init(
        device: LocalDevice, host: String, port: Int, options: ShareEngine.ReceiveOptions,
        events: (@Sendable (TransferEvent) -> Void)?, refused: @escaping @Sendable (RefusedItem) -> Void
    ) throws {
        let trust = try TrustCache(file: device.paths.trustFile)
        let hello = ReceiveSession.hello(name: device.name, accept: options.accept)
        let localName = device.name
        listener = try Listener(
            device: device, host: host, port: port, verifier: { trust.isTrusted($0) }, hello: { hello }
        ) { session in
            let entry = trust.store.device(session.peerID)
            let name = entry?.name ?? session.peerHello.name
            do {
                if case .refused(let reason) = AccessPolicy.decide(.sendToInbox, peer: entry, localName: localName) {
                    throw ProtocolError(.refused, reason)
                }
                guard let first = try PingClient.answerPings(session) else { return }
                guard first.type == .offer, session.peerHello.forwardTo == nil else {
                    throw ProtocolError(.refused, "\(localName) is a program that only receives items")
                }
                let receiver = try ReceiveSession(
                    options: options, progress: ProgressReporter(events: events))
                let report = try receiver.serve(session, peerName: name, peer: entry, first: first)
                for item in report.refused { refused(RefusedItem(label: item.label, from: name, reason: item.reason)) }
            } catch let error as ProtocolError {
                session.connection.fail(with: error)
            } catch {
                // The sender learns what went wrong from the session; the program keeps receiving.
            }
        }
        self.port = listener.port
        listener.start()
    }

    func stop() { listener.stop(grace: 1) }
}
