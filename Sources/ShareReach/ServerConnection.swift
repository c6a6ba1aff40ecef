import FoundationEssentials
import ShareTrust
import ShareTLS
import ShareNet

/// A TLS 1.3 connection to a discovery server or a relay: this device's certificate goes out (the server derives our
/// device ID from it), and the server's certificate must have the digest its URL pins. Blocking; one thread.
final class ServerConnection {
    let server: ServerURL
    let tls: TLSConnection

    /// Connects and completes the handshake within `timeout` seconds.
    init(to server: ServerURL, identity: TLSIdentity, alpn: [String] = [], timeout: Double) throws(ShareFailure) {
        self.server = server
        Syscalls.ignoreSIGPIPE()
        let fd: Int32
        do {
            fd = try Syscalls.connect(host: server.host, port: server.port, timeout: timeout)
        } catch {
            throw ShareFailure(.unavailable, "\(server.kind.noun) \(server.address) cannot be reached: \(error)")
        }
        Syscalls.setTimeouts(fd, seconds: timeout)
        let pinned = server.id
        do {
            let context = try TLSContext(
                identity: identity, role: .client, verifier: { $0 == pinned }, alpn: alpn)
            tls = try TLSConnection(context: context, fileDescriptor: fd)
            try tls.handshake()
        } catch let error as TLSError where error.kind == .peerNotTrusted {
            throw ShareFailure(
                .notTrusted,
                "\(server.kind.noun) \(server.address) presented another certificate than its URL's id (\(server.id.short)…); check the URL"
            )
        } catch {
            throw ShareFailure(.unavailable, "\(server.kind.noun) \(server.address): TLS failed: \(error)")
        }
    }

    func setTimeout(_ seconds: Double) { Syscalls.setTimeouts(tls.fileDescriptor, seconds: seconds) }

    func write(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try tls.write($0) }
    }

    /// Exactly `count` bytes, or an error when the stream ends first.
    func read(exactly count: Int) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let n = try out.withUnsafeMutableBytes {
                try tls.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[filled...]))
            }
            if n == 0 {
                throw ShareFailure(.unavailable, "\(server.kind.noun) \(server.address) closed the connection")
            }
            filled += n
        }
        return out
    }

    /// Some bytes (at most `limit`), 0 at the end of the stream.
    func read(upTo limit: Int) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: limit)
        let n = try out.withUnsafeMutableBytes { try tls.read(into: $0) }
        return Array(out[0..<n])
    }

    /// Whether bytes wait to be read (or the connection closed).
    var hasInput: Bool { tls.hasBufferedData || Syscalls.isReadable(tls.fileDescriptor) }

    func close() { tls.shutdown() }

    /// Stops the connection from another thread.
    func interrupt() { Syscalls.shutdownSocket(tls.fileDescriptor) }
}

extension ServerURL.Kind {
    /// How a sentence names the server.
    var noun: String { self == .discovery ? "discovery server" : "relay" }
}
