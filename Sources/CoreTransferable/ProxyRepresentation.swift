/// A transfer representation that uses another type's transfer representation as its own.
///
/// At its position, the proxy type's own resolved list is spliced in: `ProxyRepresentation(exporting: \.name)` on a
/// `Profile` offers everything `String` offers, each converting `Profile → String` first.
public struct ProxyRepresentation<Item: Transferable, ProxyRepresentation: Transferable>: TransferRepresentation {
    public typealias Body = Never

    let exportSync: (@Sendable (Item) throws -> ProxyRepresentation)?
    let exportAsync: (@Sendable (Item) async throws -> ProxyRepresentation)?
    let importAsync: (@Sendable (ProxyRepresentation) async throws -> Item)?

    private init(
        exportSync: (@Sendable (Item) throws -> ProxyRepresentation)?,
        exportAsync: (@Sendable (Item) async throws -> ProxyRepresentation)?,
        importAsync: (@Sendable (ProxyRepresentation) async throws -> Item)?
    ) {
        self.exportSync = exportSync
        if let exportAsync {
            self.exportAsync = exportAsync
        } else if let exportSync {
            self.exportAsync = { @Sendable item in try exportSync(item) }
        } else {
            self.exportAsync = nil
        }
        self.importAsync = importAsync
    }

    /// An export-only proxy.
    public init(exporting: @escaping @Sendable (Item) throws -> ProxyRepresentation) {
        self.init(exportSync: exporting, exportAsync: nil, importAsync: nil)
    }

    /// An export-only proxy with an asynchronous conversion.
    public init(exporting: @escaping @Sendable (Item) async throws -> ProxyRepresentation) {
        self.init(exportSync: nil, exportAsync: exporting, importAsync: nil)
    }

    /// An export-only proxy (unlabeled form used in Apple's examples: `ProxyRepresentation(\.title)`).
    public init(_ exporting: @escaping @Sendable (Item) throws -> ProxyRepresentation) {
        self.init(exportSync: exporting, exportAsync: nil, importAsync: nil)
    }

    /// An import-only proxy.
    public init(importing: @escaping @Sendable (ProxyRepresentation) throws -> Item) {
        self.init(exportSync: nil, exportAsync: nil, importAsync: { try importing($0) })
    }

    /// An import-only proxy with an asynchronous conversion.
    public init(importing: @escaping @Sendable (ProxyRepresentation) async throws -> Item) {
        self.init(exportSync: nil, exportAsync: nil, importAsync: importing)
    }

    /// A proxy in both directions.
    public init(
        exporting: @escaping @Sendable (Item) throws -> ProxyRepresentation,
        importing: @escaping @Sendable (ProxyRepresentation) throws -> Item
    ) {
        self.init(exportSync: exporting, exportAsync: nil, importAsync: { try importing($0) })
    }

    /// A proxy in both directions, both asynchronous.
    public init(
        exporting: @escaping @Sendable (Item) async throws -> ProxyRepresentation,
        importing: @escaping @Sendable (ProxyRepresentation) async throws -> Item
    ) {
        self.init(exportSync: nil, exportAsync: exporting, importAsync: importing)
    }

    /// A proxy in both directions with a synchronous export and an asynchronous import.
    public init(
        exporting: @escaping @Sendable (Item) throws -> ProxyRepresentation,
        importing: @escaping @Sendable (ProxyRepresentation) async throws -> Item
    ) {
        self.init(exportSync: exporting, exportAsync: nil, importAsync: importing)
    }

    public func _resolve(into list: inout [ResolvedTransferRepresentation<Item>]) {
        for entry in ResolvedRepresentations.of(ProxyRepresentation.self) {
            let outer = entry.proxied(exportProxy: exportAsync, syncExportProxy: exportSync, importProxy: importAsync)
            if outer.canExport || outer.canImport { list.append(outer) }
        }
    }
}
