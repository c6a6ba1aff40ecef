import Foundation

/// A transfer representation for types that live in files; files are never read into memory by the framework.
public struct FileRepresentation<Item: Transferable>: TransferRepresentation {
    public typealias Body = Never

    let contentType: UTType
    let shouldAttemptToOpenInPlace: Bool
    let shouldAllowToOpenInPlace: Bool
    let exporting: (@Sendable (Item) async throws -> SentTransferredFile)?
    let importing: (@Sendable (ReceivedTransferredFile) async throws -> Item)?

    /// A representation that both exports and imports `contentType` as a file.
    public init(
        contentType: UTType,
        shouldAttemptToOpenInPlace: Bool = false,
        exporting: @escaping @Sendable (Item) async throws -> SentTransferredFile,
        importing: @escaping @Sendable (ReceivedTransferredFile) async throws -> Item
    ) {
        self.contentType = contentType
        self.shouldAttemptToOpenInPlace = shouldAttemptToOpenInPlace
        self.shouldAllowToOpenInPlace = shouldAttemptToOpenInPlace
        self.exporting = exporting
        self.importing = importing
    }

    /// An export-only file representation.
    public init(
        exportedContentType: UTType,
        shouldAllowToOpenInPlace: Bool = false,
        exporting: @escaping @Sendable (Item) async throws -> SentTransferredFile
    ) {
        self.contentType = exportedContentType
        self.shouldAttemptToOpenInPlace = false
        self.shouldAllowToOpenInPlace = shouldAllowToOpenInPlace
        self.exporting = exporting
        self.importing = nil
    }

    /// An import-only file representation.
    public init(
        importedContentType: UTType,
        shouldAttemptToOpenInPlace: Bool = false,
        importing: @escaping @Sendable (ReceivedTransferredFile) async throws -> Item
    ) {
        self.contentType = importedContentType
        self.shouldAttemptToOpenInPlace = shouldAttemptToOpenInPlace
        self.shouldAllowToOpenInPlace = false
        self.exporting = nil
        self.importing = importing
    }

    public func _resolve(into list: inout [ResolvedTransferRepresentation<Item>]) {
        var entry = ResolvedTransferRepresentation<Item>(
            contentType: contentType, payload: .file,
            exporter: exporting.map(Self.exporter), importer: importing.map { Self.importer($0, contentType) })
        entry.shouldAttemptToOpenInPlace = shouldAttemptToOpenInPlace
        entry.shouldAllowToOpenInPlace = shouldAllowToOpenInPlace
        list.append(entry)
    }

    private static func exporter(
        _ export: @escaping @Sendable (Item) async throws -> SentTransferredFile
    ) -> @Sendable (Item) async throws -> ResolvedTransferRepresentation<Item>.Exported {
        { item in .file(try await export(item)) }
    }

    private static func importer(
        _ make: @escaping @Sendable (ReceivedTransferredFile) async throws -> Item, _ contentType: UTType
    ) -> @Sendable (ResolvedTransferRepresentation<Item>.Exported) async throws -> Item {
        { payload in
            switch payload {
            case .file(let sent):
                let received = ReceivedTransferredFile(file: sent.file, isOriginalFile: sent.allowAccessingOriginalFile)
                return try await make(received)
            case .data(let data):
                // Data handed to a file importer goes through a temporary file that lives as long as the closure.
                return try await TemporaryFiles.withFile(containing: data, contentType: contentType) { url in
                    try await make(ReceivedTransferredFile(file: url, isOriginalFile: false))
                }
            }
        }
    }
}
