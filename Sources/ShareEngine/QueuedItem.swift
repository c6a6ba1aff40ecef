import ShareDisk
import ShareProfileModel
import CoreTransferable
import FoundationEssentials
import ShareProfiles
import ShareProtocol
import ShareTrust
import UniformTypeIdentifiers

/// An item handed to the agent to send later (`ShareClient.SendOptions.queue`, `share send` with an agent running):
/// kept in the job, in `STATE/outbox/`, so it can be sent after the program that made it has exited.
///
/// A file, a folder or a profiles bundle is kept as a reference (its path, or the profiles' ids) and planned again at
/// each attempt (it may have changed or gone, and a resume needs its version then); any other value has every
/// representation the peer may get exported now, into the job's folder.
public struct QueuedItem: Codable, Sendable, Equatable {
    /// How the item is kept: exported representations, or a reference to a file, a folder or profiles.
    public enum Kind: String, Codable, Sendable { case exported, file, folder, profiles }

    /// How the item is kept.
    public var kind: Kind
    /// The item's identity in the offer (a resume finds its partial by it).
    public var id: String
    /// What the receiving person sees as its name.
    public var label: String
    /// A file's or folder's path.
    public var path: String?
    /// A file's content type, when given rather than taken from its extension.
    public var contentType: String?
    /// The ids of the profiles of a bundle.
    public var profiles: [String]?
    /// The version the item had when it was exported (a changed original starts over rather than resuming).
    public var version: String?
    /// The preview as the offer carries it.
    public var preview: ItemPreview?
    /// Declarations of custom types among the representations, so a receiver can match them by conformance.
    public var declarations: [UTTypeDeclaration]?
    /// An exported item's representations, most faithful first: what is offered, and the file holding the bytes.
    public var representations: [Exported]?

    /// One exported representation.
    public struct Exported: Codable, Sendable, Equatable {
        /// Its type, size and suggested name as offered.
        public var offered: OfferedRepresentation
        /// The file in the job's folder that holds its bytes.
        public var path: String
    }

    /// The item as the sender driver offers it now.
    package func outgoing(catalogFile: URL) throws -> OutgoingItem {
        var item: OutgoingItem
        switch kind {
        case .file:
            let type = contentType.flatMap { UTType($0) }
            item = try ItemBuilder.item(
                SharedFile(URL(fileURLWithPath: path ?? ""), contentType: type),
                relation: AccessPolicy.visibilityBeforeTheReceiverIsKnown, label: label,
                id: id, preview: nil)
        case .folder:
            item = try ItemBuilder.item(
                SharedFolder(URL(fileURLWithPath: path ?? "")),
                relation: AccessPolicy.visibilityBeforeTheReceiverIsKnown, label: label, id: id,
                preview: nil)
        case .profiles:
            let catalog = try ProfileCatalog.load(catalogFile)
            let wanted = Set(profiles ?? [])
            let found = catalog.profiles.filter { wanted.contains($0.id.uuidString) }
            guard !found.isEmpty else {
                throw ShareFailure(.noInput, "the profiles of \(label) are gone from the catalog")
            }
            item = try ItemBuilder.item(
                ProfilesArchive(profiles: found), relation: AccessPolicy.visibilityBeforeTheReceiverIsKnown,
                label: label, id: id, preview: nil)
        case .exported:
            let representations = try (self.representations ?? []).map { exported -> OutgoingRepresentation in
                let url = URL(fileURLWithPath: exported.path)
                guard FileManager.default.fileExists(atPath: url.path) else {
                    throw ShareFailure(.noInput, "\(label), kept to send later, is gone from \(exported.path)")
                }
                return OutgoingRepresentation(offered: exported.offered) { .file(url) }
            }
            item = OutgoingItem(
                id: id, label: label, representations: representations, declarations: declarations ?? [],
                version: version)
        }
        item.preview = preview ?? item.preview
        return item
    }

    /// Keeps `value` for the agent: a file, folder or bundle by reference; anything else exported into `folder`
    /// (each representation the peer with `relation` may get: the bytes of data, a copy of a file unless the value
    /// lets its original file be read).
    static func make<T: Transferable>(
        _ value: T, relation: PeerRelation, label: String?, id: String, preview: SharePreview?, folder: URL
    ) throws -> QueuedItem {
        var queued = QueuedItem(kind: .exported, id: id, label: label ?? "")
        queued.preview = preview?.wire
        switch value {
        case let file as SharedFile:
            queued.kind = .file
            queued.path = file.url.path
            queued.contentType = file.contentType.identifier
            queued.label = label ?? file.label
            return queued
        case let folder as SharedFolder:
            queued.kind = .folder
            queued.path = folder.url.path
            queued.label = label ?? folder.label
            return queued
        case let bundle as ProfilesArchive:
            queued.kind = .profiles
            queued.profiles = bundle.profiles.map(\.id.uuidString)
            queued.label = label ?? bundle.shareLabel
            return queued
        default:
            break
        }
        let item = try ItemBuilder.item(value, relation: relation, label: label, id: id, preview: preview)
        try DevicePaths.ensurePrivateDirectory(folder)
        var exported: [Exported] = []
        for (index, representation) in item.representations.enumerated() {
            let target = folder.appendingPathComponent("\(id.prefix(40))-\(index)")
            var offered = representation.offered
            switch try blockingAwait(representation.produce) {
            case .data(let data):
                try AtomicFile.write(data, to: target, mode: 0o600, durable: false)
            case .file(let url, let original):
                if original {
                    exported.append(Exported(offered: offered, path: url.path))
                    continue
                }
                PathOperations.removeIfPresent(target.path)
                try PathOperations.copy(url.path, to: target.path)
                try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: target.path)
            case .archive:
                throw ShareFailure(.noInput, "\(item.label) streams as an archive; it cannot be kept to send later")
            }
            // Once exported, the size is known: the queued item resumes like a file.
            offered.size = (try? FileManager.default.attributesOfItem(atPath: target.path)[.size] as? UInt64) ?? nil
            exported.append(Exported(offered: offered, path: target.path))
        }
        queued.label = item.label
        queued.version = UUID().uuidString
        queued.declarations = item.declarations
        queued.representations = exported
        queued.preview = item.preview
        return queued
    }

    init(kind: Kind, id: String, label: String) {
        self.kind = kind
        self.id = id
        self.label = label
    }
}
