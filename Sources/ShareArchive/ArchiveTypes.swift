import CShareArchive
import FoundationEssentials

/// Why an archive could not be written, read or extracted. The message names the entry when there is one.
public struct ArchiveError: Error, CustomStringConvertible, Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// An entry broke the extraction policy (a path leaving the target, a device node, a link outside).
        case unsafeEntry
        /// A limit was reached (entries, total size, expansion ratio, free space).
        case limit
        /// The archive is malformed or truncated, or in a format share does not read.
        case corrupt
        /// Reading a source file or writing the target failed.
        case io
        /// The disk is full.
        case noSpace
        /// A file being archived changed after it was planned.
        case sourceChanged
        /// The consumer of the stream stopped it (the connection failed).
        case cancelled
    }

    public let kind: Kind
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}

/// One archive entry's metadata, in the form share writes and accepts.
public struct ArchiveEntryInfo: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case file
        case directory
        case symlink(String)
        case hardlink(String)
        /// Device nodes, FIFOs, sockets: never created.
        case special(String)
    }

    /// The path inside the archive, as stored (not yet validated).
    public var path: String
    public var kind: Kind
    /// Data bytes of a regular file (nil when the archive does not say, as in a streamed zip).
    public var size: UInt64?
    /// Permission bits (0o777 at most are applied).
    public var mode: UInt32
    /// Modification time, seconds since 1970.
    public var modified: Int64?

    public init(path: String, kind: Kind, size: UInt64? = nil, mode: UInt32 = 0o644, modified: Int64? = nil) {
        self.path = path
        self.kind = kind
        self.size = size
        self.mode = mode
        self.modified = modified
    }
}

/// Once per process: libarchive converts names through the C library's character type, and crashes on non-ASCII
/// names in the C locale, so a UTF-8 character type is set before the first archive is opened.
enum ArchiveLocale {
    static let ready: Void = { cshare_archive_use_utf8_names() }()
}

/// The message libarchive left on `handle`, or `fallback`.
func archiveMessage(_ handle: OpaquePointer?, _ fallback: String) -> String {
    guard let handle, let text = archive_error_string(handle) else { return fallback }
    return String(cString: text)
}
