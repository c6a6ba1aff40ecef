import CoreTransferable
import ShareProtocol
import ShareTrust
import ShareEngine

/// Answers a paste from another device: what is copied here, offered with the representations that device may see.
struct ClipboardServer: Sendable {
    static let log = PeerRouter.log
    let device: LocalDevice

    /// Answers a paste: the item's representations for the peer are offered and only the one it chooses is
    /// produced.
    func serve(
        _ session: Session, peer: String, visibility: PeerRelation, request: ClipboardRequest
    ) throws {
        guard let item = ClipboardItem.load(device.paths) else {
            throw ProtocolError(.refused, "nothing is copied on \(device.name) (or the copy expired)")
        }
        let items: [OutgoingItem]
        do {
            items = try item.items(device: device, relation: visibility)
        } catch let error as ShareFailure {
            throw ProtocolError(.refused, "the copied item on \(device.name) is gone: \(error.message)")
        }
        if request.peek {
            let info = ClipboardInfo(
                copied: item.copied.timeIntervalSince1970, expires: item.expires.timeIntervalSince1970,
                labels: items.map(\.label), types: items.map { $0.representations.map(\.offered.contentType) })
            try Exchange.answerPeek(session.connection.channel, info)
            return
        }
        let sender = SendSession(device: device, progress: ProgressReporter())
        let report = try sender.serve(session, peerName: peer, items: items)
        Self.log.info("clipboard pasted", metadata: ["peer": "\(peer)", "items": "\(report.delivered.count)"])
    }
}
