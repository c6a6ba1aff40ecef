import ShareThreads
import Synchronization
import CoreTransferable
import FoundationEssentials
import Logging
import ShareProtocol
import ShareTLS
import ShareNet
import ShareTrust
import UniformTypeIdentifiers
import ShareEngine

/// The watches of an agent: devices that connect out to it (they open no port), say they are watches and what they
/// accept, and stay connected. The agent delivers their outbox jobs over that link, keeps it alive with a ping every
/// `keepalive` seconds, and remembers each watch's accept list (`STATE/watches.json`, 0600) to negotiate on its
/// behalf while it is away.
package final class WatchLinks: Sendable {
    static let log = Log.logger("share.watch")

    /// A watch the agent has seen: who it is and what it accepts.
    package struct Known: Codable, Sendable, Equatable {
        package var id: String
        package var name: String
        package var accept: AcceptList
        package var lastSeen: Date
    }

    /// One attached watch: its session, used by one thread at a time (the keepalive or a delivery).
    final class Link: Sendable {
        let session: Session
        /// Held by whoever uses the session (the keepalive or a delivery).
        let use = ThreadCondition()
        private let up = Atomic(true)

        init(session: Session) { self.session = session }

        var alive: Bool { up.load(ordering: .acquiring) }

        func drop() {
            up.store(false, ordering: .releasing)
            session.connection.interrupt()
        }
    }

    private let file: URL
    private let keepalive: Double
    private struct State {
        var known: [String: Known]
        var links: [DeviceID: Link] = [:]
        var stopping = false
    }
    private let state: Guarded<State>

    package init(stateDirectory: URL, keepalive: Double = 15) {
        file = stateDirectory.appendingPathComponent("watches.json")
        self.keepalive = keepalive
        let saved = FileManager.default.contents(atPath: file.path).flatMap {
            try? JSONDecoder.iso8601.decode([Known].self, from: $0)
        }
        // IDs written by earlier versions (other check characters) are keyed as this version prints them.
        let known = Dictionary(
            (saved ?? []).map { entry in
                var entry = entry
                entry.id = (try? DeviceID(parsing: entry.id))?.description ?? entry.id
                return (entry.id, entry)
            }, uniquingKeysWith: { _, last in last })
        state = Guarded(State(known: known))
    }

    /// The watch with this device ID, if it ever attached.
    package func watch(_ id: DeviceID) -> Known? {
        state.withLock { $0.known[id.description] }
    }

    /// Every watch ever attached, with whether it is attached now.
    package var all: [(watch: Known, attached: Bool)] {
        state.withLock { state in
            state.known.values.sorted { $0.name < $1.name }.map { watch in
                (watch, state.links.keys.contains { $0.description == watch.id })
            }
        }
    }

    /// Serves an attached watch on its session thread until the link drops or the agent stops. `attached` runs once
    /// the watch is registered (the outbox then tries the jobs waiting for it).
    func serve(_ session: Session, name: String, attached: @Sendable () -> Void) {
        guard let accept = session.peerHello.accept else { return }
        let link = Link(session: session)
        let registered = state.withLock { state -> Bool in
            if state.stopping { return false }
            state.links[session.peerID]?.drop()
            state.links[session.peerID] = link
            state.known[session.peerID.description] = Known(
                id: session.peerID.description, name: name, accept: accept, lastSeen: Date())
            save(state.known)
            return true
        }
        guard registered else { return }
        // The welcome: the watch counts itself attached when the agent speaks first.
        link.use.lock()
        let welcomed = Self.ping(link.session)
        link.use.unlock()
        guard welcomed else {
            link.drop()
            state.withLock { state in
                if state.links[session.peerID] === link { state.links[session.peerID] = nil }
            }
            return
        }
        Self.log.info("watch attached", metadata: ["watch": "\(name)", "from": "\(session.connection.remoteAddress)"])
        attached()
        defer {
            state.withLock { state in
                if state.links[session.peerID] === link { state.links[session.peerID] = nil }
                state.known[session.peerID.description]?.lastSeen = Date()
                save(state.known)
            }
        }
        var lastPing = Date()
        while true {
            // Wake every second: a watch that went away closes its socket, and that is noticed within a second
            // rather than at the next keepalive.
            if state.wait(seconds: 1, until: { $0.stopping || !link.alive }) { break }
            guard link.use.tryLock() else { continue }  // a delivery is using the link
            var lost = false
            // Between deliveries a watch sends nothing unasked: anything readable is its end of the connection.
            if session.connection.hasIncomingData {
                lost = true
            } else if Date().timeIntervalSince(lastPing) >= keepalive {
                lost = !Self.ping(link.session)
                lastPing = Date()
            }
            link.use.unlock()
            if lost {
                Self.log.info("watch link lost", metadata: ["watch": "\(name)"])
                link.drop()
                break
            }
        }
    }

    /// One keepalive round trip, within 10 s.
    private static func ping(_ session: Session) -> Bool {
        session.connection.setTimeout(10)
        defer { session.connection.setTimeout(0) }
        return (try? Exchange.ping(session.connection.channel)) != nil
    }

    /// Sends `items` to the attached watch `id` over its link: the watch negotiates with its own accept list, as any
    /// receiver does. Throws `unavailable` when it is not attached (the outbox tries again when it attaches).
    func deliver(
        to id: DeviceID, name: String, items: [OutgoingItem], device: LocalDevice,
        progress: @escaping @Sendable (TransferProgress) -> Void
    ) throws -> SendReport {
        let link = state.withLock { $0.links[id] }
        guard let link, link.alive else {
            throw ShareFailure(.unavailable, "\(name) is not attached; the items wait until it attaches")
        }
        link.use.lock()
        defer { link.use.unlock() }
        link.session.connection.setTimeout(60)
        defer { link.session.connection.setTimeout(0) }
        do {
            let sender = SendSession(device: device, progress: ProgressReporter(observer: progress))
            return try sender.serve(link.session, peerName: name, items: items)
        } catch {
            link.drop()
            state.withLock { _ in }  // wakes the link's keepalive loop
            throw SessionErrors.describe(error, peer: name, localID: device.id)
        }
    }

    /// Ends every link (the agent is stopping): each watch reconnects to the agent when it is back.
    package func stop() {
        state.withLock { state in
            state.stopping = true
            for link in state.links.values { link.drop() }
        }
    }

    private func save(_ known: [String: Known]) {
        guard let data = try? JSONEncoder.iso8601.encode(known.values.sorted { $0.name < $1.name }) else { return }
        try? AtomicFile.write(data, to: file, mode: 0o600, durable: false)
    }
}
