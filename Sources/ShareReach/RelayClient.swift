import FoundationEssentials
import ShareThreads
import Glibc
import ShareTrust
import ShareTLS
import ShareNet

/// The client side of Syncthing's Relay Protocol v1: asking a relay for a session with a device (temporary mode),
/// and joining a session the relay offered (session mode). What comes back is a plain socket: the relay's byte pipe,
/// over which the two devices run their own TLS session end to end. Blocking.
public enum RelayClient {
    /// The relay's protocol mode speaks TLS with this application protocol.
    public static let alpn = "bep-relay"

    /// Response codes.
    static let success: Int32 = 0
    static let notFound: Int32 = 1
    static let alreadyConnected: Int32 = 2

    /// Asks `relay` for a session with `device`, then joins it: the socket of the pipe, and whether this side is the
    /// TLS server in it. Fails with a sentence naming the relay.
    public static func connect(
        to device: DeviceID, through relay: ServerURL, identity: TLSIdentity, timeout: Double
    ) throws(ShareFailure) -> (fd: Int32, serverSocket: Bool) {
        var attempt = 0
        while true {
            attempt += 1
            let invitation = try requestSession(with: device, at: relay, identity: identity, timeout: timeout)
            guard invitation.from == device.bytes else {
                throw ShareFailure(
                    .protocolError, "relay \(relay.address) invited this device to a session with another device")
            }
            // strelaysrv takes a session's second connection only while it waits for one, and two joins arriving
            // within microseconds of each other can meet it busy with the first ("already connected"); the key is
            // spent then. The invited device joins at once, the asking one a moment later, so on a fast network the
            // two do not collide; and a join that does is asked for again.
            Threads.sleep(seconds: joinDelay)
            do {
                let fd = try join(invitation, relay: relay, timeout: timeout)
                return (fd, invitation.serverSocket)
            } catch  where attempt < 3 && error.code == .unavailable {
                continue
            }
        }
    }

    /// How long the asking side waits before joining its session.
    static let joinDelay = 0.05

    /// Temporary mode: a TLS connection to the relay, `ConnectRequest`, and its answer.
    static func requestSession(with device: DeviceID, at relay: ServerURL, identity: TLSIdentity, timeout: Double)
        throws(ShareFailure) -> SessionInvitation
    {
        let connection = try ServerConnection(to: relay, identity: identity, alpn: [alpn], timeout: timeout)
        defer { connection.close() }
        do {
            try connection.write(RelayMessage.connectRequest(id: device.bytes).encoded())
            switch try readMessage(connection) {
            case .sessionInvitation(let invitation):
                return invitation
            case .response(let code, _) where code == notFound:
                throw ShareFailure(
                    .unavailable,
                    "\(device.short)… is not joined to relay \(relay.address) (its agent is not running there)")
            case .response(let code, let message):
                throw ShareFailure(.unavailable, "relay \(relay.address) refused the session: \(message) (\(code))")
            default:
                throw ShareFailure(.protocolError, "relay \(relay.address) answered out of turn")
            }
        } catch let error as ShareFailure {
            throw error
        } catch {
            throw ShareFailure(.unavailable, "relay \(relay.address): \(error)")
        }
    }

    /// Session mode: connects to where the invitation says (the relay's own address when it names none), sends
    /// `JoinSessionRequest` in the clear and reads the relay's answer. Returns the pipe's socket.
    public static func join(_ invitation: SessionInvitation, relay: ServerURL, timeout: Double) throws(ShareFailure)
        -> Int32
    {
        let host = invitation.host ?? relay.host
        let fd: Int32
        do {
            fd = try Syscalls.connect(host: host, port: invitation.port, timeout: timeout)
        } catch {
            throw ShareFailure(.unavailable, "relay \(relay.address): cannot join the session at \(host): \(error)")
        }
        Syscalls.setTimeouts(fd, seconds: timeout)
        do {
            try Syscalls.writeAll(fd, RelayMessage.joinSessionRequest(key: invitation.key).encoded())
            let header = try Syscalls.readExactly(fd, RelayMessage.headerSize)
            let (type, length) = try RelayMessage.parseHeader(header)
            let message = try RelayMessage.decode(type: type, body: try Syscalls.readExactly(fd, length))
            guard case .response(let code, let text) = message else {
                throw ShareFailure(.protocolError, "relay \(relay.address) answered the join out of turn")
            }
            guard code == success else {
                throw ShareFailure(.unavailable, "relay \(relay.address) would not join the session: \(text) (\(code))")
            }
            return fd
        } catch let error as ShareFailure {
            Syscalls.close(fd)
            throw error
        } catch {
            Syscalls.close(fd)
            throw ShareFailure(.unavailable, "relay \(relay.address): \(error)")
        }
    }

    /// One message from a relay's protocol-mode connection.
    static func readMessage(_ connection: ServerConnection) throws -> RelayMessage {
        let (type, length) = try RelayMessage.parseHeader(try connection.read(exactly: RelayMessage.headerSize))
        return try RelayMessage.decode(type: type, body: length == 0 ? [] : try connection.read(exactly: length))
    }
}
