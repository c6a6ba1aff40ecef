import ShareTrust
import Testing

/// The policy's answers for the devices that are not trusted share devices: one met by code, and a LocalSend
/// device. Each may deliver into the inbox (with the user's answer) and be pinged, and nothing else.
struct StrangerPolicyTests {
    @Test(arguments: [Stranger.byCode, Stranger.localSend])
    func aStrangerMayOnlyDeliver(_ stranger: Stranger) {
        for capability in Capability.allCases {
            let decision = AccessPolicy.decide(capability, stranger: stranger, localName: "desk")
            if capability == .sendToInbox || capability == .ping {
                #expect(decision.isAllowed, "\(capability)")
            } else {
                #expect(!decision.isAllowed, "\(stranger) may not \(capability.rawValue)")
                if case .refused(let reason) = decision { #expect(reason.contains("desk")) }
            }
        }
    }
}
