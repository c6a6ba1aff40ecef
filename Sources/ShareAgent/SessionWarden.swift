import Synchronization
import ShareNet
import ShareProtocol
import ShareTLS
import ShareTrust
import ShareEngine

/// The sessions the agent serves, each with its device and what the policy let it in for. While any is open the
/// policy is asked again once a second: a session it now refuses — its device removed from the trust list, or no
/// longer counted among the owner's devices — ends at its next frame, the device told the policy's reason (what it
/// had received stays as its partial, for a resume if the device is trusted again); one still open two seconds later
/// (waiting on a quiet peer) is broken off. The policy decided at the session's start; this is the same policy
/// deciding again, not a second set of rules.
final class SessionWarden: AgentPart, Sendable {
    static let log = PeerRouter.log
    let partName = "session checks"
    private struct Served: Sendable {
        let peer: DeviceID
        let name: String
        let capability: Capability
        let connection: PeerConnection
    }
    /// A session told to end: its connection, when, and whether it was broken off since.
    private struct Cut: Sendable {
        let connection: PeerConnection
        let at: ContinuousClock.Instant
        var broken = false
    }
    private let served = Mutex<(open: [ObjectIdentifier: Served], cut: [ObjectIdentifier: Cut])>(([:], [:]))
    /// How long a session told to end has to end by itself before its connection is broken off.
    static let grace: Duration = .seconds(2)
    private let trust: TrustCache
    private let localName: String
    private let rounds = Mutex<RepeatingThread?>(nil)
    /// What else asks each second about devices this agent is connected to (its outbox's running job).
    private let outgoing = Mutex<[@Sendable (TrustStore) -> Void]>([])

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

    /// `check` is asked each second with the trust list as it is then (the outbox stops a job whose device is
    /// no longer trusted: the same list the policy reads).
    func alsoCheck(_ check: @escaping @Sendable (TrustStore) -> Void) {
        outgoing.withLock { $0.append(check) }
    }

    /// Whether `session` was cut here (its end is then this part's to say, not a failure of the connection's).
    func wasCut(_ session: Session) -> Bool {
        served.withLock { $0.cut[ObjectIdentifier(session.connection)] != nil }
    }

    func ended(_ session: Session) {
        let key = ObjectIdentifier(session.connection)
        served.withLock { served in
            served.open[key] = nil
            served.cut[key] = nil
        }
    }

    /// Asks the policy again about every open session; tells the ones it refuses to end, and breaks off those told
    /// more than `grace` ago that have not.
    private func checkAll() {
        let (open, late) = served.withLock { served in
            let now = ContinuousClock.now
            var late: [PeerConnection] = []
            for (key, cut) in served.cut where !cut.broken && now - cut.at > Self.grace {
                served.cut[key]?.broken = true
                late.append(cut.connection)
            }
            return (served.open, late)
        }
        for connection in late { connection.interrupt() }
        let checks = outgoing.withLock { $0 }
        guard !open.isEmpty || !checks.isEmpty else { return }
        let store = trust.store
        for check in checks { check(store) }
        for (key, session) in open {
            let decision = AccessPolicy.decide(
                session.capability, peer: store.device(session.peer), localName: localName)
            guard case .refused(let reason) = decision else { continue }
            // Taken off the list first: a session is cut (and said) once.
            let first = served.withLock { served in
                guard served.open.removeValue(forKey: key) != nil, served.cut[key] == nil else { return false }
                served.cut[key] = Cut(connection: session.connection, at: .now)
                return true
            }
            guard first else { continue }
            Self.log.notice(
                "session cut: the device may no longer do this",
                metadata: [
                    "peer": "\(session.name)",
                    "capability": "\(session.capability.rawValue)", "reason": "\(reason)",
                ])
            session.connection.stop(with: ProtocolError(.refused, reason))
        }
    }
}
