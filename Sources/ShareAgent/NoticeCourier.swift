import ShareDisk
import Synchronization
import FoundationEssentials
import Logging
import ShareProtocol
import ShareTLS
import ShareNet
import ShareTrust
import ShareReach
import CoreTransferable
import UniformTypeIdentifiers
import ShareEngine

/// Carries the signed trust notices this device holds to every device that should have them, until each has: a
/// revocation to the owner's other devices, a key rotation to every device that trusted the old key (sent with the
/// old key, which they still trust). A device that was away gets them when it is next reached; a device that
/// receives a notice carries it on too, so the owner's devices converge even when the signer is away.
final class NoticeCourier: AgentPart, Sendable {
    static let log = Log.logger("share.trust")
    let partName = "trust notices"
    let device: LocalDevice
    let trust: TrustCache
    let interval: Double
    private let retryAfter = Mutex<[String: Date]>([:])
    private let rounds = Mutex<RepeatingThread?>(nil)

    let reach: ReachSettings

    init(device: LocalDevice, trust: TrustCache, reach: ReachSettings = ReachSettings(), interval: Double = 10) {
        self.reach = reach
        self.device = device
        self.trust = trust
        self.interval = interval
        let thread = RepeatingThread(name: "share-notices", interval: interval) { [weak self] in self?.deliverDue() }
        rounds.withLock { $0 = thread }
    }

    /// Starts the rounds. They end only when stopped; a device that cannot be reached is tried again later, so there
    /// is nothing for `failed` to hear.
    package func start(failed: @escaping @Sendable (Error) -> Void) { rounds.withLock { $0 }?.start() }

    package func stop() { rounds.withLock { $0 }?.stop() }

    /// Tries again now, and at once for `device` (it just connected: it may have been away).
    func wake(for device: DeviceID? = nil) {
        if let device { retryAfter.withLock { $0[device.description] = nil } }
        rounds.withLock { $0 }?.wake()
    }

    /// One round: every notice to every device that should have it and is due.
    func deliverDue() {
        let book = TrustNoticeBook.load(device.paths)
        guard !book.entries.isEmpty else { return }
        let store = trust.store
        let previous = device.previousIdentity
        var pendingOwnRotation = false
        for entry in book.entries {
            let ownRotation = entry.notice.kind == .rotate && entry.notice.subject == previous?.deviceID
            for target in Self.targets(of: entry, in: store, ownRotation: ownRotation) {
                let key = target.id.description
                if let after = retryAfter.withLock({ $0[key] }), after > Date() {
                    if ownRotation { pendingOwnRotation = true }
                    continue
                }
                let speaker = ownRotation ? previous.map(device.speaking(as:)) ?? device : device
                if deliver(entry.notice, to: target, as: speaker, trust: store) {
                    try? TrustNoticeBook.update(device.paths) {
                        $0.markDelivered(entry.notice.signature, to: target.id)
                    }
                } else {
                    // A device that is away is tried again a few rounds later (at most every 30 s).
                    retryAfter.withLock { $0[key] = Date().addingTimeInterval(min(30, 3 * interval)) }
                    if ownRotation { pendingOwnRotation = true }
                }
            }
        }
        // Once every device that trusted the old key has the rotation, the old key is no longer needed.
        if previous != nil, !pendingOwnRotation,
            book.entries.contains(where: { $0.notice.kind == .rotate && $0.notice.subject == previous?.deviceID })
        {
            PathOperations.removeIfPresent(device.rotatedFolder.path)
            Self.log.info("every device has the new key; the old one is deleted")
        }
    }

    /// Who should get a notice and does not have it yet: for a revocation, the owner's devices; for a rotation sent
    /// by the rotating device itself, every device it trusts; for a rotation this device carries on, the owner's
    /// devices.
    static func targets(of entry: TrustNoticeBook.Entry, in store: TrustStore, ownRotation: Bool) -> [TrustedDevice] {
        let issuer = try? entry.notice.verifiedIssuer()
        return store.devices.filter { device in
            guard device.id != entry.notice.subject, device.id != issuer, device.id != entry.notice.replacementID,
                !entry.deliveredTo.contains(device.id.description)
            else { return false }
            return AccessPolicy.receivesNotice(device, fromItsSubject: ownRotation)
        }
    }

    /// One delivery; true when the target has the notice.
    private func deliver(_ notice: TrustNotice, to target: TrustedDevice, as speaker: LocalDevice, trust: TrustStore)
        -> Bool
    {
        do {
            let address = try PeerTarget.resolve(
                target.id.description, device: device, trust: trust, beyondLAN: !reach.isEmpty)
            let session = try Reach.connect(
                from: speaker, to: address, trust: trust, hello: Hello(name: speaker.name, role: .agent),
                timeouts: SessionTimeouts(connect: 3, handshake: 5, idle: 10), settings: reach)
            defer { session.connection.close() }
            try Exchange.deliverNotices(session.connection.channel, [notice])
            Self.log.info("trust notice delivered", metadata: ["kind": "\(notice.kind)", "to": "\(target.name)"])
            return true
        } catch {
            Self.log.debug("trust notice not delivered yet", metadata: ["to": "\(target.name)", "reason": "\(error)"])
            return false
        }
    }

    /// Takes notices a peer delivered: each is checked on its own signature, applied as the policy allows, and kept
    /// to be carried on. Returns how many were new.
    static func take(_ notices: [TrustNotice], from peer: DeviceID, paths: DevicePaths) throws -> Int {
        var taken = 0
        for notice in notices.prefix(64) {
            let issuer = try notice.verifiedIssuer()
            let effect = try TrustStore.update(paths.trustFile) { try $0.apply(notice, issuer: issuer) }
            let new = try TrustNoticeBook.update(paths) {
                $0.add(notice, deliveredTo: [peer.description, issuer.description])
            }
            if new { taken += 1 }
            switch effect {
            case .revoked(let name):
                log.notice("revoked by the owner's device", metadata: ["device": "\(name)"])
                PendingOffers.forget(from: notice.subject, paths: paths)
            case .rotated(let name, let id):
                log.notice("new key of an owner's device", metadata: ["device": "\(name)", "id": "\(id)"])
            case .mustPairAgain(let name):
                log.warning(
                    "a device changed its key and must pair again (share pair)", metadata: ["device": "\(name)"])
            case .nothing:
                break
            }
        }
        return taken
    }
}
