import FoundationEssentials

/// What an exporter produced, or what an importer is given: bytes in memory or a file.
public enum TransferPayload: Sendable {
    case data(Data)
    case file(SentTransferredFile)
}

/// One entry of a type's resolved representation list: a content type with how to export it, how to import it, and
/// the modifiers that apply (visibility, exporting conditions, suggested file name, open-in-place flags).
///
/// Proxies are already spliced in: an entry of `Profile` that came from `ProxyRepresentation(exporting: \.name)`
/// exports `Profile → String → UTF-8 data`.
public struct ResolvedTransferRepresentation<Item: Transferable>: Sendable {
    /// Whether the payload is bytes in memory or a file.
    public enum Payload: String, Sendable, Hashable {
        case data, file
    }

    /// What an exporter produced.
    public typealias Exported = TransferPayload

    enum FileName: Sendable {
        case constant(String)
        case perItem(@Sendable (Item) -> String?)
    }

    /// The content type of this representation.
    public let contentType: UTType
    /// Data or file.
    public let payload: Payload
    /// Who may see the representation when it is exported.
    public internal(set) var visibility: TransferRepresentationVisibility = .all
    /// The receiver asks for the original file rather than a copy.
    public internal(set) var shouldAttemptToOpenInPlace = false
    /// The sender lets receivers open the original file.
    public internal(set) var shouldAllowToOpenInPlace = false

    /// The user's closures are stored as given (no wrapping closure per entry: resolution stays cheap).
    enum ExportFunction: Sendable {
        case data(@Sendable (Item) async throws -> Data)
        case file(@Sendable (Item) async throws -> SentTransferredFile)
        case payload(@Sendable (Item) async throws -> TransferPayload)
    }

    enum ImportFunction: Sendable {
        case data(@Sendable (Data) async throws -> Item)
        case file(@Sendable (ReceivedTransferredFile) async throws -> Item)
        case payload(@Sendable (TransferPayload) async throws -> Item)
    }

    let exporter: ExportFunction?
    let importer: ImportFunction?
    var conditions: [@Sendable (Item) -> Bool] = []
    var fileName: FileName?

    init(contentType: UTType, payload: Payload, exporter: ExportFunction?, importer: ImportFunction?) {
        self.contentType = contentType
        self.payload = payload
        self.exporter = exporter
        self.importer = importer
    }

    /// Whether this entry can produce the item's bytes.
    public var canExport: Bool { exporter != nil }
    /// Whether this entry can make an item from received bytes.
    public var canImport: Bool { importer != nil }
    /// Whether the entry carries an exporting condition.
    public var hasExportingCondition: Bool { !conditions.isEmpty }

    /// Whether this entry exports for `item`: it has an exporter and every exporting condition holds.
    public func isExportable(for item: Item) -> Bool {
        exporter != nil && conditions.allSatisfy { $0(item) }
    }

    /// The suggested file name for `item`, including its extension, if the entry has one.
    public func suggestedFileName(for item: Item) -> String? {
        switch fileName {
        case .constant(let name): return name
        case .perItem(let make): return make(item)
        case nil: return nil
        }
    }

    /// Whether the entry has a suggested file name (constant or per item).
    public var hasSuggestedFileName: Bool { fileName != nil }

    /// Runs the exporter. Only the chosen representation is ever exported.
    public func export(_ item: Item) async throws -> Exported {
        switch exporter {
        case .data(let export): return .data(try await export(item))
        case .file(let export): return .file(try await export(item))
        case .payload(let export): return try await export(item)
        case nil:
            throw TransferableSupportError(
                .exportFailed, "the \(contentType.identifier) representation of \(Item.self) is import-only")
        }
    }

    /// Runs the importer on received bytes or a received file. A file importer given bytes gets a temporary file
    /// that lives as long as its closure; a data importer given a file gets the file's bytes.
    public func importItem(from payload: Exported) async throws -> Item {
        switch (importer, payload) {
        case (.data(let make), _): return try await make(try payload.bytes())
        case (.file(let make), .file(let sent)):
            return try await make(
                ReceivedTransferredFile(file: sent.file, isOriginalFile: sent.allowAccessingOriginalFile))
        case (.file(let make), .data(let data)):
            return try await TemporaryFiles.withFile(containing: data, contentType: contentType) { url in
                try await make(ReceivedTransferredFile(file: url, isOriginalFile: false))
            }
        case (.payload(let make), _): return try await make(payload)
        case (nil, _):
            throw TransferableSupportError(
                .importFailed, "the \(contentType.identifier) representation of \(Item.self) is export-only")
        }
    }

    /// The payload-level closures, for composing through a proxy.
    var exportPayload: (@Sendable (Item) async throws -> TransferPayload)? {
        guard exporter != nil else { return nil }
        let entry = self
        return { item in try await entry.export(item) }
    }

    var importPayload: (@Sendable (TransferPayload) async throws -> Item)? {
        guard importer != nil else { return nil }
        let entry = self
        return { payload in try await entry.importItem(from: payload) }
    }
}

extension ResolvedTransferRepresentation {
    /// The same entry seen through a proxy: `exportProxy` turns an outer item into this entry's item, `importProxy`
    /// turns this entry's item into an outer item. A direction missing on either level is missing in the result.
    func proxied<Outer: Transferable>(
        exportProxy: (@Sendable (Outer) async throws -> Item)?,
        syncExportProxy: (@Sendable (Outer) throws -> Item)?,
        importProxy: (@Sendable (Item) async throws -> Outer)?
    ) -> ResolvedTransferRepresentation<Outer> {
        var outerExporter: ResolvedTransferRepresentation<Outer>.ExportFunction?
        if let exportProxy, let inner = exportPayload {
            outerExporter = .payload { outer in try await inner(try await exportProxy(outer)) }
        }
        var outerImporter: ResolvedTransferRepresentation<Outer>.ImportFunction?
        if let importProxy, let inner = importPayload {
            outerImporter = .payload { payload in try await importProxy(try await inner(payload)) }
        }
        var result = ResolvedTransferRepresentation<Outer>(
            contentType: contentType, payload: payload == .data ? .data : .file,
            exporter: outerExporter, importer: outerImporter)
        result.visibility = visibility
        result.shouldAttemptToOpenInPlace = shouldAttemptToOpenInPlace
        result.shouldAllowToOpenInPlace = shouldAllowToOpenInPlace
        // Inner conditions and names need the proxy value; they can be evaluated only through a synchronous proxy.
        let innerConditions = conditions
        if !innerConditions.isEmpty {
            if let syncExportProxy {
                result.conditions.append { outer in
                    guard let inner = try? syncExportProxy(outer) else { return false }
                    return innerConditions.allSatisfy { $0(inner) }
                }
            }
        }
        switch fileName {
        case .constant(let name): result.fileName = .constant(name)
        case .perItem(let make):
            if let syncExportProxy {
                result.fileName = .perItem { outer in (try? syncExportProxy(outer)).flatMap(make) }
            }
        case nil: break
        }
        return result
    }
}
