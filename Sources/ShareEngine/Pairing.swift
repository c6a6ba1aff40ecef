import FoundationEssentials
import ShareThreads
import Logging
import ShareProtocol
import ShareTLS
import Synchronization
import ShareNet
import ShareTrust
import CoreTransferable
import UniformTypeIdentifiers

/// Pairing: two devices that do not trust each other yet connect over TLS, check each other's certificate, commit to
/// fresh nonces and reveal them (`PairingMachine`), and both show the same code derived from both certificates, both
/// nonces and the session's TLS exporter. They trust each other only when both users confirm. A device in the middle
/// gets one guess per attempt (10^-8 with 8 digits), and a listener allows at most `maxFailures` attempts.
package enum Pairing {
    static let log = Log.logger("share.pair")

    /// What the user is asked, and how they answer.
    package typealias Confirm = @Sendable (_ peerName: String, _ peerID: DeviceID, _ code: String) -> Bool

    package struct Options: Sendable {
        package var relation: TrustRelation = .trusted
        /// The other device is the owner's watch (with `.team`).
        package var watch = false
        /// The port this device's agent listens on, told to the peer so it can reach us later.
        package var agentPort: Int?
        /// How long to wait for the other side's decision.
        package var decisionTimeout: Double = 120
        /// How long a listener waits for devices to pair (the pairing window).
        package var window: Double = 120
        /// Failed or declined attempts after which a listener stops.
        package var maxFailures = 3
        /// Digits of the code. Only tests shorten it (`SHARE_TEST_PAIRING_DIGITS`), to measure an attacker's odds.
        package var digits = 8
        /// Where a listener announces that it waits (UDP port and interface of LAN discovery); nil: it does not.
        package var announce: (port: Int, interface: String?)?
        /// Called (on another thread) when the other device hangs up while this one's user is still asked to
        /// compare the codes: the question can be dropped. Pairing then fails as cancelled either way.
        package var peerCancelled: (@Sendable () -> Void)?
        package init() {
            if let digits = ProcessInfo.processInfo.environment["SHARE_TEST_PAIRING_DIGITS"].flatMap(Int.init),
                (1...8).contains(digits)
            {
                self.digits = digits
            }
        }
    }

    package struct Outcome: Sendable {
        package let peer: TrustedDevice
        package let code: String
    }

    /// The side that connects.
    package static func connect(device: LocalDevice, to address: PeerAddress, options: Options, confirm: Confirm) throws
        -> Outcome
    {
        let session = try SessionOpener.connect(
            from: device, to: address, hello: Hello(name: device.name, role: .pair, listenPort: options.agentPort),
            verifier: { _ in true })
        defer { session.connection.close() }
        return try decide(
            session, role: .initiator, device: device, peerHost: address.host, options: options, confirm: confirm)
    }

    /// The side that waits: serves one pairing at a time on `port` for `options.window` seconds, until one succeeds,
    /// or `options.maxFailures` attempts failed or were declined.
    package static func listen(
        device: LocalDevice, host: String, port: Int, options: Options, ready: (Int) -> Void, confirm: Confirm
    ) throws -> Outcome {
        // One pairing at a time: a connection waits in the backlog while another is being decided.
        let acceptor = try Acceptor(
            host: host, port: port, name: "pairing",
            limits: .serial)
        defer { acceptor.close() }
        let bound = acceptor.port
        let announcer = options.announce.flatMap {
            try? PairingAnnouncer(device: device, pairingPort: bound, discoveryPort: $0.port, interface: $0.interface)
        }
        defer { announcer?.stop() }
        ready(bound)
        let context = try TLSContext(identity: device.identity, role: .server, verifier: { _ in true })
        let deadline = Date().addingTimeInterval(options.window)
        var failures = 0
        var lastFailure: ShareFailure?
        while Date() < deadline {
            guard let accepted = try acceptor.next(timeout: min(1, deadline.timeIntervalSinceNow)) else { continue }
            let (client, peer) = (accepted.fd, accepted.peer)
            do {
                let session = try SessionOpener.accept(
                    fileDescriptor: client, remoteAddress: peer, context: context,
                    hello: Hello(name: device.name, role: .pair, listenPort: options.agentPort))
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
                return try decide(
                    session, role: .responder, device: device, peerHost: host, options: options, confirm: confirm)
            } catch let failure as ShareFailure {
                failures += 1
                lastFailure = failure
                log.notice("pairing attempt failed", metadata: ["from": "\(peer)", "reason": "\(failure.message)"])
                if failures >= options.maxFailures {
                    throw ShareFailure(
                        .refused,
                        "\(failures) pairing attempts failed or were declined (the last: \(failure.message)); nothing was trusted — run share pair again"
                    )
                }
            } catch {
                failures += 1
                log.notice("pairing attempt failed", metadata: ["from": "\(peer)", "error": "\(error)"])
            }
        }
        if let lastFailure { throw lastFailure }
        throw ShareFailure(.unavailable, "no device came to pair within \(Int(options.window)) s")
    }

    private static func decide(
        _ session: Session, role: PairingMachine.Role, device: LocalDevice, peerHost: String, options: Options,
        confirm: Confirm
    ) throws -> Outcome {
        let peerName = session.peerHello.name
        let code: String
        do {
            guard session.peerHello.agreedVersion >= 2 else {
                throw ProtocolError(.version, "the other device pairs without commitments; update share on it")
            }
            guard let certificate = session.connection.peerCertificate,
                let peerDER = session.connection.peerCertificateDER
            else { throw ProtocolError(.refused, "the other device presented no certificate") }
            do {
                try certificate.checkAsShareDevice()
            } catch let error as TLSError {
                throw ProtocolError(
                    .refused, "the other device's certificate is not a share device's: \(error.message)")
            }
            code = try exchangeCommitments(
                session, role: role, own: try device.identity.certificate.derBytes(), peer: peerDER,
                digits: options.digits)
        } catch let error as ProtocolError {
            session.connection.fail(with: error)
            throw ShareFailure(.refused, "pairing with \(peerName) failed: \(error.message); nothing was trusted")
        } catch {
            throw SessionErrors.describe(error, peer: session.connection.remoteAddress, localID: device.id)
        }
        let mine = confirmWatchingHangUp(session, options: options) { confirm(peerName, session.peerID, code) }
        guard let mine else { throw cancelled }
        let theirs: PairDecision
        do {
            try Exchange.sendPairDecision(session.connection.channel, accept: mine)
            session.connection.setTimeout(options.decisionTimeout)
            theirs = PairDecision(accept: try Exchange.receivePairDecision(session.connection.channel))
        } catch is StreamEnded {
            throw cancelled
        } catch let error as TLSError where error.kind == .connectionLost {
            throw cancelled
        } catch {
            throw SessionErrors.describe(error, peer: session.connection.remoteAddress, localID: device.id)
        }
        guard mine else { throw ShareFailure(.refused, "pairing declined here; nothing was trusted") }
        guard theirs.accept else { throw ShareFailure(.refused, "the other device declined; nothing was trusted") }
        let address = session.peerHello.listenPort.map { PeerAddress(host: peerHost, port: $0) }
        // Under the trust store's lock: two pairings at once never lose an entry.
        let trusted = try TrustStore.update(device.paths.trustFile) { store in
            let base = FileNamesOnDisk.sanitize(peerName, fallback: "device")
            var name = base
            var suffix = 2
            while store.devices.contains(where: {
                $0.id != session.peerID && $0.name.lowercased() == name.lowercased()
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

    /// The other device stopped (Ctrl-C, a closed window) while this one's user was answering or waiting: pairing has
    /// no resume, so the advice is to start again.
    private static let cancelled = ShareFailure(
        .refused, "the other device cancelled pairing; nothing was trusted (run share pair again on both to retry)")

    /// Runs `ask` while a thread watches the connection: nil when the other device hung up meanwhile (its user
    /// pressed Ctrl-C), and `options.peerCancelled` is told at once.
    private static func confirmWatchingHangUp(_ session: Session, options: Options, ask: () -> Bool) -> Bool? {
        let state = Mutex<(asking: Bool, gone: Bool)>((true, false))
        let connection = session.connection
        let done = DispatchSemaphore(value: 0)
        Threads.start(name: "share-thread", stackSize: 8 << 20) {
            defer { done.signal() }
            while state.withLock({ $0.asking }) {
                guard connection.waitForHangUp(timeout: 0.2) else { continue }
                let ask = state.withLock { value in
                    value.gone = value.asking
                    return value.asking
                }
                if ask { options.peerCancelled?() }
                return
            }
        }
        let answer = ask()
        let gone = state.withLock { value in
            value.asking = false
            return value.gone
        }
        done.wait()
        return gone ? nil : answer
    }

    /// Commit, then reveal: each side's nonce is revealed only once the other side's commitment has arrived.
    private static func exchangeCommitments(
        _ session: Session, role: PairingMachine.Role, own: [UInt8], peer: [UInt8], digits: Int
    ) throws -> String {
        let hasher = SHA256Hasher()
        var machine = PairingMachine(
            role: role, ownCertificate: own, peerCertificate: peer, nonce: SecureRandom.bytes(32),
            exporter: try session.connection.exportKeyingMaterial(label: "EXPORTER-share-pairing"), digits: digits)
        return try Exchange.pairCommitments(session.connection.channel, machine: &machine, hasher: hasher)
    }

    /// Finds the device called `name` that waits to pair on the local network (it announces itself while it waits);
    /// returns where to connect.
    package static func find(name: String, discoveryPort: Int, interface: String?, timeout: Double) throws
        -> PeerAddress
    {
        let fd: Int32
        do {
            fd = try Syscalls.discoverySocket(port: discoveryPort, group: LANDiscovery.group, interface: interface)
        } catch let error as Syscalls.SocketError {
            throw ShareFailure(.unavailable, "cannot listen for devices waiting to pair: \(error.message)")
        }
        defer { Syscalls.close(fd) }
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            guard
                let (bytes, from) = try? Syscalls.receiveDatagram(fd, timeout: min(0.5, deadline.timeIntervalSinceNow)),
                let heard = try? JSONDecoder().decode(PairingAnnouncement.self, from: Data(bytes)),
                heard.magic == PairingAnnouncement.magic, (1...65535).contains(heard.port),
                heard.name.lowercased() == name.lowercased()
            else { continue }
            return PeerAddress(host: from, port: heard.port)
        }
        throw ShareFailure(
            .unavailable,
            "no device called '\(name)' is waiting to pair on this network; run share pair on it first, or give HOST:PORT"
        )
    }
}

/// What a device waiting to pair announces on the local network, for the pairing window only.
struct PairingAnnouncement: Codable {
    static let magic = "share-pairing"
    var magic = PairingAnnouncement.magic
    var name: String
    var port: Int
}

/// Announces once a second that this device waits to pair, until stopped.
final class PairingAnnouncer: Sendable {
    private let fd: Int32
    private let rounds: RepeatingThread
    private let closed = Atomic(false)

    init(device: LocalDevice, pairingPort: Int, discoveryPort: Int, interface: String?) throws {
        let fd = try Syscalls.discoverySocket(port: discoveryPort, group: LANDiscovery.group, interface: interface)
        self.fd = fd
        let bytes = Array(try JSONEncoder().encode(PairingAnnouncement(name: device.name, port: pairingPort)))
        rounds = RepeatingThread(name: "share-pair-announce", interval: 1) {
            Syscalls.sendDatagram(fd, bytes, host: LANDiscovery.group, port: discoveryPort)
            if interface == nil { Syscalls.sendDatagram(fd, bytes, host: "255.255.255.255", port: discoveryPort) }
        }
        rounds.start()
    }

    /// Stops announcing (when the listener is done: paired, out of attempts, or the window ended) and waits for the
    /// thread.
    func stop() {
        rounds.stop()
        let close = !closed.exchange(true, ordering: .acquiringAndReleasing)
        if close { Syscalls.close(fd) }
    }
}

/// Where devices find each other on the local network: the agents' announcements and a pairing's.
package enum LANDiscovery {
    /// The UDP port (`--discovery-port`).
    package static let defaultPort = 21_847
    /// The IPv4 multicast group.
    package static let group = "239.255.77.77"
}
