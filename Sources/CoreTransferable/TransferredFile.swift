import FoundationEssentials

/// A file that the sender exports through a `FileRepresentation`.
public struct SentTransferredFile: Sendable {
    /// The file's location.
    public let file: URL
    /// Whether the receiver may access the original file; when false it only ever gets a copy.
    public let allowAccessingOriginalFile: Bool

    public init(_ file: URL, allowAccessingOriginalFile: Bool = false) {
        self.file = file
        self.allowAccessingOriginalFile = allowAccessingOriginalFile
    }
}

/// A file that the receiver imports through a `FileRepresentation`.
///
/// `file` exists only while the importing closure runs; copy or move it if you need it afterwards.
public struct ReceivedTransferredFile: Sendable {
    /// The file's location, valid only during the importing closure.
    public let file: URL
    /// True when `file` is the sender's original (opened in place), false when it is a copy.
    public let isOriginalFile: Bool

    package init(file: URL, isOriginalFile: Bool) {
        self.file = file
        self.isOriginalFile = isOriginalFile
    }
}
