import FoundationEssentials

/// How a receiving peer relates to the sender; it decides which visibilities reach the peer.
public enum PeerRelation: Sendable, Hashable, Codable {
    /// The same process (nothing leaves it).
    case sameProcess
    /// One of the owner's own devices.
    case ownDevice
    /// A device in the named group.
    case group(String)
    /// Any other trusted device.
    case trusted

    /// The visibility scope of the peer: a representation reaches it when `visibility.isVisible(to: scope)`.
    public var scope: TransferRepresentationVisibility {
        switch self {
        case .sameProcess: return .ownProcess
        case .ownDevice: return .team
        case .group: return .group
        case .trusted: return .all
        }
    }
}

/// One entry of a receiver's accept list: a content type it understands, with an optional size limit.
public struct AcceptedType: Sendable, Hashable, Codable {
    public var contentType: String
    public var maxSize: UInt64?

    public init(_ contentType: UTType, maxSize: UInt64? = nil) {
        self.contentType = contentType.identifier
        self.maxSize = maxSize
    }

    public init(identifier: String, maxSize: UInt64? = nil) {
        self.contentType = identifier
        self.maxSize = maxSize
    }
}

/// A receiver's ordered accept list, most wanted first, with declarations of the custom types it knows.
public struct AcceptList: Sendable, Hashable, Codable {
    public var entries: [AcceptedType]
    public var declarations: [UTTypeDeclaration]

    public init(_ entries: [AcceptedType], declarations: [UTTypeDeclaration] = []) {
        self.entries = entries
        self.declarations = declarations
    }
}

/// One representation a sender offers: what it is, how it travels, how big it is when known.
public struct OfferedRepresentation: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable {
        case data, file, archive
    }

    public var contentType: String
    public var kind: Kind
    public var size: UInt64?
    public var suggestedFileName: String?

    public init(contentType: String, kind: Kind, size: UInt64? = nil, suggestedFileName: String? = nil) {
        self.contentType = contentType
        self.kind = kind
        self.size = size
        self.suggestedFileName = suggestedFileName
    }
}

/// The outcome of a successful negotiation.
public struct NegotiationChoice: Sendable, Hashable {
    /// Index into the offered representations.
    public let representationIndex: Int
    /// Index into the receiver's accept list.
    public let acceptIndex: Int
    /// One sentence saying why this representation was chosen.
    public let reason: String
}

/// No offered representation fits the receiver's accept list; says what was offered and what is accepted.
public struct NegotiationFailure: Error, Sendable, Hashable, CustomStringConvertible, LocalizedError {
    public let offered: [String]
    public let accepted: [String]
    /// Representations that matched a type but exceeded its size limit.
    public let tooLarge: [String]

    public var description: String {
        var text = "no common representation: offered \(Self.list(offered)); receiver accepts \(Self.list(accepted))"
        if !tooLarge.isEmpty { text += "; over the size limit: " + tooLarge.joined(separator: ", ") }
        return text
    }
    public var errorDescription: String? { description }

    static func list(_ items: [String]) -> String { items.isEmpty ? "nothing" : items.joined(separator: ", ") }
}

/// Chooses, for a receiver's accept list, the best representation a sender offers: walk the accept list in order;
/// for each entry take the sender's first representation (in sender order) whose type conforms to it and fits its
/// size limit. Conformance uses the system types, the receiver's declarations and the sender's declarations (the
/// receiver's knowledge wins where both describe a type). Pure: no I/O, no global state beyond the given table.
public struct Negotiator: Sendable {
    public let accept: AcceptList
    private let table: UTTypeTable
    /// Canonical accept identifier → its positions in the accept list (an identifier may appear twice, with limits).
    private let positions: [String: [Int]]

    /// Prepares negotiation for one receiver; `table` is the receiver's own type knowledge (the process registry by
    /// default) and the accept list's declarations are layered on top of it.
    public init(accept: AcceptList, table: UTTypeTable = UTType.registeredTypes) {
        self.accept = accept
        let known = accept.declarations.filter { table.canonicalIdentifier($0.identifier) == nil }
        let combined = known.isEmpty ? table : table.adding(known)
        self.table = combined
        var positions: [String: [Int]] = [:]
        for (index, entry) in accept.entries.enumerated() {
            positions[combined.canonicalIdentifier(entry.contentType) ?? entry.contentType, default: []]
                .append(index)
        }
        self.positions = positions
    }

    /// The choice for `offered`, or why there is none.
    public func choose(
        from offered: [OfferedRepresentation], senderDeclarations: [UTTypeDeclaration] = []
    ) -> Result<NegotiationChoice, NegotiationFailure> {
        let senderTypes =
            senderDeclarations.isEmpty
            ? [:]
            : Dictionary(senderDeclarations.map { ($0.identifier.lowercased(), $0) }, uniquingKeysWith: { a, _ in a })
        // Smallest accept position first; for it, the earliest offered representation (sender order).
        var best: (position: Int, index: Int, matched: String)?
        var tooLarge: [String] = []
        for (index, representation) in offered.enumerated() {
            let known = table.lookup(representation.contentType)
            let id = known?.identifier ?? representation.contentType
            func consider(_ type: String) {
                guard let hits = positions[type] else { return }
                for position in hits where position < (best?.position ?? .max) {
                    if let limit = accept.entries[position].maxSize, let size = representation.size, size > limit {
                        tooLarge.append("\(representation.contentType) (\(size) bytes > \(limit) for \(type))")
                        continue
                    }
                    best = (position, index, type)
                }
            }
            consider(id)
            for parent in known?.supertypes ?? supertypes(of: id, senderTypes: senderTypes) where parent != id {
                consider(parent)
            }
        }
        if let best {
            let representation = offered[best.index]
            let how = representation.contentType == best.matched ? "is" : "conforms to"
            return .success(
                NegotiationChoice(
                    representationIndex: best.index, acceptIndex: best.position,
                    reason: "receiver's choice #\(best.position + 1) \(best.matched): sender's representation "
                        + "#\(best.index + 1) \(representation.contentType) \(how) it"))
        }
        return .failure(
            NegotiationFailure(
                offered: offered.map(\.contentType),
                accepted: accept.entries.map { entry in
                    entry.maxSize.map { "\(entry.contentType) (≤ \($0) bytes)" } ?? entry.contentType
                },
                tooLarge: tooLarge))
    }

    /// Supertypes from the receiver's table; types it does not know are described by the sender's declarations.
    private func supertypes(of id: String, senderTypes: [String: UTTypeDeclaration]) -> Set<String> {
        if senderTypes.isEmpty { return table.supertypes(of: id) }
        guard senderTypes[id.lowercased()] != nil else { return table.supertypes(of: id) }
        var result: Set<String> = []
        var pending = [id]
        var steps = 0
        // Bounded walk: a hostile peer may declare cycles or very deep chains.
        while let current = pending.popLast(), steps < 1_000 {
            steps += 1
            if let known = table.lookup(current) {
                result.formUnion(known.supertypes)
                continue
            }
            for parent in senderTypes[current.lowercased()]?.conformsTo ?? [] {
                let canonicalParent = table.canonicalIdentifier(parent) ?? parent
                if result.insert(canonicalParent).inserted { pending.append(canonicalParent) }
            }
        }
        result.remove(id)
        return result
    }
}

extension ResolvedTransferRepresentation {
    /// Whether this representation may be offered to a peer with `relation`.
    public func isVisible(to relation: PeerRelation) -> Bool { visibility.isVisible(to: relation.scope) }
}

extension Transferable {
    /// The representations this value offers to a peer with `relation`, in order: exportable for this value
    /// (conditions hold) and visible to the peer. `.ownProcess` ones never appear for a remote peer.
    public func offeredRepresentations(for relation: PeerRelation) -> [ResolvedTransferRepresentation<Self>] {
        ResolvedRepresentations.of(Self.self).filter { $0.isVisible(to: relation) && $0.isExportable(for: self) }
    }
}
