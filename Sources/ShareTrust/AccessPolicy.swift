import CoreTransferable
import ShareTLS

/// Everything another device may ask of this one.
public enum Capability: String, CaseIterable, Sendable {
    /// Reach this device and learn its name and version (`share ping`).
    case ping
    /// Deliver items: into the agent's inbox, or to a `share receive`.
    case sendToInbox = "send to the inbox"
    /// Read what this device copied (`share paste`).
    case pasteClipboard = "paste the clipboard"
    /// Keep a link open to this agent and receive what is sent to it (`share watch`).
    case attachAsWatch = "attach as a watch"
    /// Have this agent pass items on to one of its attached watches (`share send --via`).
    case forwardToWatch = "send to a watch through the agent"
    /// As an attached watch, have this agent pass items on to one of the owner's devices (`share watch send`).
    case forwardFromWatch = "send from a watch through the agent"
    /// Deliver items this device forwards on behalf of another (a watch), naming that origin.
    case sendForwarded = "deliver forwarded items"
    /// Name another device this agent knows (the target of a forwarding).
    case lookUpByName = "look a device up by name"
    /// Start a pairing: only on a pairing listener during its window.
    case pair
    /// Sign a revocation that the owner's other devices apply.
    case revokeDevices = "revoke devices"
    /// Deliver signed trust notices (each is then judged on its own signature).
    case sendNotices = "deliver trust notices"
    /// Share folders with this device (`share sync`, and `share mirror`, a send-only folder): offer folders,
    /// exchange indexes, pull files.
    case syncFolders = "share folders with this device"
}

/// Who is asking, when it is not a trusted device.
public enum Stranger: Sendable {
    /// A device met through a code (`share send --code` / `share receive CODE`): it proved it knows the code, and
    /// nothing more. It may deliver the items the user accepts in that one exchange, and nothing else.
    case byCode
    /// A LocalSend device (a phone, another computer running LocalSend): it speaks only LocalSend's upload, so it
    /// may deliver the files and texts its user sends, each offer accepted on this device unless its certificate's
    /// fingerprint is trusted without asking (`share trust add --localsend FINGERPRINT --no-ask`), and nothing else.
    case localSend
}

/// The one authority on "may this device do this?". Every capability is decided here from the device's trust
/// entry (its relation, and whether it was added as a watch), never anywhere else. A refusal never says whether a
/// named device exists.
public enum AccessPolicy {
    public enum Decision: Equatable, Sendable {
        case allowed
        case refused(String)

        public var isAllowed: Bool { self == .allowed }
    }

    /// What a stranger may do: one met by code may deliver the items its user accepts (the receiver asks, or was
    /// told `--yes`), and nothing else: no clipboard, no watch, no forwarding, no names, no trust change.
    public static func decide(_ capability: Capability, stranger: Stranger, localName: String = "this device")
        -> Decision
    {
        switch (stranger, capability) {
        case (.byCode, .sendToInbox), (.byCode, .ping):
            return .allowed
        case (.byCode, _):
            return .refused("a device met by code may only deliver the items \(localName)'s user accepts")
        case (.localSend, .sendToInbox), (.localSend, .ping):
            return .allowed
        case (.localSend, _):
            return .refused("a LocalSend device may only deliver files and texts to \(localName)'s inbox")
        }
    }

    /// Whether `peer` (nil: not trusted) may use `capability`; `target` is the device named by a forwarding, as
    /// this device knows it (nil when the name is unknown). `pairingWindow`: a pairing listener is open.
    public static func decide(
        _ capability: Capability, peer: TrustedDevice?, target: TrustedDevice? = nil, pairingWindow: Bool = false,
        localName: String = "this device"
    ) -> Decision {
        if capability == .pair {
            // Anyone may try while a pairing listener waits (the users compare codes); nobody elsewhere.
            return pairingWindow
                ? .allowed : .refused("\(localName) is not waiting to pair; run share pair on it first")
        }
        guard let peer else {
            return .refused("\(localName) does not know this device; pair with it first (share pair)")
        }
        let team = peer.relation == .team
        switch capability {
        case .ping, .sendToInbox, .sendNotices:
            return .allowed
        case .pair:
            return .allowed
        case .revokeDevices:
            return team ? .allowed : .refused("only the owner's devices may revoke a device on \(localName)")
        case .pasteClipboard:
            return team
                ? .allowed
                : .refused("\(localName) shares its clipboard only with its owner's devices (trust them with --team)")
        case .attachAsWatch:
            return team && peer.watch
                ? .allowed
                : .refused(
                    "\(localName) takes as watches only its owner's devices added as watches (share trust add ID --team --watch)"
                )
        case .lookUpByName:
            return team ? .allowed : .refused(notForwarded(localName))
        case .syncFolders:
            return team && !peer.watch
                ? .allowed
                : .refused(foldersOnlyWithOwner(localName) + " (trust this one with --team)")
        case .sendForwarded:
            return team
                ? .allowed
                : .refused("\(localName) takes items passed on for another device only from its owner's devices")
        case .forwardToWatch:
            guard team, !peer.watch, let target, target.relation == .team, target.watch else {
                return .refused(notForwarded(localName))
            }
            return .allowed
        case .forwardFromWatch:
            guard team, peer.watch, let target, target.relation == .team, !target.watch, target.id != peer.id else {
                return .refused(notForwarded(localName))
            }
            return .allowed
        }
    }

    /// Why a device is not shared folders with: the policy's refusal without its advice to the device asking (the
    /// owner of this device is told what to do instead).
    public static func foldersOnlyWithOwner(_ localName: String) -> String {
        "\(localName) shares folders only with its owner's devices"
    }

    /// The same sentence whatever the reason (an unknown name, a device that is not a watch, a sender that may not):
    /// a refusal never tells which devices exist.
    public static func notForwarded(_ localName: String) -> String {
        "\(localName) passes items on only between its owner's devices and their watches; this one was not passed on"
    }

    /// What a stranger may see of an item: what every trusted device may see, never more.
    public static func visibility(for stranger: Stranger) -> PeerRelation { .trusted }

    /// What may be seen of an item built before its receiver is known — an outbox job kept on disk, an item a watch
    /// hands its agent to pass on — : what every trusted device may see, never more (a representation only the
    /// owner's devices may see is never written down for a receiver that may not be one).
    public static let visibilityBeforeTheReceiverIsKnown: PeerRelation = .trusted

    /// Whether a device of `relation` may be added as a watch (attach to this agent and be sent to through it):
    /// only the owner's devices.
    public static func mayBeWatch(_ relation: TrustRelation) -> Bool { relation == .team }

    /// Whether offers from a device of `relation` wait for the user's answer when its entry does not say: yes for
    /// every device that is not one of the owner's (AirDrop's "Contacts Only" asks too; one's own devices go
    /// straight in).
    public static func asksByDefault(_ relation: TrustRelation) -> Bool { relation != .team }

    /// Whether this device follows `subject`'s signed key rotation on its own (keeps it trusted under its new key):
    /// only for the owner's devices; any other must be paired again.
    public static func followsRotation(of subject: TrustedDevice) -> Bool { subject.relation == .team }

    /// Whether `device` should be given a trust notice: a rotation the rotating device sends itself goes to every
    /// device it trusts; a revocation, or a rotation passed on, only to the owner's devices.
    public static func receivesNotice(_ device: TrustedDevice, fromItsSubject: Bool) -> Bool {
        fromItsSubject || device.relation == .team
    }

    /// The devices whose clipboard `share paste` reads when no device is named: those that would let this one read
    /// it, the owner's own.
    public static func clipboardSources(_ devices: [TrustedDevice]) -> [TrustedDevice] {
        devices.filter { decide(.pasteClipboard, peer: $0).isAllowed }
    }

    /// What a peer may see of an item: the visibility its relation reaches (`.team` for the owner's devices,
    /// `.group` for a named group, `.all` otherwise).
    public static func visibility(for peer: TrustedDevice?) -> PeerRelation {
        switch peer?.relation {
        case .team: return .ownDevice
        case .group(let name): return .group(name)
        case .trusted, nil: return .trusted
        }
    }
}
