import FoundationEssentials

/// A class of tags that describe a type in another tagging system, such as filename extensions or MIME types.
public struct UTTagClass: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible,
    CustomDebugStringConvertible
{
    public let rawValue: String

    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// Filename extensions, without the leading dot (`public.filename-extension`).
    public static var filenameExtension: UTTagClass { UTTagClass(rawValue: "public.filename-extension") }

    /// MIME types (`public.mime-type`).
    public static var mimeType: UTTagClass { UTTagClass(rawValue: "public.mime-type") }

    public var description: String { rawValue }
    public var debugDescription: String { "UTTagClass(\(rawValue))" }

    /// The tag classes that `UTType.tags` exposes; declarations may carry others, which are kept for look-ups only.
    static let standard: Set<UTTagClass> = [.filenameExtension, .mimeType]

    /// Tags of some classes compare case-insensitively; all standard ones do.
    func normalize(_ tag: String) -> String {
        switch self {
        case .filenameExtension: return tag.lowercased()
        case .mimeType: return MIMEType.normalize(tag)
        default: return tag
        }
    }
}

/// MIME type syntax: `type "/" subtype *(";" parameter)`, compared case-insensitively without spaces.
enum MIMEType {
    static func normalize(_ mime: String) -> String {
        mime.split(separator: ";", omittingEmptySubsequences: false)
            .map { $0.trimmingWhitespace().lowercased() }
            .joined(separator: ";")
    }

    /// The type without parameters, or nil when there are none.
    static func essence(_ normalized: String) -> String? {
        guard let semi = normalized.firstIndex(of: ";") else { return nil }
        return String(normalized[..<semi])
    }

    static func isValid(_ mime: String) -> Bool {
        let essence = normalize(mime).split(separator: ";", maxSplits: 1).first.map(String.init) ?? ""
        let parts = essence.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return false }
        return parts.allSatisfy { part in
            !part.isEmpty && part.utf8.count <= 127 && part.unicodeScalars.allSatisfy { tokenCharacters.contains($0) }
        }
    }

    private static let tokenCharacters: Set<Unicode.Scalar> = Set(
        "abcdefghijklmnopqrstuvwxyz0123456789!#$&^_.+-".unicodeScalars)
}

extension StringProtocol {
    /// The text without leading and trailing white space (newlines included).
    package func trimmingWhitespace() -> String {
        guard let first = firstIndex(where: { !$0.isWhitespace }), let last = lastIndex(where: { !$0.isWhitespace })
        else { return "" }
        return String(self[first...last])
    }
}
