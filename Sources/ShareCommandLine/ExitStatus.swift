import ShareTrust

/// Exit codes of the `share` and `share-watch` commands (listed in `share --help`).
public enum ExitStatus: Int32, Sendable, CaseIterable {
    case success = 0
    /// Generic failure not covered below.
    case failure = 1
    /// The receiver refused or no representation was in common.
    case refused = 3
    /// Wrong flag or argument.
    case usage = 64
    /// Bad input data: a malformed device ID, a corrupt trust store or config file.
    case dataError = 65
    /// A file or folder to send does not exist or cannot be read.
    case noInput = 66
    /// The peer could not be reached (refused, timed out, unknown name).
    case unavailable = 69
    /// Cannot create an output file or folder.
    case cannotCreate = 73
    /// Input/output error, including a full disk.
    case ioError = 74
    /// The transfer was interrupted; running the same command again resumes it.
    case interrupted = 75
    /// The peer broke the protocol (bad frame, version mismatch, digest mismatch).
    case protocolError = 76
    /// Trust: the peer is not trusted here, or it does not trust this device.
    case notTrusted = 77
    /// Configuration problem (identity files, directories).
    case configuration = 78
    /// The program reading share's messages (standard error) went away; when standard output's reader leaves, share
    /// stops and exits 0, as `yes | head` does.
    case readerGone = 141

    public var meaning: String {
        switch self {
        case .success: return "success"
        case .failure: return "failure"
        case .refused: return "the receiver refused, or no representation was in common"
        case .usage: return "wrong flag or argument"
        case .dataError: return "bad input data (device ID, trust store, config file)"
        case .noInput: return "a file to send is missing or unreadable"
        case .unavailable: return "the peer could not be reached"
        case .cannotCreate: return "cannot create an output file"
        case .ioError: return "input/output error, including a full disk"
        case .interrupted: return "interrupted; run the same command again to resume"
        case .protocolError: return "the peer broke the protocol"
        case .notTrusted: return "not trusted (by this device or by the peer)"
        case .configuration: return "configuration problem"
        case .readerGone: return "the reader of share's messages (standard error) went away"
        }
    }

    /// The exit status of a library failure.
    public init(_ code: ShareFailure.Code) {
        switch code {
        case .failure: self = .failure
        case .refused: self = .refused
        case .usage: self = .usage
        case .dataError: self = .dataError
        case .noInput: self = .noInput
        case .unavailable: self = .unavailable
        case .cannotCreate: self = .cannotCreate
        case .ioError: self = .ioError
        case .interrupted: self = .interrupted
        case .protocolError: self = .protocolError
        case .notTrusted: self = .notTrusted
        case .configuration: self = .configuration
        }
    }
}

/// What a command tells its user when it fails: one line, and the exit status the command returns.
public struct ShareError: Error, CustomStringConvertible, Sendable {
    public let status: ExitStatus
    public let message: String

    public init(_ status: ExitStatus, _ message: String) {
        self.status = status
        self.message = message
    }

    /// A library failure, as the command reports it.
    public init(_ failure: ShareFailure) {
        self.init(ExitStatus(failure.code), failure.message)
    }

    public var description: String { message }
}
