import FoundationEssentials

/// A structure that represents a type of data to load, send, or receive.
///
/// A type is identified by its identifier (`public.jpeg`, `com.example.profile`) and sits in a conformance tree:
/// `public.jpeg` conforms to `public.image`, which conforms to `public.data` and `public.content`, and so on.
public struct UTType: Sendable, Hashable, Codable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The type's identifier, e.g. `public.jpeg`.
    public let identifier: String

    /// Wraps an identifier known to be canonical (system statics, registry results).
    init(_uncheckedIdentifier identifier: String) {
        self.identifier = identifier
    }

    // MARK: Creating

    /// The type with this identifier, or nil unless it is declared (or a dynamic identifier).
    public init?(_ identifier: String) {
        let table = TypeRegistry.shared.table
        if let canonical = table.canonicalIdentifier(identifier) {
            self.identifier = canonical
        } else if DynamicType(identifier: identifier) != nil {
            self.identifier = identifier.lowercased()
        } else {
            return nil
        }
    }

    /// The type with this identifier. With `allowUndeclared`, a syntactically valid identifier nobody declared keeps
    /// its identity (neither declared nor dynamic, no conformances or tags); otherwise this is `init?(_:)`.
    public init?(identifier: String, allowUndeclared: Bool) {
        if let known = UTType(identifier) {
            self = known
        } else if allowUndeclared, UTTypeDeclaration.isValidIdentifier(identifier) {
            self.identifier = identifier
        } else {
            return nil
        }
    }

    /// The type for a filename extension (no leading dot), conforming to `supertype`. An unknown but valid extension
    /// yields a dynamic type.
    public init?(filenameExtension: String, conformingTo supertype: UTType = .data) {
        self.init(tag: filenameExtension, tagClass: .filenameExtension, conformingTo: supertype)
    }

    /// The type for a MIME type, conforming to `supertype`. An unknown but valid MIME type yields a dynamic type.
    public init?(mimeType: String, conformingTo supertype: UTType = .data) {
        self.init(tag: mimeType, tagClass: .mimeType, conformingTo: supertype)
    }

    /// The first type whose tag specification holds `tag` in `tagClass` and that conforms to `supertype`; a dynamic
    /// type when none does and the tag is valid.
    public init?(tag: String, tagClass: UTTagClass, conformingTo supertype: UTType?) {
        guard let first = UTType.types(tag: tag, tagClass: tagClass, conformingTo: supertype).first else { return nil }
        self = first
    }

    /// All types whose tag specification holds `tag` in `tagClass` and that conform to `supertype`, in declaration
    /// order; a single dynamic type when none does and the tag is valid; empty for invalid input.
    public static func types(tag: String, tagClass: UTTagClass, conformingTo supertype: UTType?) -> [UTType] {
        let table = TypeRegistry.shared.table
        let matches = table.identifiers(tag: tag, tagClass: tagClass).filter { id in
            guard let supertype else { return true }
            return table.conforms(id, to: supertype.identifier)
        }
        if !matches.isEmpty { return matches.map(UTType.init(_uncheckedIdentifier:)) }
        guard DynamicType.isValidTag(tag, tagClass: tagClass) else { return [] }
        var normalized = tagClass.normalize(tag)
        if tagClass == .mimeType, normalized.contains(":" as Character) {
            normalized = MIMEType.essence(normalized) ?? normalized
        }
        let dynamic = DynamicType(parents: [(supertype ?? .data).identifier], tagClass: tagClass, tag: normalized)
        return [UTType(_uncheckedIdentifier: dynamic.identifier)]
    }

    /// A type the program owns. The active declaration (from a declarations file) is used when there is one;
    /// otherwise the program's code is the declaration: the type is registered, conforming to `parentType` or, when
    /// nil, to `public.data`.
    public init(exportedAs identifier: String, conformingTo parentType: UTType? = nil) {
        let declaration = UTTypeDeclaration(
            identifier: identifier, conformsTo: [(parentType ?? .data).identifier], kind: .exported)
        self.identifier = TypeRegistry.shared.registerImplied(declaration)
    }

    /// A type owned by someone else. A declaration of the same identifier, when present, is used; otherwise the type
    /// is registered as imported, conforming to `parentType` or, when nil, to `public.data`.
    public init(importedAs identifier: String, conformingTo parentType: UTType? = nil) {
        let declaration = UTTypeDeclaration(
            identifier: identifier, conformsTo: [(parentType ?? .data).identifier], kind: .imported)
        self.identifier = TypeRegistry.shared.registerImplied(declaration)
    }

    // MARK: Properties

    /// Tags by class; only filename extensions and MIME types are exposed.
    public var tags: [UTTagClass: [String]] {
        if let declaration = TypeRegistry.shared.table.declaration(of: identifier) {
            return declaration.tags.filter { UTTagClass.standard.contains($0.key) && !$0.value.isEmpty }
        }
        if let dynamic = DynamicType(identifier: identifier), UTTagClass.standard.contains(dynamic.tagClass) {
            return [dynamic.tagClass: [dynamic.tag]]
        }
        return [:]
    }

    /// The preferred filename extension, without a dot.
    public var preferredFilenameExtension: String? { tags[.filenameExtension]?.first }

    /// The preferred MIME type.
    public var preferredMIMEType: String? { tags[.mimeType]?.first }

    /// A description of the type; falls back to the nearest supertype's. Dynamic types have none.
    public var localizedDescription: String? {
        let table = TypeRegistry.shared.table
        var queue = [identifier]
        var seen: Set<String> = []
        while !queue.isEmpty {
            let id = queue.removeFirst()
            guard seen.insert(id).inserted, let declaration = table.declaration(of: id) else { continue }
            if let description = declaration.description { return description }
            queue += declaration.conformsTo
        }
        return nil
    }

    /// The declaration's version, if it gives one.
    public var version: Int? { TypeRegistry.shared.table.declaration(of: identifier)?.version }

    /// The declaration's reference URL, if it gives one.
    public var referenceURL: URL? {
        TypeRegistry.shared.table.declaration(of: identifier)?.referenceURL.flatMap(URL.init(string:))
    }

    /// Whether the type is dynamic (made up for an unclaimed tag).
    public var isDynamic: Bool { DynamicType(identifier: identifier) != nil }

    /// Whether a declaration (system, exported or imported) exists for the type.
    public var isDeclared: Bool { TypeRegistry.shared.table.declaration(of: identifier) != nil }

    /// Whether the type is a public type (`public.` prefix).
    public var isPublic: Bool { identifier.lowercased().hasPrefix("public.") }

    // MARK: Conformance

    /// True when the type equals `type` or conforms to it directly or indirectly.
    public func conforms(to type: UTType) -> Bool {
        TypeRegistry.shared.table.conforms(identifier, to: type.identifier)
    }

    /// True when the type conforms to `type` and is not equal to it.
    public func isSubtype(of type: UTType) -> Bool { self != type && conforms(to: type) }

    /// True when `type` conforms to this type and is not equal to it.
    public func isSupertype(of type: UTType) -> Bool { self != type && type.conforms(to: self) }

    /// Every type this type conforms to, directly or indirectly, itself excluded.
    public var supertypes: Set<UTType> {
        Set(TypeRegistry.shared.table.supertypes(of: identifier).map(UTType.init(_uncheckedIdentifier:)))
    }

    // MARK: Descriptions and coding

    public var description: String { identifier }
    public var debugDescription: String { "\(identifier) (\(localizedDescription ?? "no description"))" }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let identifier = try container.decode(String.self)
        guard let type = UTType(identifier: identifier, allowUndeclared: true) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "'\(identifier)' is not a valid type identifier")
        }
        self = type
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(identifier)
    }
}

extension UTType {
    /// Adds declarations to the process registry (our addition; Apple reads them from Info.plist).
    public static func register(_ declarations: [UTTypeDeclaration]) {
        TypeRegistry.shared.register(declarations)
    }

    /// Loads and registers the declarations in an Info.plist-style file (XML or binary plist) or JSON with the same
    /// keys, returning the declared types. Throws an error naming the file and the entry when it is malformed.
    @discardableResult
    public static func registerDeclarations(contentsOf url: URL) throws -> [UTType] {
        let declarations = try UTTypeDeclaration.load(contentsOf: url)
        register(declarations)
        return declarations.compactMap { UTType($0.identifier) }
    }

    /// The process's current type table (system types plus everything registered), for pure evaluation elsewhere.
    public static var registeredTypes: UTTypeTable { TypeRegistry.shared.table }
}
