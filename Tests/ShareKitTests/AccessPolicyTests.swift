import CoreTransferable
import ShareTrust
import ShareTLS
import Testing

/// AccessPolicy as a table, without a network: every relation against every capability and every visibility, and the
/// relation rules that used to be decided elsewhere (who may be a watch, who is asked, whose rotation is followed,
/// who gets a notice, whose clipboard `share paste` reads).
@Suite struct AccessPolicyTests {
    enum Row: String, CaseIterable {
        case unknown, trusted, group, team, watch
    }

    static let me = DeviceID(bytes: Array(repeating: 1, count: 32))

    static func device(_ row: Row, id byte: UInt8 = 2) -> TrustedDevice? {
        let id = DeviceID(bytes: Array(repeating: byte, count: 32))
        switch row {
        case .unknown: return nil
        case .trusted: return TrustedDevice(id: id, name: "friend", relation: .trusted)
        case .group: return TrustedDevice(id: id, name: "colleague", relation: .group("lab"))
        case .team: return TrustedDevice(id: id, name: "laptop", relation: .team)
        case .watch: return TrustedDevice(id: id, name: "wrist", relation: .team, watch: true)
        }
    }

    /// Who may do what, with no forwarding target and no pairing window (docs/SECURITY.md's matrix).
    static let allowed: [Row: Set<Capability>] = [
        .unknown: [],
        .trusted: [.ping, .sendToInbox, .sendNotices],
        .group: [.ping, .sendToInbox, .sendNotices],
        .team: [
            .ping, .sendToInbox, .sendNotices, .revokeDevices, .pasteClipboard, .lookUpByName, .sendForwarded,
            .syncFolders,
        ],
        .watch: [
            .ping, .sendToInbox, .sendNotices, .revokeDevices, .pasteClipboard, .attachAsWatch, .lookUpByName,
            .sendForwarded,
        ],
    ]

    @Test(arguments: Row.allCases) func everyCapabilityOfARelation(_ row: Row) {
        for capability in Capability.allCases {
            let decision = AccessPolicy.decide(capability, peer: Self.device(row), localName: "desk")
            let expected = Self.allowed[row]!.contains(capability)
            #expect(decision.isAllowed == expected, "\(row) asking to \(capability.rawValue): \(decision)")
            if case .refused(let reason) = decision { #expect(reason.contains("desk"), "\(reason)") }
        }
    }

    /// Pairing is decided by the window alone, whoever asks.
    @Test(arguments: Row.allCases) func pairingOnlyInItsWindow(_ row: Row) {
        #expect(AccessPolicy.decide(.pair, peer: Self.device(row), pairingWindow: true).isAllowed)
        #expect(!AccessPolicy.decide(.pair, peer: Self.device(row), pairingWindow: false).isAllowed)
    }

    /// Forwarding: a team device (not a watch) to a watch; a watch to another of the owner's devices; nothing else.
    @Test func forwardingBetweenTheOwnersDevicesAndWatches() {
        let cases: [(Capability, Row, Row?, Bool)] = [
            (.forwardToWatch, .team, .watch, true),
            (.forwardToWatch, .team, .team, false),
            (.forwardToWatch, .team, nil, false),
            (.forwardToWatch, .watch, .watch, false),
            (.forwardToWatch, .trusted, .watch, false),
            (.forwardToWatch, .group, .watch, false),
            (.forwardFromWatch, .watch, .team, true),
            (.forwardFromWatch, .watch, .watch, false),
            (.forwardFromWatch, .watch, .trusted, false),
            (.forwardFromWatch, .team, .team, false),
            (.forwardFromWatch, .trusted, .team, false),
        ]
        for (capability, peer, target, expected) in cases {
            let decision = AccessPolicy.decide(
                capability, peer: Self.device(peer), target: target.flatMap { Self.device($0, id: 3) })
            #expect(decision.isAllowed == expected, "\(peer) \(capability.rawValue) to \(String(describing: target))")
            if !expected { #expect(decision == .refused(AccessPolicy.notForwarded("this device"))) }
        }
        // A watch may not forward to itself.
        let wrist = Self.device(.watch)
        #expect(!AccessPolicy.decide(.forwardFromWatch, peer: wrist, target: wrist).isAllowed)
    }

    @Test func strangers() {
        for capability in Capability.allCases {
            let mayDeliver = capability == .ping || capability == .sendToInbox
            #expect(AccessPolicy.decide(capability, stranger: .byCode).isAllowed == mayDeliver)
            #expect(AccessPolicy.decide(capability, stranger: .localSend).isAllowed == mayDeliver)
        }
        #expect(AccessPolicy.visibility(for: .byCode) == .trusted)
        #expect(AccessPolicy.visibility(for: .localSend) == .trusted)
        #expect(AccessPolicy.visibilityBeforeTheReceiverIsKnown == .trusted)
    }

    @Test func visibilityOfEachRelation() {
        let expected: [Row: PeerRelation] = [
            .unknown: .trusted, .trusted: .trusted, .group: .group("lab"), .team: .ownDevice, .watch: .ownDevice,
        ]
        for row in Row.allCases {
            #expect(AccessPolicy.visibility(for: Self.device(row)) == expected[row], "\(row)")
        }
    }

    @Test func relationRules() {
        #expect(AccessPolicy.mayBeWatch(.team))
        #expect(!AccessPolicy.mayBeWatch(.trusted))
        #expect(!AccessPolicy.mayBeWatch(.group("lab")))
        // A watch flag on a device that may not be one is dropped.
        #expect(TrustedDevice(id: Self.me, name: "x", relation: .trusted, watch: true).watch == false)
        #expect(AccessPolicy.asksByDefault(.trusted) && AccessPolicy.asksByDefault(.group("lab")))
        #expect(!AccessPolicy.asksByDefault(.team))
        #expect(Self.device(.team)!.asks == false)
        var told = Self.device(.team)!
        told.ask = true
        #expect(told.asks)
        #expect(AccessPolicy.followsRotation(of: Self.device(.team)!))
        #expect(!AccessPolicy.followsRotation(of: Self.device(.trusted)!))
        #expect(!AccessPolicy.followsRotation(of: Self.device(.group)!))
        #expect(AccessPolicy.receivesNotice(Self.device(.trusted)!, fromItsSubject: true))
        #expect(!AccessPolicy.receivesNotice(Self.device(.trusted)!, fromItsSubject: false))
        #expect(AccessPolicy.receivesNotice(Self.device(.team)!, fromItsSubject: false))
        let all = Row.allCases.compactMap { Self.device($0) }
        #expect(AccessPolicy.clipboardSources(all).map(\.name) == ["laptop", "wrist"])
    }
}
