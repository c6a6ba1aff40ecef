import CoreTransferable
import Foundation
import Logging
import ShareProtocol
import ShareTLS
import ShareNet

/// The watches of an agent: devices that connect out to it (they open no port), say they are watches and what they
/// accept, and stay connected. The agent delivers their outbox jobs over that link, keeps it alive with a ping every
/// `keepalive` seconds, and remembers each watch's accept list (`STATE/watches.json`, 0600) to negotiate on its
/// behalf while it is away.
package final class WatchLinks: @unchecked Sendable {  // all state guarded by `condition`
    static let log = Log.logger("share.watch")

    /// A watch the agent has seen: who it is and what it accepts.
    package struct Known: Codable, Sendable, Equatable {
        package var id: String
        package var name: String
        package var accept: AcceptList
        package var lastSeen: Date
    }

    /// One attached watch: its session, used by one thread at a time (the keepalive or a delivery).
    final class Link: @unchecked Sendable {  // `session` is used only under `use`
        let session: Session
        let use = NSLock()
        var alive = true

        init(session: Session) { self.session = session }

        func drop() {
            alive = false
            session.connection.interrupt()
        }
    }

    private let file: URL
    private let keepalive: Double
    private let condition = NSCondition()
    private var known: [String: Known]
    private var links: [DeviceID: Link] = [:]
    private var stopping = false

    package init(stateDirectory: URL, keepalive: Double = 15) {
        file = stateDirectory.appendingPathComponent("watches.json")
        self.keepalive = keepalive
        let saved = FileManager.default.contents(atPath: file.path).flatMap {
            try? JSONDecoder.iso8601.decode([Known].self, from: $0)
        }
        // IDs written by earlier versions (other check characters) are keyed as this version prints them.
        known = Dictionary(
            (saved ?? []).map { entry in
                var entry = entry
                entry.id = (try? DeviceID(parsing: entry.id))?.description ?? entry.id
                return (entry.id, entry)
            }, uniquingKeysWith: { _, last in last })
    }

    /// The watch with this device ID, if it ever attached.
    package func watch(_ id: DeviceID) -> Known? {
        condition.lock()
        defer { condition.unlock() }
        return known[id.description]
    }

    /// Every watch ever attached, with whether it is attached now.
    package var all: [(watch: Known, attached: Bool)] {
        condition.lock()
        defer { condition.unlock() }
        return known.values.sorted { $0.name < $1.name }.map { watch in
            (watch, links.keys.contains { $0.description == watch.id })
        }
    }

    /// Serves an attached watch on its session thread until the link drops or the agent stops. `attached` runs once
    /// the watch is registered (the outbox then tries the jobs waiting for it).
    func serve(_ session: Session, name: String, attached: @Sendable () -> Void) {
        guard let accept = session.peerHello.accept else { return }
        let link = Link(session: session)
        condition.lock()
        if stopping {
            condition.unlock()
            return
        }
        links[session.peerID]?.drop()
        links[session.peerID] = link
        known[session.peerID.description] = Known(
            id: session.peerID.description, name: name, accept: accept, lastSeen: Date())
        save()
        condition.unlock()
        // The welcome: the watch counts itself attached when the agent speaks first.
        link.use.lock()
        let welcomed = Self.ping(link.session)
        link.use.unlock()
        guard welcomed else {
            link.drop()
            condition.withLock {
                if links[session.peerID] === link { links[session.peerID] = nil }
            }
            return
        }
        Self.log.info("watch attached", metadata: ["watch": "\(name)", "from": "\(session.connection.remoteAddress)"])
        attached()
        defer {
            condition.lock()
            if links[session.peerID] === link { links[session.peerID] = nil }
            known[session.peerID.description]?.lastSeen = Date()
            save()
            condition.broadcast()
            condition.unlock()
        }
        var lastPing = Date()
        while true {
            // Wake every second: a watch that went away closes its socket, and that is noticed within a second
            // rather than at the next keepalive.
            condition.lock()
            let wake = Date().addingTimeInterval(1)
            while !stopping && link.alive && Date() < wake { _ = condition.wait(until: wake) }
            let stop = stopping || !link.alive
            condition.unlock()
            if stop { break }
            guard link.use.try() else { continue }  // a delivery is using the link
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
        let nonce = UInt64.random(in: 0...UInt64.max)
        session.connection.setTimeout(10)
        defer { session.connection.setTimeout(0) }
        do {
            try session.connection.send(.ping, Ping(nonce: nonce))
            return try session.connection.receive(.pong, as: Ping.self).nonce == nonce
        } catch {
            return false
        }
    }

    /// Sends `items` to the attached watch `id` over its link: the watch negotiates with its own accept list, as any
    /// receiver does. Throws `unavailable` when it is not attached (the outbox tries again when it attaches).
    func deliver(
        to id: DeviceID, name: String, items: [OutgoingItem], device: LocalDevice,
        progress: @escaping @Sendable (TransferProgress) -> Void
    ) throws -> SendReport {
        condition.lock()
        let link = links[id]
        condition.unlock()
        guard let link, link.alive else {
            throw ShareFailure(.unavailable, "\(name) is not attached; the items wait until it attaches")
        }
        link.use.lock()
        defer { link.use.unlock() }
        link.session.connection.setTimeout(60)
        defer { link.session.connection.setTimeout(0) }
        do {
            let sender = SendSession(device: device, progress: ProgressReporter(mode: .quiet, observer: progress))
            return try sender.serve(link.session, peerName: name, items: items)
        } catch {
            link.drop()
            condition.lock()
            condition.broadcast()
            condition.unlock()
            throw SessionErrors.describe(error, peer: name, localID: device.id)
        }
    }

    /// Ends every link (the agent is stopping): each watch reconnects to the agent when it is back.
    package func stop() {
        condition.lock()
        stopping = true
        for link in links.values { link.drop() }
        condition.broadcast()
        condition.unlock()
    }

    private func save() {
        guard let data = try? JSONEncoder.iso8601.encode(known.values.sorted { $0.name < $1.name }) else { return }
        try? AtomicFile.write(data, to: file, mode: 0o600, durable: false)
    }
}
