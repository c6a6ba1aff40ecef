import CoreTransferable
import FoundationEssentials
import ShareProtocol
import ShareTLS
import ShareNet

/// An authenticated session after both hellos: the connection, the peer's identity and what it said.
public struct Session: Sendable {
    public let connection: PeerConnection
    public let peerID: DeviceID
    public let peerHello: Hello
    /// Time from TCP connect to the peer's hello, in seconds (client side).
    public let setupSeconds: Double
    /// How the session reached the peer: directly, or through a relay (said by `share send`, `ping`, `status`).
    public var route: SessionRoute = .direct
    /// The chunk digest both hellos agreed on (`DigestAlgorithm.agreed`).
    public var digest: DigestAlgorithm = .sha256

    /// A hasher of the session's digest: what its drivers check and make chunks with.
    public func chunkHasher() -> ChunkHasher { ShareNet.chunkHasher(digest) }
}

extension Session {
    /// The same session with the sender known by another id for what is kept of its transfers (a send by code:
    /// the one-off certificate changes each run, the code does not, so an interrupted transfer resumes).
    public func keyed(as id: DeviceID) -> Session {
        Session(
            connection: connection, peerID: id, peerHello: peerHello, setupSeconds: setupSeconds, route: route,
            digest: digest)
    }
}

/// The way a session's bytes travel.
public enum SessionRoute: Sendable, Equatable, CustomStringConvertible {
    /// A TCP connection between the two devices.
    case direct
    /// A relay's byte pipe (Syncthing's Relay Protocol v1), with this relay host; TLS runs end to end inside it.
    case relay(host: String)
    /// A connection made for a send by code (magic-wormhole's transit: direct, or through its relay).
    case code(String)

    /// `direct` or `via relay HOST`.
    public var description: String {
        switch self {
        case .direct: return "direct"
        case .relay(let host): return "via relay \(host)"
        case .code(let route): return route
        }
    }
}

/// Timeouts for sessions (seconds).
public struct SessionTimeouts: Sendable {
    public var connect: Double = 10
    public var handshake: Double = 10
    public var idle: Double = 300
    public init() {}
    public init(connect: Double, handshake: Double, idle: Double) {
        self.connect = connect
        self.handshake = handshake
        self.idle = idle
    }
}

/// Opens sessions: TCP, TLS 1.3 with both certificates checked, then hellos both ways. The server's hello is the
/// acknowledgement the client waits for before it sends anything else (a TLS 1.3 client learns of its own rejection
/// only when it reads).
public enum SessionOpener {
    /// Connects to `address`. `verifier` decides which server certificates are acceptable.
    public static func connect(
        from device: LocalDevice, to address: PeerAddress, hello: Hello, verifier: @escaping PeerVerifier,
        timeouts: SessionTimeouts = SessionTimeouts()
    ) throws -> Session {
        Syscalls.ignoreSIGPIPE()
        let start = ContinuousClock.now
        let fd: Int32
        do {
            fd = try Syscalls.connect(host: address.host, port: address.port, timeout: timeouts.connect)
        } catch let error as Syscalls.SocketError where error.isRefused {
            throw ShareFailure(.unavailable, "cannot reach \(address): \(Self.nothingListens)")
        } catch let error as Syscalls.SocketError {
            throw ShareFailure(.unavailable, "cannot reach \(address): \(error.message)")
        }
        return try establish(
            fileDescriptor: fd, remoteAddress: address.description, from: device, hello: hello, verifier: verifier,
            timeouts: timeouts, started: start)
    }

    /// Runs the client side over a connected socket (a TCP connection, or a relay's pipe): TLS with the peer checked
    /// by `verifier`, our hello, the peer's. Takes ownership of `fd`.
    public static func establish(
        fileDescriptor fd: Int32, remoteAddress: String, from device: LocalDevice, hello: Hello,
        verifier: @escaping PeerVerifier, timeouts: SessionTimeouts, started start: ContinuousClock.Instant = .now,
        route: SessionRoute = .direct
    ) throws -> Session {
        Syscalls.ignoreSIGPIPE()
        let address = remoteAddress
        Syscalls.setTimeouts(fd, seconds: timeouts.handshake)
        let context: TLSContext
        do {
            context = try TLSContext(identity: device.identity, role: .client, verifier: verifier)
        } catch {
            Syscalls.close(fd)
            throw error
        }
        let tls = try TLSConnection(context: context, fileDescriptor: fd)
        let connection = PeerConnection(tls: tls, remoteAddress: remoteAddress)
        let watchdog = Watchdog(fileDescriptor: fd, seconds: timeouts.handshake)
        defer { watchdog.disarm() }
        connection.frameDeadline = .seconds(timeouts.handshake)
        do {
            try tls.handshake()
            let peerHello = try Exchange.openHello(connection.channel, hello)
            guard let peerID = tls.peerID else { throw TLSError(.handshake, "the peer presented no certificate") }
            watchdog.disarm()
            connection.frameDeadline = .seconds(120)
            connection.setTimeout(timeouts.idle)
            let elapsed = ContinuousClock.now - start
            return Session(
                connection: connection, peerID: peerID, peerHello: peerHello, setupSeconds: elapsed.seconds,
                route: route, digest: .agreed(hello.digests, peerHello.digests))
        } catch {
            connection.close()
            if watchdog.fired {
                throw ShareFailure(
                    .unavailable,
                    "\(address) did not complete the TLS handshake and hello within \(Int(timeouts.handshake)) s; is it a share device?"
                ).unanswered()
            }
            throw SessionErrors.describe(error, peer: address.description, localID: device.id, established: false)
        }
    }

    /// Connects to `target`, trying its addresses in order (the recorded one, then an announced one, then the last
    /// that worked): each is checked by the same pinned handshake, so an address that lies costs one attempt. The
    /// address that answered is remembered.
    public static func connect(
        from device: LocalDevice, to target: PeerTarget, trust: TrustStore, hello: Hello,
        timeouts: SessionTimeouts = SessionTimeouts()
    ) throws -> Session {
        guard !target.addresses.isEmpty else {
            throw ShareFailure(
                .unavailable,
                "no address is known for '\(target.expected?.name ?? "?")' and its agent was not heard on this network")
        }
        var firstError: Error?
        var refused = 0
        for address in target.addresses {
            do {
                let session = try connect(
                    from: device, to: address, hello: hello, verifier: target.verifier(trust: trust), timeouts: timeouts
                )
                // An address learned elsewhere than the trust store is remembered as the last that worked.
                if let expected = target.expected, address != expected.address {
                    ReachedAddresses.record(expected.id, address, paths: device.paths)
                }
                return session
            } catch {
                firstError = firstError ?? error
                if let failure = error as? ShareFailure, failure.message.hasSuffix(Self.nothingListens) { refused += 1 }
            }
        }
        // The device is there but nothing of share's listens: say what to run on it.
        if let expected = target.expected, refused == target.addresses.count, let failure = firstError as? ShareFailure
        {
            throw ShareFailure(
                .unavailable,
                "\(failure.message); on \(expected.name), run share receive (or keep share agent running) and send again"
            )
        }
        throw firstError!
    }

    /// What a refused connection means to a person.
    static let nothingListens = "nothing listens there (connection refused)"

    /// Runs the server side on an accepted socket: handshake, the client's hello, our hello.
    public static func accept(
        fileDescriptor fd: Int32, remoteAddress: String, context: TLSContext, hello: Hello,
        timeouts: SessionTimeouts = SessionTimeouts(), route: SessionRoute = .direct
    ) throws -> Session {
        Syscalls.setTimeouts(fd, seconds: timeouts.handshake)
        let tls = try TLSConnection(context: context, fileDescriptor: fd)
        let connection = PeerConnection(tls: tls, remoteAddress: remoteAddress)
        // The handshake and the hello together must finish within the handshake timeout.
        let watchdog = Watchdog(fileDescriptor: fd, seconds: timeouts.handshake)
        defer { watchdog.disarm() }
        connection.frameDeadline = .seconds(timeouts.handshake)
        do {
            try tls.handshake()
        } catch {
            // Let our alert reach the peer before the socket closes.
            Syscalls.lingeringDrain(fd)
            throw error
        }
        let peerHello: Hello
        do {
            peerHello = try Exchange.receiveHello(connection.channel)
        } catch let error as ProtocolError {
            connection.fail(with: error)
            throw error
        }
        try Exchange.answerHello(connection.channel, hello)
        guard let peerID = tls.peerID else { throw TLSError(.handshake, "the peer presented no certificate") }
        watchdog.disarm()
        connection.frameDeadline = .seconds(120)
        connection.setTimeout(timeouts.idle)
        return Session(
            connection: connection, peerID: peerID, peerHello: peerHello, setupSeconds: 0, route: route,
            digest: .agreed(hello.digests, peerHello.digests))
    }
}

/// Turns lower-level failures into one clear line with the right exit status.
public enum SessionErrors {
    /// `established`: whether both hellos had been exchanged when the error happened.
    public static func describe(_ error: Error, peer: String, localID: DeviceID, established: Bool = true)
        -> ShareFailure
    {
        switch error {
        case let error as ShareFailure:
            return error
        case let error as TLSError:
            switch error.kind {
            case .peerNotTrusted where error.message.utf8.firstRange(of: localID.description.utf8) != nil:
                return ShareFailure(
                    .usage, "\(peer) is this device itself; send to another device (see: share trust list)")
            case .peerNotTrusted:
                return ShareFailure(.notTrusted, "\(peer): \(error.message)")
            case .rejectedByPeer:
                return ShareFailure(
                    .notTrusted,
                    "\(peer) refused this device (ID \(localID)); on that device run: share trust add \(localID)")
            case .timeout:
                return ShareFailure(.unavailable, "\(peer) did not answer in time (\(error.message))")
            case .connectionLost where !established:
                return ShareFailure(
                    .notTrusted,
                    "\(peer) closed the connection during the handshake; it probably does not trust this device (ID \(localID)): on that device run: share trust add \(localID)"
                )
            case .connectionLost:
                return ShareFailure(
                    .interrupted, "connection to \(peer) lost (\(error.message)); run the same command again to resume")
            case .handshake:
                return ShareFailure(.protocolError, "TLS handshake with \(peer) failed: \(error.message)")
            case .openssl, .badCredentials:
                return ShareFailure(.configuration, "TLS set-up failed: \(error.message)")
            }
        case is StreamEnded where !established:
            return ShareFailure(
                .notTrusted,
                "\(peer) closed the connection during the handshake; it probably does not trust this device (ID \(localID)): on that device run: share trust add \(localID)"
            )
        case let error as StreamEnded:
            return ShareFailure(
                .interrupted, "connection to \(peer) lost (\(error.description)); run the same command again to resume")
        case let error as ProtocolError:
            switch error.code {
            case .version:
                // The device is there but speaks another version: unavailable until one side is updated, so a
                // queued job waits for that instead of failing.
                return ShareFailure(.unavailable, "\(peer): \(error.message)")
            case .notShare, .badFrame, .frameTooLarge, .badMessage, .digestMismatch:
                return ShareFailure(.protocolError, "\(peer): \(error.message)")
            case .refused, .noCommonRepresentation, .pairingDeclined:
                return ShareFailure(.refused, "\(peer): \(error.message)")
            case .timeout:
                return ShareFailure(.unavailable, "\(peer): \(error.message)")
            case .storage:
                return ShareFailure(.ioError, "\(peer): \(error.message)")
            case .unsafeArchive:
                return ShareFailure(.dataError, "\(peer): \(error.message)")
            case .cancelled, .internalError, .sourceChanged:
                return ShareFailure(.interrupted, "\(peer): \(error.message)")
            }
        default:
            return ShareFailure(.failure, "\(peer): \(error)")
        }
    }
}
