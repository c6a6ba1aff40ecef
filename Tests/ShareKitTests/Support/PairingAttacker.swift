import Foundation
import ShareKit
import ShareTrust
import ShareProtocol
import ShareTLS
import ShareNet
import ShareReach
import ShareEngine
import ShareAgent

/// A man in the middle of a pairing, over the project's own TLS: he accepts the laptop's connection as if he were the
/// desk and connects to the desk as if he were the laptop, each side with a certificate of his own, and runs the
/// pairing exchange with both. He is adaptive: he finishes with the desk first (so he knows the desk's code) and only
/// then commits toward the laptop, grinding his nonce and certificate against every laptop nonce he can guess.
/// Afterwards he passes each side's decision to the other.
final class PairingAttacker: @unchecked Sendable {  // `outcome` guarded by `lock`
    /// How he breaks the rules, for the tests of each check.
    enum Move: Sendable {
        /// Plays the protocol (and can only hope the codes agree).
        case honestMiddle
        /// Reveals his nonce toward the desk before committing to it.
        case revealBeforeCommit
        /// Reveals another nonce than the one he committed to.
        case wrongReveal
        /// Presents a certificate whose signature does not verify.
        case badCertificate
    }

    let port: Int
    private let listener: Int32
    private let deskPort: Int
    private let move: Move
    private let digits: Int
    private let towardLaptop: TLSIdentity
    private let towardDesk: TLSIdentity
    private let lock = NSLock()
    private var codes: (laptop: String?, desk: String?) = (nil, nil)
    private let done = DispatchSemaphore(value: 0)

    init(deskPort: Int, move: Move = .honestMiddle, digits: Int = 8) throws {
        self.deskPort = deskPort
        self.move = move
        self.digits = digits
        towardLaptop = try TLSIdentity.generate(commonName: "share")
        towardDesk = move == .badCertificate ? try Self.badlySigned() : try TLSIdentity.generate(commonName: "share")
        (listener, port) = try Syscalls.listen(host: "127.0.0.1", port: 0)
        Thread { [self] in
            run()
            done.signal()
        }.start()
    }

    deinit { Syscalls.close(listener) }

    /// The codes each side would show, once the attempt is over.
    func finish(timeout: Double = 30) -> (laptop: String?, desk: String?) {
        _ = done.wait(timeout: .now() + timeout)
        return lock.withLock { codes }
    }

    /// An identity whose certificate's own signature is broken (its last byte flipped): TLS still proves the key.
    static func badlySigned() throws -> TLSIdentity {
        let good = try TLSIdentity.generate(commonName: "share")
        var der = try good.certificate.derBytes()
        der[der.count - 1] ^= 0x01
        return try TLSIdentity(key: good.key, certificate: try Certificate(der: der))
    }

    private func run() {
        do {
            guard let (fd, peer) = try Syscalls.accept(listener, timeout: 30) else { return }
            let laptopSession = try SessionOpener.accept(
                fileDescriptor: fd, remoteAddress: peer,
                context: try TLSContext(identity: towardLaptop, role: .server, verifier: { _ in true }),
                hello: Hello(name: "desk", role: .pair, listenPort: 7001))
            defer { laptopSession.connection.close() }
            let deskSession = try connectToDesk()
            defer { deskSession.connection.close() }
            let deskCode = try exchange(deskSession, role: .initiator, identity: towardDesk, misbehave: true)
            lock.withLock { codes.desk = deskCode }
            let laptopCode = try exchange(laptopSession, role: .responder, identity: towardLaptop, misbehave: false)
            lock.withLock { codes.laptop = laptopCode }
            // Each side's decision goes to the other: the attack wins only if both users saw the same code.
            let fromLaptop = try laptopSession.connection.receive()
            let fromDesk = try deskSession.connection.receive()
            try? deskSession.connection.send(fromLaptop)
            try? laptopSession.connection.send(fromDesk)
        } catch {}
    }

    private func connectToDesk() throws -> Session {
        let device = LocalDevice.attacker(identity: towardDesk)
        return try SessionOpener.connect(
            from: device, to: PeerAddress(host: "127.0.0.1", port: deskPort),
            hello: Hello(name: "laptop", role: .pair, listenPort: 7002), verifier: { _ in true })
    }

    /// Commit and reveal with one side; returns the code that side shows.
    private func exchange(_ session: Session, role: PairingMachine.Role, identity: TLSIdentity, misbehave: Bool)
        throws -> String?
    {
        let hasher = SHA256Hasher()
        let own = try identity.certificate.derBytes()
        guard let peer = session.connection.peerCertificateDER else { return nil }
        var machine = PairingMachine(
            role: role, ownCertificate: own, peerCertificate: peer, nonce: SecureRandom.bytes(32),
            exporter: try session.connection.exportKeyingMaterial(label: "EXPORTER-share-pairing"), digits: digits)
        if misbehave, move == .revealBeforeCommit {
            try session.connection.send(.pairReveal, PairReveal(nonce: Hex.string(SecureRandom.bytes(32))))
            _ = try? session.connection.receive()
            return nil
        }
        try session.connection.send(.pairCommit, machine.commitment(using: hasher))
        let theirCommit = try session.connection.receive(.pairCommit, as: PairCommit.self)
        var reveal = try machine.received(theirCommit)
        if misbehave, move == .wrongReveal { reveal = PairReveal(nonce: Hex.string(SecureRandom.bytes(32))) }
        try session.connection.send(.pairReveal, reveal)
        let theirReveal = try session.connection.receive(.pairReveal, as: PairReveal.self)
        return try? machine.received(theirReveal, using: hasher)
    }
}

extension LocalDevice {
    /// A device of the attacker's: only an identity, in a folder of its own.
    static func attacker(identity: TLSIdentity) -> LocalDevice {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("share-attacker")
        let paths = DevicePaths(config: folder, data: folder, state: folder)
        return (try? LocalDevice.loadOrCreate(paths: paths))?.speaking(as: identity)
            ?? { fatalError("cannot make the attacker's device folder") }()
    }
}
