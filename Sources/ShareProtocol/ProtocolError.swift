/// A protocol failure with a stable code (sent to the peer in an `Error` frame) and a readable message.
public struct ProtocolError: Error, Sendable, Equatable, Codable, CustomStringConvertible {
    public enum Code: String, Sendable, Codable, Equatable, CaseIterable {
        /// The peer is not a share device (wrong magic, or TLS succeeded but it speaks something else).
        case notShare = "not-share"
        /// The peer speaks another protocol version.
        case version = "version"
        /// A frame header was invalid (unknown type).
        case badFrame = "bad-frame"
        /// A frame's length exceeds the limit for its type.
        case frameTooLarge = "frame-too-large"
        /// A message did not decode or broke a rule (a field out of range, a message out of order).
        case badMessage = "bad-message"
        /// The receiver and sender have nothing in common for an item.
        case noCommonRepresentation = "no-common-representation"
        /// The receiver refused (size limit, disk space, policy, user said no).
        case refused = "refused"
        /// Bytes did not match their digest.
        case digestMismatch = "digest-mismatch"
        /// The peer took too long.
        case timeout = "timeout"
        /// The peer is shutting down or cancelled.
        case cancelled = "cancelled"
        /// The receiver's disk is full or it cannot write.
        case storage = "storage"
        /// The source changed while it was being sent; the receiver discards the partial.
        case sourceChanged = "source-changed"
        /// An archive entry broke the receiver's extraction policy (a path leaving the target, a device node, a
        /// limit), or the archive is malformed.
        case unsafeArchive = "unsafe-archive"
        /// Pairing was declined.
        case pairingDeclined = "pairing-declined"
        /// Something else went wrong on the peer.
        case internalError = "internal"
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
