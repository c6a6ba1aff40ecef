import FoundationEssentials
import ShareProtocol
import ShareTLS

/// One connection to a peer: it owns the socket (through its TLS connection), the frame channel over it, and every
/// operation on the socket itself. No file descriptor leaves it. Driven by one thread at a time; `interrupt()` may
/// be called from any thread.
public final class PeerConnection: @unchecked Sendable {  // framing on one thread at a time; interrupt from any
    let tls: TLSConnection
    /// Frames both ways, decoded by the protocol module.
    public let channel: FrameChannel
    /// Where the peer connected from or to.
    public let remoteAddress: String

    public init(tls: TLSConnection, remoteAddress: String) {
        self.tls = tls
        self.remoteAddress = remoteAddress
        channel = FrameChannel(stream: tls)
    }

    /// Longest time one frame may take once it has begun.
    public var frameDeadline: Duration {
        get { channel.frameDeadline }
        set { channel.frameDeadline = newValue }
    }

    /// Receive/send timeout for the socket (0 = none).
    public func setTimeout(_ seconds: Double) { Syscalls.setTimeouts(tls.fileDescriptor, seconds: seconds) }

    // MARK: Frames

    public func send(_ frame: Frame) throws { try channel.send(frame) }
    public func send(_ type: FrameType, _ message: some Encodable) throws { try channel.send(type, message) }
    public func receive() throws -> Frame { try channel.receive() }
    public func receive<T: Decodable>(_ type: FrameType, as: T.Type) throws -> T {
        try channel.receive(type, as: T.self)
    }
    /// Whether the peer has sent something not read yet.
    public var hasIncomingData: Bool { channel.hasIncomingData }

    // MARK: TLS facts

    /// The negotiated TLS version and cipher, e.g. `TLSv1.3 TLS_AES_128_GCM_SHA256`.
    public var tlsDescription: String { "\(tls.protocolVersion) \(tls.cipher)" }
    /// The peer's certificate in DER.
    public var peerCertificateDER: [UInt8]? { tls.peerCertificateDER }
    /// The peer's certificate.
    public var peerCertificate: Certificate? { tls.peerCertificate }

    /// Bytes both ends of this connection derive alike (the TLS exporter), under `label`.
    public func exportKeyingMaterial(label: String, length: Int = 32) throws -> [UInt8] {
        try tls.exportKeyingMaterial(label: label, length: length)
    }

    // MARK: Ending

    /// Reports `error` to the peer (best effort; not when an error was already told either way) and closes
    /// politely, reading and discarding what the peer still sends for a moment so that the error arrives instead of
    /// being destroyed by a TCP reset.
    public func fail(with error: ProtocolError) {
        if !channel.errorExchanged { try? send(.error, error) }
        closeLingering()
    }

    /// Closes after the peer was told what went wrong (or told us): the last frames are not lost to a reset.
    public func closeLingering() {
        tls.shutdown()
        Syscalls.lingeringDrain(tls.fileDescriptor, maxBytes: 64 << 20, timeout: 2)
    }

    public func close() { tls.shutdown() }

    /// Waits up to `timeout` seconds for the peer to hang up; safe from another thread while nobody reads (it
    /// touches no TLS state).
    public func waitForHangUp(timeout: Double) -> Bool { Syscalls.waitHangUp(tls.fileDescriptor, timeout: timeout) }

    /// Ends the session from another thread at its next frame, its own thread then telling the peer `error`.
    public func stop(with error: ProtocolError) { channel.stop(error) }

    /// Stops the connection from another thread: a read or write blocked on it returns with an error at once.
    public func interrupt() { Syscalls.shutdownSocket(tls.fileDescriptor) }

    /// Waits until one of `connections` has something to read (or has closed), at most `timeout` seconds.
    public static func waitReadable(_ connections: [PeerConnection], timeout: Double) -> Bool {
        if connections.contains(where: { $0.hasIncomingData }) { return true }
        return Syscalls.waitReadable(connections.map(\.tls.fileDescriptor), timeout: timeout)
    }
}

extension TLSConnection: ByteStream {
    public var hasInput: Bool { hasBufferedData || Syscalls.isReadable(fileDescriptor) }
    public func setReadTimeout(_ seconds: Double) { Syscalls.setTimeouts(fileDescriptor, seconds: seconds) }
}

extension SHA256Hasher: ChunkHasher {
    public var algorithm: DigestAlgorithm { .sha256 }

    public func digest(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        update(bytes)
        return finalize()
    }

    public func another() -> ChunkHasher { SHA256Hasher() }
    public func make(_ algorithm: DigestAlgorithm) -> ChunkHasher { chunkHasher(algorithm) }
}

extension BLAKE3Hasher: ChunkHasher {
    public var algorithm: DigestAlgorithm { .blake3 }

    public func digest(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        update(bytes)
        return finalize()
    }

    public func another() -> ChunkHasher { BLAKE3Hasher() }
    public func make(_ algorithm: DigestAlgorithm) -> ChunkHasher { chunkHasher(algorithm) }
}

/// A new hasher of `algorithm`.
public func chunkHasher(_ algorithm: DigestAlgorithm) -> ChunkHasher {
    switch algorithm {
    case .sha256: SHA256Hasher()
    case .blake3: BLAKE3Hasher()
    }
}
