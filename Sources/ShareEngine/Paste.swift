import CoreTransferable
import FoundationEssentials
import ShareProtocol
import ShareTLS
import ShareTrust
import ShareReach
import UniformTypeIdentifiers

/// `share paste`: asks the owner's devices what they have copied (types only), picks the newest, and receives the
/// best representation of it for what this side accepts. Only then are bytes produced.
package enum PasteClient {
    /// The newest clipboard item among `candidates` (trusted as the owner's devices), with where it is.
    package static func newest(
        device: LocalDevice, candidates: [PeerTarget], trust: TrustStore, timeouts: SessionTimeouts,
        reach: ReachSettings = ReachSettings()
    ) -> (PeerTarget, ClipboardInfo)? {
        var best: (PeerTarget, ClipboardInfo)?
        for target in candidates {
            guard let info = try? peek(device: device, target: target, trust: trust, timeouts: timeouts, reach: reach)
            else {
                continue
            }
            if (info.copied ?? 0) > (best?.1.copied ?? -1) { best = (target, info) }
        }
        return best
    }

    /// What `target` has copied, without producing it.
    package static func peek(
        device: LocalDevice, target: PeerTarget, trust: TrustStore, timeouts: SessionTimeouts,
        reach: ReachSettings = ReachSettings()
    ) throws -> ClipboardInfo {
        let session = try Reach.connect(
            from: device, to: target, trust: trust, hello: Hello(name: device.name, role: .cli), timeouts: timeouts,
            settings: reach)
        defer { session.connection.close() }
        return try Exchange.peekClipboard(session.connection.channel)
    }

    /// Receives the clipboard item of `target` under `options` (its accept list decides the representation).
    package static func paste(
        device: LocalDevice, target: PeerTarget, trust: TrustStore, options: ReceiveOptions,
        progress: ProgressReporter, timeouts: SessionTimeouts, reach: ReachSettings = ReachSettings()
    ) throws -> ReceiveReport {
        let hello = ReceiveSession.hello(name: device.name, accept: options.accept)
        let session = try Reach.connect(
            from: device, to: target, trust: trust, hello: hello, timeouts: timeouts, settings: reach)
        defer { session.connection.close() }
        let name = trust.device(session.peerID)?.name ?? session.peerHello.name
        do {
            try Exchange.requestClipboard(session.connection.channel)
            let receiver = try ReceiveSession(options: options, progress: progress)
            return try receiver.serve(session, peerName: name, peer: trust.device(session.peerID))
        } catch {
            throw SessionErrors.describe(
                error, peer: "\(name) at \(session.connection.remoteAddress)", localID: device.id)
        }
    }
}
