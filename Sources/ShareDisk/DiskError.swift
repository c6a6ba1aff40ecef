import Glibc

/// Why a file operation under a folder failed: a stable kind and one plain sentence naming the file.
public struct DiskError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, Equatable {
        /// The file or folder does not exist.
        case notFound
        /// Something already has that name (or a folder is not empty).
        case exists
        /// A link stood where a file or folder was expected; links are never followed under a folder.
        case link
        /// A file stood where a folder was expected, or the reverse.
        case wrongKind
        /// The disk (or the user's quota) is full.
        case noSpace
        /// Permission denied, or a read-only file system.
        case denied
        /// Another session holds the lock.
        case busy
        /// The name is not one safe path component.
        case invalidName
        /// Any other failure of the system.
        case io
    }

    public let kind: Kind
    /// The system's error number, when there was one.
    public let code: Int32
    public let message: String

    public init(_ kind: Kind, _ message: String, code: Int32 = 0) {
        self.kind = kind
        self.message = message
        self.code = code
    }

    public var description: String { message }

    /// The failure of the call that just returned, as `what: reason` in plain words.
    static func system(_ what: String, code: Int32 = errno) -> DiskError {
        let kind: Kind
        let reason: String
        switch code {
        case ENOENT:
            (kind, reason) = (.notFound, "it does not exist")
        case EEXIST, ENOTEMPTY:
            (kind, reason) = (.exists, "something of that name is already there")
        case ELOOP, EXDEV:
            (kind, reason) = (.link, "a link is in the way, and links are never followed there")
        case ENOTDIR, EISDIR:
            (kind, reason) = (.wrongKind, "a file stands where a folder is expected, or the reverse")
        case ENOSPC, EDQUOT:
            (kind, reason) = (.noSpace, "the disk is full")
        case EACCES, EPERM:
            (kind, reason) = (.denied, "permission denied")
        case EROFS:
            (kind, reason) = (.denied, "the file system is read-only")
        case EWOULDBLOCK:
            (kind, reason) = (.busy, "another session is using it")
        default:
            (kind, reason) = (.io, String(cString: strerror(code)))
        }
        return DiskError(kind, "\(what): \(reason)", code: code)
    }
}
