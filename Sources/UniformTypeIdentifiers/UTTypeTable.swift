/// An immutable table of type declarations with their conformance closures and tag indexes.
///
/// It starts from the system table; declarations are layered on top (exported wins over imported, system types cannot
/// be redeclared). It is a plain value with no I/O, so the negotiation code can build one from both peers'
/// declarations and query it without touching the process registry.
public struct UTTypeTable: Sendable {
    struct Entry: Sendable {
        let declaration: UTTypeDeclaration
        /// Every identifier this type conforms to, itself excluded, canonical spelling.
        var supertypes: Set<String>
    }

    private(set) var entries: [String: Entry] = [:]
    /// Lower-cased identifier → canonical identifier.
    private var canonical: [String: String] = [:]
    /// Tag class → normalized tag → identifiers in declaration order.
    private var tagIndex: [UTTagClass: [String: [String]]] = [:]
    /// Declaration order, used for deterministic tag look-ups.
    private var order: [String] = []
    /// Lower-cased identifiers named as a parent by some declaration; a new type named here invalidates closures.
    private var referencedParents: Set<String> = []

    /// The system types alone.
    public static let system: UTTypeTable = {
        var table = UTTypeTable()
        table.insert(
            systemTypeRows.map {
                UTTypeDeclaration(
                    identifier: $0.identifier, conformsTo: $0.parents,
                    tags: [.filenameExtension: $0.extensions, .mimeType: $0.mimeTypes].filter { !$0.value.isEmpty },
                    description: $0.description, kind: .system)
            })
        return table
    }()

    private init() {}

    /// This table with `declarations` layered on top.
    public func adding(_ declarations: [UTTypeDeclaration]) -> UTTypeTable {
        var copy = self
        copy.insert(declarations)
        return copy
    }

    /// The declarations in this table that are not system declarations.
    public var customDeclarations: [UTTypeDeclaration] {
        order.compactMap { entries[$0]?.declaration }.filter { $0.kind != .system }
    }

    /// The declaration of `identifier` (case-insensitive), if any.
    public func declaration(of identifier: String) -> UTTypeDeclaration? {
        canonicalIdentifier(identifier).flatMap { entries[$0]?.declaration }
    }

    /// The canonical spelling and supertypes of a declared identifier in one look-up; nil when it is not declared.
    public func lookup(_ identifier: String) -> (identifier: String, supertypes: Set<String>)? {
        if let entry = entries[identifier] { return (identifier, entry.supertypes) }
        if let id = canonical[identifier.lowercased()], let entry = entries[id] { return (id, entry.supertypes) }
        return nil
    }

    /// The canonical spelling of a declared identifier (declarations compare case-insensitively).
    public func canonicalIdentifier(_ identifier: String) -> String? {
        if entries[identifier] != nil { return identifier }
        return canonical[identifier.lowercased()]
    }

    /// All identifiers `identifier` conforms to, itself excluded. Dynamic identifiers are decoded; unknown ones have
    /// no supertypes.
    public func supertypes(of identifier: String) -> Set<String> {
        if let entry = entries[identifier] { return entry.supertypes }
        if let id = canonical[identifier.lowercased()] { return entries[id]!.supertypes }
        if let dynamic = DynamicType(identifier: identifier) {
            var result: Set<String> = []
            for parent in dynamic.parents {
                let canonicalParent = canonicalIdentifier(parent) ?? parent
                result.insert(canonicalParent)
                result.formUnion(supertypes(of: canonicalParent))
            }
            return result
        }
        return []
    }

    /// Whether `identifier` equals or conforms to `parent`.
    public func conforms(_ identifier: String, to parent: String) -> Bool {
        if identifier == parent { return true }
        let parentID = canonicalIdentifier(parent) ?? parent
        let childID = canonicalIdentifier(identifier) ?? identifier
        return childID == parentID || supertypes(of: childID).contains(parentID)
    }

    /// Identifiers whose declarations carry `tag` in `tagClass`, in declaration order.
    func identifiers(tag: String, tagClass: UTTagClass) -> [String] {
        guard let index = tagIndex[tagClass] else { return [] }
        let normalized = tagClass.normalize(tag)
        if let hits = index[normalized] { return hits }
        if tagClass == .mimeType, let essence = MIMEType.essence(normalized), let hits = index[essence] { return hits }
        return []
    }

    private mutating func insert(_ declarations: [UTTypeDeclaration]) {
        var needsRebuild = false
        var added: [String] = []
        for declaration in declarations {
            if let existingID = canonicalIdentifier(declaration.identifier), let existing = entries[existingID] {
                // System beats everything; exported beats imported; the first of equal rank stays.
                guard rank(declaration.kind) > rank(existing.declaration.kind) else { continue }
                entries[existingID] = nil
                order.removeAll { $0 == existingID }
                canonical[existingID.lowercased()] = nil
                needsRebuild = true
            }
            if referencedParents.contains(declaration.identifier.lowercased()) { needsRebuild = true }
            entries[declaration.identifier] = Entry(declaration: declaration, supertypes: [])
            canonical[declaration.identifier.lowercased()] = declaration.identifier
            order.append(declaration.identifier)
            added.append(declaration.identifier)
            for parent in declaration.conformsTo { referencedParents.insert(parent.lowercased()) }
        }
        if needsRebuild {
            rebuild()
        } else if !added.isEmpty {
            // Nothing existing depends on the new types: compute only their closures and index only their tags.
            computeClosures(for: added)
            indexTags(of: added)
        }
    }

    private func rank(_ kind: UTTypeDeclaration.Kind) -> Int {
        switch kind {
        case .system: return 3
        case .exported: return 2
        case .imported: return 1
        }
    }

    /// Recomputes closures and indexes; declarations change rarely, look-ups are constant time afterwards.
    private mutating func rebuild() {
        for id in order { entries[id]!.supertypes = [] }
        computeClosures(for: order, reset: true)
        tagIndex = [:]
        indexTags(of: order)
    }

    /// Computes the closures of `ids`, reusing closures already computed for their ancestors unless `reset`.
    private mutating func computeClosures(for ids: [String], reset: Bool = false) {
        var closures: [String: Set<String>] = [:]
        let done: Set<String> = reset ? [] : Set(entries.keys).subtracting(ids)
        func closure(_ id: String, visiting: inout Set<String>) -> Set<String> {
            if let computed = closures[id] { return computed }
            if done.contains(id) { return entries[id]?.supertypes ?? [] }
            guard let entry = entries[id], visiting.insert(id).inserted else { return [] }
            var result: Set<String> = []
            for parent in entry.declaration.conformsTo {
                let parentID = canonicalIdentifier(parent) ?? parent
                guard parentID != id else { continue }
                result.insert(parentID)
                result.formUnion(closure(parentID, visiting: &visiting))
            }
            visiting.remove(id)
            result.remove(id)
            closures[id] = result
            return result
        }
        for id in ids {
            var visiting: Set<String> = []
            entries[id]!.supertypes = closure(id, visiting: &visiting)
        }
    }

    private mutating func indexTags(of ids: [String]) {
        for id in ids {
            for (tagClass, tags) in entries[id]!.declaration.tags {
                for tag in tags {
                    let key = tagClass.normalize(tag)
                    if tagIndex[tagClass, default: [:]][key, default: []].contains(id) { continue }
                    tagIndex[tagClass, default: [:]][key, default: []].append(id)
                }
            }
        }
    }
}
