import UniformTypeIdentifiers

extension UTType {
    /// A zstd-compressed tar archive (`.tar.zst`), for export files. Declared here (no system type names it).
    public static let zstdTarArchive: UTType = {
        UTType.register([
            UTTypeDeclaration(
                identifier: "app.share.zstd-tar-archive", conformsTo: [UTType.archive.identifier],
                tags: [.filenameExtension: ["tzst"], .mimeType: ["application/zstd"]],
                description: "zstd-compressed tar archive", kind: .exported)
        ])
        return UTType(exportedAs: "app.share.zstd-tar-archive", conformingTo: .archive)
    }()
}
