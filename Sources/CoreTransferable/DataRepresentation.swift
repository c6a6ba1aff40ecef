import FoundationEssentials

/// A transfer representation for types that have a binary representation in memory.
public struct DataRepresentation<Item: Transferable>: TransferRepresentation {
    public typealias Body = Never

    let contentType: UTType
    let exporting: (@Sendable (Item) async throws -> Data)?
    let importing: (@Sendable (Data) async throws -> Item)?

    /// A representation that both exports and imports `contentType`.
    public init(
        contentType: UTType,
        exporting: @escaping @Sendable (Item) async throws -> Data,
        importing: @escaping @Sendable (Data) async throws -> Item
    ) {
        self.contentType = contentType
        self.exporting = exporting
        self.importing = importing
    }

    /// An export-only representation.
    public init(exportedContentType: UTType, exporting: @escaping @Sendable (Item) async throws -> Data) {
        self.contentType = exportedContentType
        self.exporting = exporting
        self.importing = nil
    }

    /// An import-only representation.
    public init(importedContentType: UTType, importing: @escaping @Sendable (Data) async throws -> Item) {
        self.contentType = importedContentType
        self.exporting = nil
        self.importing = importing
    }

    public func _resolve(into list: inout [ResolvedTransferRepresentation<Item>]) {
        list.append(
            ResolvedTransferRepresentation(
                contentType: contentType, payload: .data, exporter: exporting.map { .data($0) },
                importer: importing.map { .data($0) }))
    }
}
