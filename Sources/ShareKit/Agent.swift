import Foundation
import ShareProtocol
import ShareTLS

/// The long-running service of one device: a TLS listener serving trusted peers.
public final class Agent: @unchecked Sendable {  // immutable after init; the listener guards its own state
    public let device: LocalDevice
    public let trust: TrustCache
    public private(set) var listener: Listener!

    public init(device: LocalDevice, host: String, port: Int, timeouts: SessionTimeouts = SessionTimeouts()) throws {
        self.device = device
        trust = try TrustCache(file: device.paths.trustFile)
        let trust = trust
        let name = device.name
        listener = try Listener(
            device: device, host: host, port: port, verifier: { trust.isTrusted($0) },
            hello: { Hello(name: name, role: .agent) }, timeouts: timeouts
        ) { [weak self] session in
            self?.serve(session)
        }
    }

    public var port: Int { listener.port }

    public func start() { listener.start() }

    public func stop() { listener.stop() }

    private func serve(_ session: Session) {
        let peer = trust.store.device(session.peerID)?.name ?? session.peerID.short
        do {
            try PingClient.answer(session)
        } catch let error as TLSError where error.kind == .timeout {
            Log.line("session with \(peer) closed after being idle")
        } catch let error as ProtocolError {
            Log.line("session with \(peer) ended: \(error.message)")
            session.connection.fail(with: error)
        } catch {
            Log.line("session with \(peer) ended: \(error)")
        }
    }
}
