import FoundationEssentials

extension Transferable {
    /// Creates a value from bytes of `contentType`, trying the importing representations whose type matches (all of
    /// them, in order, when nil) until one succeeds.
    public init(importing data: Data, contentType: UTType?) async throws {
        let candidates = ResolvedRepresentations.of(Self.self).filter { entry in
            entry.canImport && (contentType == nil || contentType!.conforms(to: entry.contentType))
        }
        self = try await Self.importFirst(candidates, contentType: contentType) { entry in
            try await entry.importItem(from: .data(data))
        }
    }

    /// Creates a value from a file. Without a content type it is inferred from the file name's extension; when that
    /// says nothing, every importing representation is tried in order.
    public init(importing file: URL, contentType: UTType?) async throws {
        guard FileManager.default.isReadableFile(atPath: file.path) else {
            throw TransferableSupportError(.fileUnavailable, "cannot import \(file.path): no readable file there")
        }
        var type = contentType
        if type == nil, !file.pathExtension.isEmpty, let inferred = UTType(filenameExtension: file.pathExtension),
            !inferred.isDynamic
        {
            type = inferred
        }
        let candidates = ResolvedRepresentations.of(Self.self).filter { entry in
            entry.canImport && (type == nil || type!.conforms(to: entry.contentType))
        }
        self = try await Self.importFirst(candidates, contentType: type) { entry in
            switch entry.payload {
            case .data:
                return try await entry.importItem(from: .file(SentTransferredFile(file)))
            case .file where entry.shouldAttemptToOpenInPlace:
                return try await entry.importItem(
                    from: .file(SentTransferredFile(file, allowAccessingOriginalFile: true)))
            case .file:
                // The importer gets a private copy that exists only while it runs.
                return try await TemporaryFiles.withCopy(of: file) { copy in
                    try await entry.importItem(from: .file(SentTransferredFile(copy)))
                }
            }
        }
    }

    /// Tries `candidates` in order, falling through to the next when one fails.
    static func importFirst(
        _ candidates: [ResolvedTransferRepresentation<Self>], contentType: UTType?,
        _ attempt: (ResolvedTransferRepresentation<Self>) async throws -> Self
    ) async throws -> Self {
        guard !candidates.isEmpty else {
            throw TransferableSupportError(
                .noMatchingRepresentation,
                "\(Self.self) cannot import \(contentType?.identifier ?? "this content"); it imports "
                    + describe(importedContentTypes()))
        }
        var failures: [String] = []
        for entry in candidates {
            do {
                return try await attempt(entry)
            } catch {
                failures.append("\(entry.contentType.identifier): \(error)")
            }
        }
        throw TransferableSupportError(
            .importFailed, "\(Self.self) could not be imported: " + failures.joined(separator: "; "))
    }
}
