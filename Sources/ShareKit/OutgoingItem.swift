import CoreTransferable
import Foundation
import ShareArchive
import ShareProfiles
import ShareProtocol
import ShareTLS

/// What an exporter produced for the chosen representation.
public enum ProducedPayload: Sendable {
    case data(Data)
    case file(URL)
    /// A tar stream produced as it is sent.
    case archive(ArchivePlan)
}

/// One representation a sender can offer, with the closure that produces it (run only if it is chosen).
public struct OutgoingRepresentation: Sendable {
    public var offered: OfferedRepresentation
    public var produce: @Sendable () async throws -> ProducedPayload

    public init(offered: OfferedRepresentation, produce: @escaping @Sendable () async throws -> ProducedPayload) {
        self.offered = offered
        self.produce = produce
    }
}

/// An item to send: a stable id, a label, ordered representations, declarations of custom types, a version.
public struct OutgoingItem: Sendable {
    public var id: String
    public var label: String
    public var representations: [OutgoingRepresentation]
    public var declarations: [UTTypeDeclaration]
    public var version: String?
    /// Who the item really comes from, when this device passes it on for another (`laptop via desk`).
    public var origin: String?
    /// What the receiver's user sees before accepting (a title and, optionally, a small image); nil: the label.
    public var preview: ItemPreview?

    public init(
        id: String, label: String, representations: [OutgoingRepresentation],
        declarations: [UTTypeDeclaration] = [], version: String? = nil
    ) {
        self.id = id
        self.label = label
        self.representations = representations
        self.declarations = declarations
        self.version = version
    }

    public var offerItem: OfferItem {
        OfferItem(
            id: id, label: label, representations: representations.map(\.offered), declarations: declarations,
            version: version, origin: origin, preview: preview ?? ItemPreview(title: Self.title(label)))
    }

    /// A preview title from any text: no control characters, at most `ItemPreview.maxTitle` bytes.
    public static func title(_ text: String) -> String {
        var scalars = String.UnicodeScalarView()
        var bytes = 0
        for scalar in text.unicodeScalars where scalar.properties.generalCategory != .control {
            bytes += String(scalar).utf8.count
            if bytes > ItemPreview.maxTitle { break }
            scalars.append(scalar)
        }
        return String(scalars)
    }

    /// A file from disk, typed by its extension (dynamic when unknown) or by `type`. Its id is stable for the same
    /// path, and its version (size, modification time, inode) tells a receiver whether a partial still matches.
    public static func file(_ url: URL, type: UTType? = nil) throws -> OutgoingItem {
        let path = url.standardizedFileURL.resolvingSymlinksInPath().path
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw ShareFailure(.noInput, "\(url.path): \(String(cString: strerror(errno))); check the path")
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw ShareFailure(.noInput, "\(url.path) is not a regular file")
        }
        guard access(path, R_OK) == 0 else { throw ShareFailure(.noInput, "\(url.path) is not readable") }
        let name = url.lastPathComponent
        let contentType =
            type ?? (url.pathExtension.isEmpty ? nil : UTType(filenameExtension: url.pathExtension)) ?? .data
        let version = fileVersion(info)
        let offered = OfferedRepresentation(
            contentType: contentType.identifier, kind: .file, size: UInt64(info.st_size), suggestedFileName: name)
        let fileURL = URL(fileURLWithPath: path)
        // The file itself only: its `file:` URL names a place on this machine and never crosses to another.
        let representations = [OutgoingRepresentation(offered: offered) { .file(fileURL) }]
        return OutgoingItem(
            id: stableID("file:" + path), label: name, representations: representations,
            declarations: customDeclarations(for: [contentType]), version: version)
    }

    /// A folder: first as a tar stream (extracted as it arrives), then as a text listing of its entries for a
    /// receiver that takes only text. Entries that cannot travel (special files, links leaving the folder) are
    /// listed in `skipped`.
    public static func folder(_ url: URL) throws -> (item: OutgoingItem, skipped: [(path: String, reason: String)]) {
        let path = url.standardizedFileURL.resolvingSymlinksInPath().path
        let plan: ArchivePlan
        do {
            plan = try ArchivePlan.folder(URL(fileURLWithPath: path))
        } catch let error as ArchiveError {
            throw ShareFailure(.noInput, error.message)
        }
        let name = url.standardizedFileURL.lastPathComponent
        let listing = Data(plan.listing.utf8)
        let archive = OfferedRepresentation(
            contentType: UTType.tarArchive.identifier, kind: .archive, size: plan.streamSize, suggestedFileName: name)
        let text = OfferedRepresentation(
            contentType: UTType.utf8PlainText.identifier, kind: .data, size: UInt64(listing.count),
            suggestedFileName: name + ".txt")
        let item = OutgoingItem(
            id: stableID("folder:" + path), label: name + "/",
            representations: [
                OutgoingRepresentation(offered: archive) { .archive(plan) },
                OutgoingRepresentation(offered: text) { .data(listing) },
            ],
            declarations: customDeclarations(for: [.tarArchive]), version: plan.version)
        return (item, plan.skipped)
    }

    /// Profiles shared together: the bundle streamed as a tar archive (manifest, portraits, videos), then the
    /// archive's other representations for this peer (CSV when nothing needs a file, then the names).
    public static func profiles(_ archive: ProfilesArchive, relation: PeerRelation) throws -> OutgoingItem {
        let plan: ArchivePlan
        do {
            plan = try archive.plan()
        } catch {
            throw ShareFailure(.noInput, "cannot bundle the profiles: \(error)")
        }
        let bundle = OfferedRepresentation(
            contentType: UTType.shareProfilesArchive.identifier, kind: .archive, size: plan.streamSize,
            suggestedFileName: "Profiles")
        var item = transferable(archive, label: "\(archive.profiles.count) profiles", relation: relation)
        item.representations.removeAll { $0.offered.contentType == UTType.shareProfilesArchive.identifier }
        item.representations.insert(OutgoingRepresentation(offered: bundle) { .archive(plan) }, at: 0)
        item.declarations = customDeclarations(for: item.representations.compactMap { UTType($0.offered.contentType) })
        return item
    }

    static func fileVersion(_ info: stat) -> String {
        "\(info.st_size)-\(info.st_mtim.tv_sec)\(String(format: "%09d", info.st_mtim.tv_nsec))-\(info.st_ino)"
    }

    /// The current version string of a file, or nil if it is gone.
    static func currentVersion(of url: URL) -> String? {
        var info = stat()
        guard stat(url.path, &info) == 0 else { return nil }
        return fileVersion(info)
    }

    /// Any `Transferable` value: its representations visible to a peer with `relation`, in order. A representation
    /// that is a URL is evaluated now: a `file:` URL names a place on this machine only, and is left out of every
    /// offer (the seeds' `Video` proxies its file URL); any other URL is kept as evaluated.
    public static func transferable<T: Transferable>(
        _ value: T, label: String, relation: PeerRelation,
        id: String = UUID().uuidString
    ) -> OutgoingItem {
        var representations: [OutgoingRepresentation] = []
        var types: [UTType] = []
        for entry in value.offeredRepresentations(for: relation) {
            let offered = OfferedRepresentation(
                contentType: entry.contentType.identifier, kind: entry.payload == .file ? .file : .data,
                size: nil, suggestedFileName: entry.suggestedFileName(for: value))
            if entry.payload != .file, entry.contentType.conforms(to: .url) {
                guard case .data(let data)? = try? blockingAwait({ try await entry.export(value) }),
                    !URLRule.isFileURL(Array(data.prefix(64)))
                else { continue }
                representations.append(OutgoingRepresentation(offered: offered) { .data(data) })
                types.append(entry.contentType)
                continue
            }
            representations.append(
                OutgoingRepresentation(offered: offered) {
                    switch try await entry.export(value) {
                    case .data(let data): return .data(data)
                    case .file(let sent): return .file(sent.file)
                    }
                })
            types.append(entry.contentType)
        }
        return OutgoingItem(
            id: id, label: label, representations: representations,
            declarations: customDeclarations(for: types), version: nil)
    }

    /// Declarations of the non-system types among `types` and their custom ancestors, so the receiver can evaluate
    /// conformance for types it has never seen.
    static func customDeclarations(for types: [UTType]) -> [UTTypeDeclaration] {
        let table = UTType.registeredTypes
        var result: [UTTypeDeclaration] = []
        var seen: Set<String> = []
        var pending = types.map(\.identifier)
        while let id = pending.popLast() {
            guard seen.insert(id).inserted, let declaration = table.declaration(of: id), declaration.kind != .system
            else { continue }
            result.append(declaration)
            pending += declaration.conformsTo
        }
        return result
    }

    /// 32 hex characters derived from `text`.
    static func stableID(_ text: String) -> String {
        String(SHA256Hasher.hash(Array(text.utf8)).hexString.prefix(32))
    }
}
