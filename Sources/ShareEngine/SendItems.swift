import ShareProfileModel
import CoreTransferable
import FoundationEssentials
import ShareNet
import ShareProfiles
import ShareProtocol
import ShareTrust
import UniformTypeIdentifiers

/// What the `share` command, a queued job of an earlier version, or the clipboard describes: files and folders (each
/// must exist and be readable), texts, URLs, profiles and the whole catalog, made into `ShareItem`s — the same values
/// a Swift program sends — checked before any connection.
package struct SendItems: Sendable {
    /// Files and folders, in order.
    package var files: [ShareItem] = []
    /// Their labels, in order (the n-th `--preview` goes with the n-th).
    package private(set) var fileLabels: [String] = []
    package var texts: [String] = []
    package var urls: [URL] = []
    package var profiles: [Profile] = []
    package var bundle: ProfilesArchive?
    /// Folder entries left out (special files, links leaving the folder), for the user to see.
    package var skipped: [(path: String, reason: String)] = []

    package init() {}

    /// Gives the n-th file or folder the n-th preview image (at most `ItemPreview.maxImage` bytes): what the
    /// receiver's user sees before accepting, beside the name, type and size.
    package mutating func add(previews: [URL]) throws {
        for (index, url) in previews.enumerated() {
            guard index < files.count else {
                throw ShareFailure(
                    .usage, "\(previews.count) preview images for \(files.count) files; give one per file")
            }
            // Read with room for the whole of a large file, so that one too large is told as such.
            guard let bytes = PosixFiles.read(url.path, limit: 64 << 20) else {
                throw ShareFailure(.noInput, "\(url.path): cannot read the preview image; check the path")
            }
            guard bytes.count <= ItemPreview.maxImage else {
                throw ShareFailure(
                    .usage, "\(url.path) is over \(ItemPreview.maxImage / 1024) KiB; a preview is a small image")
            }
            guard let type = UTType(filenameExtension: url.pathExtension), type.conforms(to: .image) else {
                throw ShareFailure(.usage, "\(url.path) is not an image (by its extension); a preview is a small image")
            }
            files[index].preview = SharePreview(
                fileLabels[index], image: SharePreview.Image(data: Data(bytes), contentType: type))
        }
    }

    /// Checks and plans the files and folders at `paths`, typed by `type` when given. `labels` replaces their names.
    package mutating func add(paths: [URL], type: UTType? = nil, labels: [String?] = []) throws {
        for (index, url) in paths.enumerated() {
            let label = index < labels.count ? labels[index] : nil
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: url.path, isDirectory: &isFolder), isFolder.boolValue {
                let folder = try SharedFolder(url)
                skipped += folder.skipped.map { (url.path + "/" + $0.path, $0.reason) }
                files.append(ShareItem(folder, label: label))
                fileLabels.append(label ?? folder.label)
            } else {
                var file = try SharedFile(url, contentType: type)
                if let label { file.label = label }
                files.append(ShareItem(file))
                fileLabels.append(file.label)
            }
        }
    }

    /// Text read from standard input up to this size travels as a text (the receiver prints it); more, as a file.
    package static let standardInputTextLimit = 1 << 20

    /// What was read from standard input (spooled to `file`). Without `type`, it is typed by its content: valid UTF-8
    /// text (up to `standardInputTextLimit`) is sent as a text, which the receiver prints, as `--text` is; anything
    /// else as a file of the type its first bytes show (a tar stays a tar). Returns whether it became a text (the
    /// spool is then no longer needed).
    @discardableResult
    package mutating func add(standardInput file: URL, type: UTType?) throws -> Bool {
        let head = PosixFiles.readHead(file.path, limit: Self.standardInputTextLimit + 1) ?? []
        if type == nil, head.count <= Self.standardInputTextLimit, !head.isEmpty, !head.contains(0),
            let text = String(validating: head, as: UTF8.self)
        {
            texts.append(text)
            return true
        }
        let type = type ?? ContentSniffer.type(of: head)
        var value = try SharedFile(file, contentType: type)
        value.label = "standard input"
        value.fileName = "stdin" + (type.preferredFilenameExtension.map { ".\($0)" } ?? "")
        files.append(ShareItem(value))
        fileLabels.append(value.label)
        return false
    }

    /// An item the agent kept to pass on to its watch: a folder as a folder, anything else as a file of the type it
    /// arrived as, under the label it had, naming where it came from (`laptop via desk`).
    package mutating func add(forwarded: ForwardedItem, via agent: String) throws {
        let url = URL(fileURLWithPath: forwarded.path)
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isFolder) else {
            throw ShareFailure(.noInput, "\(forwarded.label), kept to pass on, is gone from \(forwarded.path)")
        }
        var item: ShareItem
        if isFolder.boolValue {
            item = ShareItem(try SharedFolder(url))
        } else {
            var file = try SharedFile(url, contentType: UTType(forwarded.contentType))
            file.label = forwarded.label
            item = ShareItem(file)
        }
        item.origin = "\(forwarded.from) via \(agent)"
        files.append(item)
        fileLabels.append(forwarded.label)
    }

    /// Looks up profiles by name or id in the catalog at `catalogFile`; `all` adds the whole catalog as a bundle.
    package mutating func add(profiles references: [String], all: Bool, catalogFile: URL) throws {
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

    /// Everything, in order: the profile bundle, files and folders, texts, URLs, profiles.
    package var shareItems: [ShareItem] {
        (bundle.map { [ShareItem($0)] } ?? []) + files
            // Stable ids: offered again (a held offer, a retry), the same texts are the same items.
            + texts.enumerated().map {
                ShareItem($1, label: "text", id: OutgoingItem.stableID("text-\($0)-" + $1))
            }
            + urls.enumerated().map {
                ShareItem($1, label: $1.absoluteString, id: OutgoingItem.stableID("url-\($0)-" + $1.absoluteString))
            }
            // A single profile travels without paths; its media go in a profiles bundle.
            + profiles.map {
                ShareItem($0.withoutMedia, label: "profile \($0.name)", id: "profile-\($0.id.uuidString)")
            }
    }

    /// The items for a peer with `relation`.
    package func items(for relation: PeerRelation) throws -> [OutgoingItem] {
        try shareItems.map { try $0.outgoing(for: relation) }
    }
}
