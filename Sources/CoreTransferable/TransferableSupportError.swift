import FoundationEssentials

/// The error CoreTransferable throws. Codes are stable; messages name the types involved.
///
/// The error domain matches Apple's runtime error (`CoreTransferable.TransferableSupportError`, code 0 when no
/// representation could be satisfied). Errors thrown by user closures propagate unchanged.
///
/// The domain and code reach `NSError` through the standard library's error bridging (`_domain`, `_code`), not
/// through `CustomNSError`: naming that protocol would link all of Foundation into every program, the small watch
/// client included.
public struct TransferableSupportError: Error, Sendable, Equatable, CustomStringConvertible, LocalizedError {
    public enum Code: Int, Sendable, Equatable, CaseIterable {
        /// No representation conforms to the requested type, or none can import the given content.
        case noMatchingRepresentation = 0
        /// A representation conforms but its exporting condition is false for this item.
        case exportingConditionFailed = 1
        /// Every candidate importer failed.
        case importFailed = 2
        /// The exporter failed or cannot export.
        case exportFailed = 3
        /// A file to import or export is missing or unreadable.
        case fileUnavailable = 4
        /// Sender and receiver have no representation in common (network negotiation).
        case noCommonRepresentation = 5
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
    public var errorDescription: String? { message }
    public static var errorDomain: String { "CoreTransferable.TransferableSupportError" }
    public var errorCode: Int { code.rawValue }
    /// What `CustomNSError.errorUserInfo` would hold: the message under `NSLocalizedDescriptionKey`.
    public var errorUserInfo: [String: Any] { ["NSLocalizedDescription": message] }
    public var _domain: String { Self.errorDomain }
    public var _code: Int { errorCode }
}
