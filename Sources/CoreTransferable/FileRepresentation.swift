import FoundationEssentials

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
            contentType: contentType, payload: .file, exporter: exporting.map { .file($0) },
            importer: importing.map { .file($0) })
        entry.shouldAttemptToOpenInPlace = shouldAttemptToOpenInPlace
        entry.shouldAllowToOpenInPlace = shouldAllowToOpenInPlace
        list.append(entry)
    }
}
