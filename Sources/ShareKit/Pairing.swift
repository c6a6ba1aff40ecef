import Foundation
import ShareProtocol
import ShareTLS

/// Pairing: two devices that do not trust each other yet connect, both show the same short code derived from both
/// certificates, and trust each other only when both users confirm. A device in the middle would present other
/// certificates to each side, so the two codes would differ.
public enum Pairing {
    /// An 8-digit code from both certificates (order-independent), shown as `1234 5678`.
    public static func verificationCode(_ a: [UInt8], _ b: [UInt8]) -> String {
        let (first, second) = a.lexicographicallyPrecedes(b) ? (a, b) : (b, a)
        var input: [UInt8] = Array("share-pairing-v1".utf8)
        input += first
        input += second
        let digest = SHA256Hasher.hash(input)
        let value = digest.prefix(5).reduce(UInt64(0)) { ($0 << 8) | UInt64($1) } % 100_000_000
        let digits = String(value).leftPadded(to: 8)
        return "\(digits.prefix(4)) \(digits.suffix(4))"
    }

    /// What the user is asked, and how they answer.
    public typealias Confirm = @Sendable (_ peerName: String, _ peerID: DeviceID, _ code: String) -> Bool

    public struct Options: Sendable {
        public var relation: TrustRelation = .trusted
        /// The other device is the owner's watch (with `.team`).
        public var watch = false
        /// The port this device's agent listens on, told to the peer so it can reach us later.
        public var agentPort: Int?
        /// How long to wait for the other side's decision.
        public var decisionTimeout: Double = 120
        public init() {}
    }

    public struct Outcome: Sendable {
        public let peer: TrustedDevice
        public let code: String
    }

    /// The side that connects.
    public static func connect(device: LocalDevice, to address: PeerAddress, options: Options, confirm: Confirm) throws
        -> Outcome
    {
        let session = try SessionOpener.connect(
            from: device, to: address, hello: Hello(name: device.name, role: .pair, listenPort: options.agentPort),
            verifier: { _ in true })
        defer { session.connection.close() }
        return try decide(session, device: device, peerHost: address.host, options: options, confirm: confirm)
    }

    /// The side that waits: accepts one pairing connection on `port` and returns the outcome.
    public static func listen(
        device: LocalDevice, host: String, port: Int, options: Options, timeout: Double,
        ready: (Int) -> Void, confirm: Confirm
    ) throws -> Outcome {
        Syscalls.ignoreSIGPIPE()
        let (fd, bound) = try Syscalls.listen(host: host, port: port)
        defer { Syscalls.close(fd) }
        ready(bound)
        let context = try TLSContext(identity: device.identity, role: .server, verifier: { _ in true })
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            guard let (client, peer) = try Syscalls.accept(fd, timeout: min(1, deadline.timeIntervalSinceNow)) else {
                continue
            }
            let session: Session
            do {
                session = try SessionOpener.accept(
                    fileDescriptor: client, remoteAddress: peer, context: context,
                    hello: Hello(name: device.name, role: .pair, listenPort: options.agentPort))
            } catch {
                Log.logger("share.pair").notice(
                    "pairing attempt failed", metadata: ["from": "\(peer)", "error": "\(error)"])
                continue
            }
            defer { session.connection.close() }
            guard session.peerHello.role == .pair else {
                session.connection.fail(with: ProtocolError(.refused, "this port is waiting for pairing only"))
                continue
            }
            let known = try? TrustStore.load(device.paths.trustFile).device(session.peerID)
            if case .refused(let reason) = AccessPolicy.decide(
                .pair, peer: known, pairingWindow: true, localName: device.name)
            {
                session.connection.fail(with: ProtocolError(.refused, reason))
                continue
            }
            let host = PeerAddress(parsing: peer)?.host ?? peer
            return try decide(session, device: device, peerHost: host, options: options, confirm: confirm)
        }
        throw ShareFailure(.unavailable, "no device came to pair within \(Int(timeout)) s")
    }

    private static func decide(
        _ session: Session, device: LocalDevice, peerHost: String, options: Options,
        confirm: Confirm
    ) throws -> Outcome {
        guard let peerDER = session.connection.peerCertificateDER else {
            throw ShareFailure(.protocolError, "the peer presented no certificate")
        }
        let code = verificationCode(try device.identity.certificate.derBytes(), peerDER)
        let mine = confirm(session.peerHello.name, session.peerID, code)
        let theirs: PairDecision
        do {
            try session.connection.send(.pairDecision, PairDecision(accept: mine))
            session.connection.setTimeout(options.decisionTimeout)
            theirs = try session.connection.receive(.pairDecision, as: PairDecision.self)
        } catch {
            throw SessionErrors.describe(error, peer: session.connection.remoteAddress, localID: device.id)
        }
        guard mine else { throw ShareFailure(.refused, "pairing declined here; nothing was trusted") }
        guard theirs.accept else { throw ShareFailure(.refused, "the other device declined; nothing was trusted") }
        let address = session.peerHello.listenPort.map { PeerAddress(host: peerHost, port: $0) }
        // Under the trust store's lock: two pairings at once never lose an entry.
        let trusted = try TrustStore.update(device.paths.trustFile) { store in
            let base = FileNamesOnDisk.sanitize(session.peerHello.name, fallback: "device")
            var name = base
            var suffix = 2
            while store.devices.contains(where: {
                $0.id != session.peerID && $0.name.caseInsensitiveCompare(name) == .orderedSame
            }) {
                name = "\(base) (\(suffix))"
                suffix += 1
            }
            let trusted = TrustedDevice(
                id: session.peerID, name: name, address: address, relation: options.relation, watch: options.watch)
            try store.add(trusted)
            return trusted
        }
        return Outcome(peer: trusted, code: code)
    }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
