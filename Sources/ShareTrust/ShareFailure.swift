/// Why a share library call failed: a stable code saying what kind of failure it is, and one plain sentence. The
/// libraries throw it (or their own typed errors, which the session layer describes as one); only the command-line
/// programs map codes to exit statuses.
public struct ShareFailure: Error, CustomStringConvertible, Sendable {
    public enum Code: String, Sendable, Codable, CaseIterable {
        /// Anything not covered below.
        case failure
        /// The receiver refused, or no representation was in common.
        case refused
        /// A wrong argument or a name that names nothing.
        case usage
        /// Bad data: a malformed device ID, a corrupt trust store or settings file.
        case dataError
        /// A file or folder to send is missing or unreadable.
        case noInput
        /// The peer could not be reached (refused, timed out, unknown address).
        case unavailable
        /// An output file or folder cannot be created.
        case cannotCreate
        /// Reading or writing failed, a full disk included.
        case ioError
        /// The transfer was interrupted; doing it again resumes it.
        case interrupted
        /// The peer broke the protocol.
        case protocolError
        /// The peer is not trusted here, or does not trust this device.
        case notTrusted
        /// The device's own set-up is wrong (identity files, folders).
        case configuration
    }

    public let code: Code
    public let message: String
    /// Set when a connection was made but nobody answered its handshake before the deadline (a relayed session whose
    /// other side never joined, a port that holds connections and says nothing).
    public private(set) var isUnansweredHandshake = false
    /// Set when the peer asked to be asked again after this many seconds (an offer it holds for its person's
    /// answer): a queued job offers again then, not after a growing backoff.
    public private(set) var retryAfter: Double?

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The same failure, marked as a handshake nobody answered.
    public func unanswered() -> ShareFailure {
        var failure = self
        failure.isUnansweredHandshake = true
        return failure
    }

    /// The same failure, to be tried again after `seconds`.
    public func retrying(after seconds: Double) -> ShareFailure {
        var failure = self
        failure.retryAfter = seconds
        return failure
    }

    public var description: String { message }
}
