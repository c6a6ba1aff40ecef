import Synchronization
import ShareNet
import ShareTLS
import ShareTrust
import ShareEngine

/// The sessions the agent serves, each with its device and what the policy let it in for. While any is open the
/// policy is asked again once a second: a session it now refuses — its device removed from
/// the trust list, or no longer counted among the owner's devices — is cut there and then, as a broken connection
/// (what it had received stays as its partial, for a resume if the device is trusted again). The policy decided at
/// the session's start; this is the same policy deciding again, not a second set of rules.
final class SessionWarden: AgentPart, Sendable {
    static let log = PeerRouter.log
    let partName = "session checks"
    private struct Served: Sendable {
        let peer: DeviceID
        let name: String
        let capability: Capability
        let connection: PeerConnection
    }
    private let served = Mutex<(open: [ObjectIdentifier: Served], cut: Set<ObjectIdentifier>)>(([:], []))
    private let trust: TrustCache
    private let localName: String
    private let rounds = Mutex<RepeatingThread?>(nil)

    init(trust: TrustCache, localName: String) {
        self.trust = trust
        self.localName = localName
        let thread = RepeatingThread(name: "share-sessions", interval: 1) { [weak self] in self?.checkAll() }
        rounds.withLock { $0 = thread }
    }

    /// Starts the checks; they end only when stopped, so there is nothing for `failed` to hear.
    package func start(failed: @escaping @Sendable (Error) -> Void) { rounds.withLock { $0 }?.start() }

    package func stop() { rounds.withLock { $0 }?.stop() }

    /// `session`, with the device this device knows as `name`, is served for `capability` (the policy allowed it a
    /// moment ago) until `ended`.
    func admitted(_ session: Session, name: String, for capability: Capability) {
        let entry = Served(peer: session.peerID, name: name, capability: capability, connection: session.connection)
        served.withLock { $0.open[ObjectIdentifier(session.connection)] = entry }
    }

    /// Whether `session` was cut here (its end is then this part's to say, not a failure of the connection's).
    func wasCut(_ session: Session) -> Bool {
        served.withLock { $0.cut.contains(ObjectIdentifier(session.connection)) }
    }

    func ended(_ session: Session) {
        let key = ObjectIdentifier(session.connection)
        served.withLock { served in
            served.open[key] = nil
            served.cut.remove(key)
        }
    }

    /// Asks the policy again about every open session; cuts the ones it refuses.
    private func checkAll() {
        let open = served.withLock { $0.open }
        guard !open.isEmpty else { return }
        let store = trust.store
        for (key, session) in open {
            let decision = AccessPolicy.decide(
                session.capability, peer: store.device(session.peer), localName: localName)
            guard case .refused(let reason) = decision else { continue }
            // Taken off the list first: a session is cut (and said) once.
            let first = served.withLock { served in
                served.open.removeValue(forKey: key) != nil && served.cut.insert(key).inserted
            }
            guard first else { continue }
            Self.log.notice(
                "session cut: the device may no longer do this",
                metadata: [
                    "peer": "\(session.name)",
                    "capability": "\(session.capability.rawValue)", "reason": "\(reason)",
                ])
            session.connection.interrupt()
        }
    }
}
