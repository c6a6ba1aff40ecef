import FoundationEssentials
import ShareProtocol
import ShareThreads
import ShareTLS
import ShareNet
import ShareTrust
import UniformTypeIdentifiers
import ShareEngine

/// Receives a trusted device's sending session into its inbox folder (or hands the items to the program receiving
/// through the agent), one receiving session per device at a time.
final class InboxReceiver: Sendable {
    static let log = PeerRouter.log
    let device: LocalDevice
    let inbox: AgentInbox
    let programs: RegisteredPrograms
    /// The connection of the session receiving from each device.
    private let receiving = Guarded([DeviceID: PeerConnection]())

    init(device: LocalDevice, inbox: AgentInbox, programs: RegisteredPrograms) {
        self.device = device
        self.inbox = inbox
        self.programs = programs
    }

    /// The inbox folder of a device: named by the name this device gave it when it trusted it, made safe.
    func inboxFolder(_ peer: String) -> URL {
        inbox.directory.appendingPathComponent(FileNamesOnDisk.sanitize(peer, fallback: "device"), isDirectory: true)
    }

    /// Receives one sending session into the peer's inbox folder. A device that connects again while its previous
    /// session is still open has lost that connection (it crashed, or the network dropped): the old session is
    /// interrupted (its partial kept) and this one takes over.
    func receive(_ session: Session, peer: String, entry: TrustedDevice?, first: Frame) throws {
        let old = receiving.withLock { $0[session.peerID] }
        old?.interrupt()
        let taken = receiving.withLock(when: { $0[session.peerID] == nil }, seconds: 10) { receiving, free in
            if free { receiving[session.peerID] = session.connection }
            return free
        }
        guard taken else {
            throw ProtocolError(.refused, "\(device.name) is still finishing a session with \(peer); try again")
        }
        defer { receiving.withLock { $0[session.peerID] = nil } }
        var options = ReceiveOptions(directory: inboxFolder(peer), accept: inbox.accept, maxSize: inbox.maxSize)
        options.folderMode = 0o700
        options.versions = try? Versions(directory: device.paths.versions)
        let program = programs.active
        if let program {
            // A program receives: its accept list decides, every item is kept in its folder and handed to it.
            options.directory = URL(fileURLWithPath: program.registration.directory, isDirectory: true)
            options.accept = program.registration.accept
            options.handOver = { item in program.deliver(item) }
        } else {
            options.catalogFile = device.paths.profilesFile
            options.mediaDirectory = device.paths.data
            options.history = inbox.history
        }
        if let entry, entry.asks {
            // The user answers first (share pending / accept / decline); the sender offers again to learn it.
            let (paths, localName, sender) = (device.paths, device.name, session.peerID)
            let address =
                PeerAddress(parsing: session.connection.remoteAddress)?.host ?? session.connection.remoteAddress
            options.gate = { offer, name in
                try PendingOffers.decide(
                    offer, from: sender, name: name, paths: paths, localName: localName, address: address,
                    announce: DesktopNotice.announce)
            }
        }
        let receiver = try ReceiveSession(options: options, progress: ProgressReporter())
        let report = try receiver.serve(session, peerName: peer, peer: entry, first: first)
        program?.refused(report.refused, from: peer)
        if let held = report.held {
            Self.log.info("offer held for an answer", metadata: ["peer": "\(peer)", "pending": "\(held.id)"])
            return
        }
        Self.log.info(
            "received",
            metadata: [
                "peer": "\(peer)", "saved": "\(report.saved.count)", "texts": "\(report.printed.count)",
                "profiles": "\(report.importedProfiles.count)", "refused": "\(report.refused.count)",
                "bytes": "\(report.bytesReceived)", "crossed": "\(report.bytesCrossed)",
                "fromCopy": "\(report.bytesFromCopy)", "shared": "\(report.bytesShared)",
            ])
    }
}
