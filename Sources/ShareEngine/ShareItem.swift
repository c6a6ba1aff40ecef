import CoreTransferable
import FoundationEssentials
import ShareArchive
import ShareProtocol
import ShareTrust
import UniformTypeIdentifiers

/// One value to send, with what the receiving person sees of it. Any `Transferable` value: it is offered as its
/// representations for the receiving device (those whose exporting condition holds for the value, visible to how
/// this device trusts the peer: `.team` to the owner's devices, `.group` to its group, `.all` to every trusted
/// device, `.ownProcess` never), most faithful first, and only the one the receiver chooses is ever produced.
public struct ShareItem: Sendable {
    private let make: @Sendable (PeerRelation) throws -> OutgoingItem
    private let keep: @Sendable (PeerRelation, URL) throws -> QueuedItem
    /// Who the item really comes from, when this device passes it on for another (`my-watch via phone`).
    var origin: String?
    /// What the receiving person sees first.
    public var preview: SharePreview?

    /// `label`: the item's name as the receiver sees it (by default the value's suggested file name, else its type's
    /// name). `id`: a stable identity, so the same value offered again is the same item (a resume continues it);
    /// by default each `ShareItem` is a new item (a file, a folder: their path).
    public init<T: Transferable>(_ value: T, preview: SharePreview? = nil, label: String? = nil, id: String? = nil) {
        let fixedID = id ?? (value as? Described)?.shareID ?? UUID().uuidString
        self.preview = preview
        make = { [preview] relation in
            try ItemBuilder.item(value, relation: relation, label: label, id: fixedID, preview: preview)
        }
        keep = { [preview] relation, folder in
            try QueuedItem.make(value, relation: relation, label: label, id: fixedID, preview: preview, folder: folder)
        }
    }

    /// The item as the sender driver offers it to a peer with `relation`.
    package func outgoing(for relation: PeerRelation) throws -> OutgoingItem {
        var item = try make(relation)
        if let preview { item.preview = preview.wire }
        item.origin = origin
        return item
    }

    /// The item kept for the agent to send to a peer with `relation` (values exported into `folder`).
    package func queued(for relation: PeerRelation, into folder: URL) throws -> QueuedItem {
        var item = try keep(relation, folder)
        if let preview { item.preview = preview.wire }
        return item
    }
}

/// What a built-in value tells beyond Apple's model, so that its item resumes, shows its size before it is chosen,
/// and streams as an archive where it is one (a file, a folder, a profiles bundle).
protocol Described {
    /// The same value offered again is the same item.
    var shareID: String { get }
    var shareLabel: String { get }
    /// Changes with the content (a file's size, time and inode): a partial of another version is dropped.
    var shareVersion: String? { get }
    /// Facts about the representation of `contentType`, when known before it is produced.
    func facts(for contentType: UTType) throws -> RepresentationFacts?
}

/// A representation as it goes on the wire, and, for an archive, the plan it is streamed from.
struct RepresentationFacts {
    var contentType: UTType
    var size: UInt64?
    var archive: ArchivePlan?
}

/// Builds the offer of a `Transferable` value for one peer: the one way every item is made, for the library, the
/// command line, the agent, the clipboard and the watch.
enum ItemBuilder {
    static func item<T: Transferable>(
        _ value: T, relation: PeerRelation, label: String?, id: String, preview: SharePreview?
    ) throws -> OutgoingItem {
        let described = value as? Described
        var representations: [OutgoingRepresentation] = []
        var types: [UTType] = []
        for entry in value.offeredRepresentations(for: relation) {
            let facts = try described?.facts(for: entry.contentType)
            let name = entry.suggestedFileName(for: value)
            if let plan = facts?.archive {
                let type = facts?.contentType ?? entry.contentType
                let offered = OfferedRepresentation(
                    contentType: type.identifier, kind: .archive, size: plan.streamSize, suggestedFileName: name)
                representations.append(OutgoingRepresentation(offered: offered) { .archive(plan) })
                types.append(type)
                continue
            }
            if entry.payload == .file {
                let type = facts?.contentType ?? entry.contentType
                let offered = OfferedRepresentation(
                    contentType: type.identifier, kind: .file, size: facts?.size, suggestedFileName: name)
                representations.append(
                    OutgoingRepresentation(offered: offered) {
                        guard case .file(let sent) = try await entry.export(value) else {
                            throw ShareFailure(.noInput, "\(T.self) exported bytes where it declared a file")
                        }
                        return .file(sent.file, original: sent.allowAccessingOriginalFile)
                    })
                types.append(type)
                continue
            }
            let offered = OfferedRepresentation(
                contentType: entry.contentType.identifier, kind: .data, size: nil, suggestedFileName: name)
            if entry.contentType.conforms(to: .url) {
                // A URL is evaluated now: a `file:` URL names a place on this machine only and is never offered
                // (the seeds' `Video` proxies its file URL); any other URL is kept as evaluated.
                guard case .data(let data)? = try? blockingAwait({ try await entry.export(value) }),
                    !URLRule.isFileURL(Array(data.prefix(64)))
                else { continue }
                representations.append(OutgoingRepresentation(offered: offered) { .data(data) })
            } else {
                representations.append(
                    OutgoingRepresentation(offered: offered) {
                        switch try await entry.export(value) {
                        case .data(let data): return .data(data)
                        case .file(let sent): return .file(sent.file, original: sent.allowAccessingOriginalFile)
                        }
                    })
            }
            types.append(entry.contentType)
        }
        var item = OutgoingItem(
            id: id, label: label ?? described?.shareLabel ?? value.suggestedFilename ?? "\(T.self)",
            representations: representations, declarations: OutgoingItem.customDeclarations(for: types),
            version: described?.shareVersion)
        item.preview = preview?.wire
        return item
    }
}
