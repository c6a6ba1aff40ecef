import ShareProfileModel
import CoreTransferable
import FoundationEssentials
import ShareText
import ShareArchive
import ShareProfiles
import ShareProtocol
import ShareTLS
import ShareTrust
import UniformTypeIdentifiers

/// What an exporter produced for the chosen representation.
package enum ProducedPayload: Sendable {
    case data(Data)
    /// A file; `original`: the value's own file, which may be read where it is (not a copy made for the transfer).
    case file(URL, original: Bool = false)
    /// A tar stream produced as it is sent.
    case archive(ArchivePlan)
}

/// One representation a sender can offer, with the closure that produces it (run only if it is chosen).
package struct OutgoingRepresentation: Sendable {
    package var offered: OfferedRepresentation
    package var produce: @Sendable () async throws -> ProducedPayload

    package init(offered: OfferedRepresentation, produce: @escaping @Sendable () async throws -> ProducedPayload) {
        self.offered = offered
        self.produce = produce
    }
}

/// An item to send: a stable id, a label, ordered representations, declarations of custom types, a version.
package struct OutgoingItem: Sendable {
    package var id: String
    package var label: String
    package var representations: [OutgoingRepresentation]
    package var declarations: [UTTypeDeclaration]
    package var version: String?
    /// Who the item really comes from, when this device passes it on for another (`laptop via desk`).
    package var origin: String?
    /// What the receiver's user sees before accepting (a title and, optionally, a small image); nil: the label.
    package var preview: ItemPreview?

    package init(
        id: String, label: String, representations: [OutgoingRepresentation],
        declarations: [UTTypeDeclaration] = [], version: String? = nil
    ) {
        self.id = id
        self.label = label
        self.representations = representations
        self.declarations = declarations
        self.version = version
    }

    package var offerItem: OfferItem {
        OfferItem(
            id: id, label: label, representations: representations.map(\.offered), declarations: declarations,
            version: version, origin: origin, preview: preview ?? ItemPreview(title: Self.title(label)))
    }

    /// A preview title from any text: no control characters, at most `ItemPreview.maxTitle` bytes.
    package static func title(_ text: String) -> String {
        var scalars = String.UnicodeScalarView()
        var bytes = 0
        for scalar in text.unicodeScalars where scalar.properties.generalCategory != .control {
            bytes += String(scalar).utf8.count
            if bytes > ItemPreview.maxTitle { break }
            scalars.append(scalar)
        }
        return String(scalars)
    }

    static func fileVersion(_ info: stat) -> String {
        "\(info.st_size)-\(info.st_mtim.tv_sec)\(Format.zeroPadded(info.st_mtim.tv_nsec, width: 9))-\(info.st_ino)"
    }

    /// The current version string of a file, or nil if it is gone.
    static func currentVersion(of url: URL) -> String? {
        var info = stat()
        guard stat(url.path, &info) == 0 else { return nil }
        return fileVersion(info)
    }

    /// Declarations of the non-system types among `types` and their custom ancestors, so the receiver can evaluate
    /// conformance for types it has never seen.
    package static func customDeclarations(for types: [UTType]) -> [UTTypeDeclaration] {
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
