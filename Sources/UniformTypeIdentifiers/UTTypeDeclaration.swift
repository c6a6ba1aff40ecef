import FoundationEssentials

/// A type declaration as found in an Info.plist (`UTExportedTypeDeclarations` / `UTImportedTypeDeclarations`).
///
/// The same value travels between peers so that a receiver can evaluate conformance for types it has never seen.
public struct UTTypeDeclaration: Hashable, Sendable, Codable {
    /// Whether the declaring party owns the type (exported) or only uses it (imported).
    public enum Kind: String, Hashable, Sendable, Codable {
        case system, exported, imported
    }

    public var identifier: String
    public var conformsTo: [String]
    public var tags: [UTTagClass: [String]]
    public var description: String?
    public var referenceURL: String?
    public var version: Int?
    public var kind: Kind

    public init(
        identifier: String, conformsTo: [String] = [], tags: [UTTagClass: [String]] = [:],
        description: String? = nil, referenceURL: String? = nil, version: Int? = nil, kind: Kind = .exported
    ) {
        self.identifier = identifier
        self.conformsTo = conformsTo
        self.tags = tags
        self.description = description
        self.referenceURL = referenceURL
        self.version = version
        self.kind = kind
    }

    /// Identifier syntax: reverse-DNS made of letters, digits, `-` and `.` (Apple's rule), at most 255 bytes.
    public static func isValidIdentifier(_ identifier: String) -> Bool {
        guard !identifier.isEmpty, identifier.utf8.count <= 255 else { return false }
        guard identifier.first != ".", identifier.last != ".", identifier.firstRange(of: "..") == nil else {
            return false
        }
        return identifier.unicodeScalars.allSatisfy { scalar in
            switch scalar {
            case "a"..."z", "A"..."Z", "0"..."9", "-", ".": return true
            default: return false
            }
        }
    }
}

/// The error thrown when a declarations file cannot be used; it names the file and the entry.
public struct UTTypeDeclarationError: Error, CustomStringConvertible, LocalizedError, Sendable {
    public let file: String
    public let entry: String?
    public let reason: String

    public var description: String {
        if let entry { return "\(file): \(entry): \(reason)" }
        return "\(file): \(reason)"
    }
    public var errorDescription: String? { description }
}

extension UTTypeDeclaration {
    /// Reads `UTExportedTypeDeclarations` and `UTImportedTypeDeclarations` from an XML or binary property list, or
    /// from JSON with the same keys. Exported declarations come before imported ones.
    public static func load(contentsOf url: URL) throws -> [UTTypeDeclaration] {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw UTTypeDeclarationError(
                file: url.path, entry: nil, reason: "cannot be read (\(error))")
        }
        return try parse(data, name: url.path)
    }

    /// Parses declarations from property-list or JSON bytes; `name` is used in error messages.
    public static func parse(_ data: Data, name: String) throws -> [UTTypeDeclaration] {
        let root: Any
        let trimmedFirst = data.first(where: { !($0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09) })
        do {
            if trimmedFirst == UInt8(ascii: "{") {
                root = try JSONDecoder().decode(PropertyValue.self, from: data).value
            } else {
                root = try PropertyListDecoder().decode(PropertyValue.self, from: data).value
            }
        } catch {
            throw UTTypeDeclarationError(
                file: name, entry: nil, reason: "is neither a property list nor JSON (\(error))")
        }
        guard let dictionary = root as? [String: Any] else {
            throw UTTypeDeclarationError(file: name, entry: nil, reason: "top level must be a dictionary")
        }
        var result: [UTTypeDeclaration] = []
        for (key, kind) in [("UTExportedTypeDeclarations", Kind.exported), ("UTImportedTypeDeclarations", .imported)] {
            guard let value = dictionary[key] else { continue }
            guard let entries = value as? [Any] else {
                throw UTTypeDeclarationError(file: name, entry: key, reason: "must be an array of dictionaries")
            }
            for (index, entry) in entries.enumerated() {
                result.append(try parseEntry(entry, kind: kind, file: name, label: "\(key)[\(index)]"))
            }
        }
        return result
    }

    private static func parseEntry(_ entry: Any, kind: Kind, file: String, label: String) throws -> UTTypeDeclaration {
        func fail(_ reason: String, _ label: String) -> UTTypeDeclarationError {
            UTTypeDeclarationError(file: file, entry: label, reason: reason)
        }
        guard let dict = entry as? [String: Any] else { throw fail("must be a dictionary", label) }
        guard let identifier = dict["UTTypeIdentifier"] as? String else {
            throw fail("UTTypeIdentifier is missing or not a string", label)
        }
        let named = "\(label) (\(identifier))"
        guard isValidIdentifier(identifier) else {
            throw fail("UTTypeIdentifier is not a valid identifier (letters, digits, '-' and '.')", named)
        }
        let conformsTo = try stringList(dict["UTTypeConformsTo"], key: "UTTypeConformsTo") { fail($0, named) }
        for parent in conformsTo where !isValidIdentifier(parent) {
            throw fail("UTTypeConformsTo names an invalid identifier '\(parent)'", named)
        }
        var tags: [UTTagClass: [String]] = [:]
        if let spec = dict["UTTypeTagSpecification"] {
            guard let spec = spec as? [String: Any] else {
                throw fail("UTTypeTagSpecification must be a dictionary", named)
            }
            for (tagClass, value) in spec {
                var list = try stringList(value, key: "UTTypeTagSpecification.\(tagClass)") { fail($0, named) }
                if tagClass == UTTagClass.filenameExtension.rawValue {
                    list = list.map { $0.hasPrefix(".") ? String($0.dropFirst()) : $0 }
                }
                if !list.isEmpty { tags[UTTagClass(rawValue: tagClass)] = list }
            }
        }
        let description = dict["UTTypeDescription"]
        if description != nil, !(description is String) { throw fail("UTTypeDescription must be a string", named) }
        let reference = dict["UTTypeReferenceURL"]
        if reference != nil, !(reference is String) { throw fail("UTTypeReferenceURL must be a string", named) }
        return UTTypeDeclaration(
            identifier: identifier, conformsTo: conformsTo, tags: tags, description: description as? String,
            referenceURL: reference as? String, version: dict["UTTypeVersion"] as? Int, kind: kind)
    }

    /// A string or an array of strings (Apple allows a scalar where an array is expected).
    private static func stringList(
        _ value: Any?, key: String, fail: (String) -> UTTypeDeclarationError
    ) throws -> [String] {
        switch value {
        case nil: return []
        case let string as String: return [string]
        case let array as [Any]:
            return try array.map {
                guard let string = $0 as? String else { throw fail("\(key) must hold only strings") }
                return string
            }
        default: throw fail("\(key) must be a string or an array of strings")
        }
    }
}

/// Any property-list or JSON value, decoded with the Codable decoders (which need no more than FoundationEssentials)
/// and handed to the parser as plain Swift values: `String`, `Bool`, `Int`, `Double`, `[Any]`, `[String: Any]`.
private struct PropertyValue: Decodable {
    let value: Any

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let text = try? container.decode(String.self) {
            value = text
        } else if let flag = try? container.decode(Bool.self) {
            value = flag
        } else if let number = try? container.decode(Int.self) {
            value = number
        } else if let number = try? container.decode(Double.self) {
            value = number
        } else if let array = try? container.decode([PropertyValue].self) {
            value = array.map(\.value)
        } else if let dictionary = try? container.decode([String: PropertyValue].self) {
            value = dictionary.mapValues(\.value)
        } else if container.decodeNil() {
            value = Optional<Any>.none as Any
        } else {
            // A date or data value: nothing a type declaration uses.
            value = ()
        }
    }
}
