import ShareProtocol
import CoreTransferable
import Foundation
import ShareProfiles

/// What one send is made of, checked before any connection: files and folders (each must exist and be readable),
/// texts, URLs, profiles and the whole catalog. Both `share send` and the agent's outbox build items this way.
public struct SendItems: Sendable {
    public var files: [OutgoingItem] = []
    public var texts: [String] = []
    public var urls: [URL] = []
    public var profiles: [Profile] = []
    public var bundle: ProfilesArchive?
    /// Folder entries left out (special files, links leaving the folder), for the user to see.
    public var skipped: [(path: String, reason: String)] = []

    public init() {}

    /// Gives the n-th file or folder the n-th preview image (at most `ItemPreview.maxImage` bytes): what the
    /// receiver's user sees before accepting, beside the name, type and size.
    public mutating func add(previews: [URL]) throws {
        for (index, url) in previews.enumerated() {
            guard index < files.count else {
                throw ShareFailure(
                    .usage, "\(previews.count) preview images for \(files.count) files; give one per file")
            }
            guard let bytes = PosixFiles.read(url.path, limit: ItemPreview.maxImage + 1) else {
                throw ShareFailure(.noInput, "\(url.path): cannot read the preview image; check the path")
            }
            guard bytes.count <= ItemPreview.maxImage else {
                throw ShareFailure(
                    .usage, "\(url.path) is over \(ItemPreview.maxImage / 1024) KiB; a preview is a small image")
            }
            let type = UTType(filenameExtension: url.pathExtension)
            guard type?.conforms(to: .image) == true else {
                throw ShareFailure(.usage, "\(url.path) is not an image (by its extension); a preview is a small image")
            }
            files[index].preview = ItemPreview(
                title: OutgoingItem.title(files[index].label), image: Array(bytes), imageType: type?.identifier)
        }
    }

    /// Checks and plans the files and folders at `paths`, typed by `type` when given.
    public mutating func add(paths: [URL], type: UTType? = nil) throws {
        for url in paths {
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: url.path, isDirectory: &isFolder), isFolder.boolValue {
                let (item, left) = try OutgoingItem.folder(url)
                skipped += left.map { (url.path + "/" + $0.path, $0.reason) }
                files.append(item)
            } else {
                files.append(try OutgoingItem.file(url, type: type))
            }
        }
    }

    /// An item the agent kept to pass on to its watch: a folder as a folder, anything else as a file of the type it
    /// arrived as, under the label it had, naming where it came from (`laptop via desk`).
    public mutating func add(forwarded: ForwardedItem, via agent: String) throws {
        let url = URL(fileURLWithPath: forwarded.path)
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isFolder) else {
            throw ShareFailure(.noInput, "\(forwarded.label), kept to pass on, is gone from \(forwarded.path)")
        }
        var item: OutgoingItem
        if isFolder.boolValue {
            item = try OutgoingItem.folder(url).item
        } else {
            item = try OutgoingItem.file(url, type: UTType(forwarded.contentType))
            item.label = forwarded.label
        }
        item.origin = "\(forwarded.from) via \(agent)"
        files.append(item)
    }

    /// Looks up profiles by name or id in the catalog at `catalogFile`; `all` adds the whole catalog as a bundle.
    public mutating func add(profiles references: [String], all: Bool, catalogFile: URL) throws {
        guard !references.isEmpty || all else { return }
        let catalog: ProfileCatalog
        do {
            catalog = try ProfileCatalog.load(catalogFile)
        } catch {
            throw ShareFailure(.dataError, "\(error)")
        }
        for reference in references {
            guard let found = catalog.find(reference) else {
                throw ShareFailure(.noInput, "no profile is called '\(reference)' (see: share profile list)")
            }
            profiles.append(found)
        }
        if all {
            guard !catalog.profiles.isEmpty else {
                throw ShareFailure(.noInput, "the profile catalog is empty (add one with: share profile add NAME)")
            }
            bundle = ProfilesArchive(profiles: catalog.profiles)
        }
    }

    /// The items for a peer with `relation`, in order: the profile bundle, files and folders, texts, URLs, profiles.
    public func items(for relation: PeerRelation) throws -> [OutgoingItem] {
        try (bundle.map { [try OutgoingItem.profiles($0, relation: relation)] } ?? []) + files
            // Stable ids: offered again (a held offer, a retry), the same texts are the same items.
            + texts.enumerated().map {
                OutgoingItem.transferable(
                    $1, label: "text", relation: relation, id: OutgoingItem.stableID("text-\($0)-" + $1))
            }
            + urls.enumerated().map {
                OutgoingItem.transferable(
                    $1, label: $1.absoluteString, relation: relation,
                    id: OutgoingItem.stableID("url-\($0)-" + $1.absoluteString))
            }
            + profiles.map {
                // A single profile travels without paths; its media go in a profiles bundle.
                OutgoingItem.transferable(
                    $0.withoutMedia, label: "profile \($0.name)", relation: relation,
                    id: "profile-\($0.id.uuidString)")
            }
    }
}
