import FoundationEssentials

extension Transferable {
    /// The name set with `suggestedFileName` on the first representation that has one, or nil.
    public var suggestedFilename: String? {
        for entry in ResolvedRepresentations.of(Self.self) where entry.hasSuggestedFileName {
            if let name = entry.suggestedFileName(for: self) { return name }
        }
        return nil
    }

    /// The content types this value exports to receivers in `visibility`, minus those whose exporting condition is
    /// false for this value.
    public func exportedContentTypes(_ visibility: TransferRepresentationVisibility = .all) -> [UTType] {
        ResolvedRepresentations.of(Self.self)
            .filter { $0.isExportable(for: self) && $0.visibility.isVisible(to: visibility) }
            .map(\.contentType)
    }

    /// The content types this value can be imported from.
    public func importedContentTypes() -> [UTType] { Self.importedContentTypes() }

    /// The content types the type exports to receivers in `visibility`, ignoring exporting conditions.
    public static func exportedContentTypes(visibility: TransferRepresentationVisibility = .all) -> [UTType] {
        ResolvedRepresentations.of(Self.self)
            .filter { $0.canExport && $0.visibility.isVisible(to: visibility) }
            .map(\.contentType)
    }

    /// The content types the type can be imported from.
    public static func importedContentTypes() -> [UTType] {
        ResolvedRepresentations.of(Self.self).filter(\.canImport).map(\.contentType)
    }

    /// The first exporting representation whose type conforms to `contentType` (any, when nil) and whose condition
    /// holds for this value.
    func exportingEntry(for contentType: UTType?) throws -> ResolvedTransferRepresentation<Self> {
        let entries = ResolvedRepresentations.of(Self.self).filter(\.canExport)
        let conforming = entries.filter { contentType == nil || $0.contentType.conforms(to: contentType!) }
        if let entry = conforming.first(where: { $0.isExportable(for: self) }) { return entry }
        let wanted = contentType?.identifier ?? "any type"
        if !conforming.isEmpty {
            throw TransferableSupportError(
                .exportingConditionFailed,
                "\(Self.self) cannot export \(wanted): the exporting condition of "
                    + conforming.map(\.contentType.identifier).joined(separator: ", ") + " is false for this value")
        }
        throw TransferableSupportError(
            .noMatchingRepresentation,
            "\(Self.self) has no representation conforming to \(wanted); it exports "
                + describe(entries.map(\.contentType)))
    }

    /// The bytes of the first representation conforming to `contentType` (the first exporting one when nil). A
    /// file-backed representation is read into memory.
    public func exported(as contentType: UTType?) async throws -> Data {
        try await exportingEntry(for: contentType).export(self).bytes()
    }

    /// Writes the representation conforming to `contentType` into `destinationDirectory` and returns the new file's
    /// URL; the caller owns it. Data is written out; a file is copied (the sender's file is never moved).
    public func export(to destinationDirectory: URL, contentType: UTType?) async throws -> URL {
        let entry = try exportingEntry(for: contentType)
        let fm = FileManager.default
        switch try await entry.export(self) {
        case .data(let data):
            let name = FileNames.sanitized(
                entry.suggestedFileName(for: self)
                    ?? URL(fileURLWithPath: "Exported").appendingPathExtension(for: entry.contentType).lastPathComponent
            )
            let target = FileNames.unique(name, in: destinationDirectory)
            try data.write(to: target, options: .withoutOverwriting)
            return target
        case .file(let sent):
            guard fm.fileExists(atPath: sent.file.path) else {
                throw TransferableSupportError(
                    .fileUnavailable, "the exported file \(sent.file.path) of \(Self.self) does not exist")
            }
            let name = FileNames.sanitized(entry.suggestedFileName(for: self) ?? sent.file.lastPathComponent)
            let target = FileNames.unique(name, in: destinationDirectory)
            try fm.copyItem(at: sent.file, to: target)
            return target
        }
    }

    /// Exports to a temporary file, hands its URL to `fileHandler`, and deletes it when the handler returns.
    public func withExportedFile<Result>(
        contentType: UTType?, fileHandler: (URL) async throws -> Result
    ) async throws -> Result {
        try await TemporaryFiles.withDirectory { directory in
            try await fileHandler(try await export(to: directory, contentType: contentType))
        }
    }
}

func describe(_ types: [UTType]) -> String {
    types.isEmpty ? "nothing" : types.map(\.identifier).joined(separator: ", ")
}
