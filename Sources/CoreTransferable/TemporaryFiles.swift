import FoundationEssentials

/// Temporary files and folders whose lifetime is one closure call.
enum TemporaryFiles {
    /// Runs `body` with a fresh private directory that is removed afterwards, whatever happens.
    static func withDirectory<R>(_ body: (URL) async throws -> R) async throws -> R {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("transfer-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: directory) }
        return try await body(directory)
    }

    /// Runs `body` with a temporary file holding `data`, named with the type's preferred extension.
    static func withFile<R>(
        containing data: Data, contentType: UTType, name: String? = nil, _ body: (URL) async throws -> R
    ) async throws -> R {
        try await withDirectory { directory in
            let file = directory.appendingPathComponent(FileNames.sanitized(name ?? "Imported", fallback: "Imported"))
                .appendingPathExtension(for: contentType)
            try data.write(to: file)
            return try await body(file)
        }
    }

    /// Runs `body` with a private copy of `source` that is removed afterwards.
    static func withCopy<R>(of source: URL, _ body: (URL) async throws -> R) async throws -> R {
        try await withDirectory { directory in
            let copy = directory.appendingPathComponent(
                source.lastPathComponent.isEmpty ? "file" : source.lastPathComponent)
            do {
                try FileManager.default.copyItem(at: source, to: copy)
            } catch {
                throw TransferableSupportError(
                    .fileUnavailable, "cannot copy \(source.path): \(error)")
            }
            return try await body(copy)
        }
    }
}

/// File names that are safe to create: one path component, no control characters, bounded length.
public enum FileNames {
    /// What follows the last dot of a file name (not a leading one), or "".
    static func pathExtension(_ name: String) -> String {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return "" }
        return String(name[name.index(after: dot)...])
    }

    /// Characters that look like a slash or a backslash: a name must not seem to have folders it does not have.
    static let slashLookalikes: Set<UInt32> = [
        0x2F, 0x5C, 0x2044, 0x2215, 0x2216, 0x2571, 0x2572, 0x29F5, 0x29F8, 0x29F9, 0xFE68, 0xFF0F, 0xFF3C, 0x1735,
        0x2CFA, 0x3033, 0x30CE, 0x4E3F, 0x31D3,
    ]

    /// `name` reduced to a safe single path component, or `fallback` when nothing usable is left: no separator or
    /// lookalike of one, no control character, no invisible formatting character (bidirectional overrides such as
    /// U+202E reorder what a name shows; zero-width joiners inside emoji stay), no leading dot, at most 200 bytes.
    public static func sanitized(_ name: String, fallback: String = "item") -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in name.unicodeScalars {
            if slashLookalikes.contains(scalar.value) {
                scalars.append("_")
                continue
            }
            switch scalar.properties.generalCategory {
            case .control, .lineSeparator, .paragraphSeparator: continue
            case .format where scalar.value != 0x200D: continue
            default: scalars.append(scalar)
            }
        }
        var clean = Substring(String(scalars))
        while clean.first?.isWhitespace == true { clean.removeFirst() }
        while clean.last?.isWhitespace == true { clean.removeLast() }
        while clean.hasPrefix(".") { clean.removeFirst() }
        if clean.isEmpty { return fallback }
        // 255 bytes is the usual file-name limit; cut on a character boundary, keeping the extension.
        if clean.utf8.count > 200 {
            let ext = pathExtension(String(clean))
            let keep = ext.isEmpty || ext.utf8.count > 20 ? "" : "." + ext
            var stem = String(clean.dropLast(keep.count))
            while stem.utf8.count + keep.utf8.count > 200 { stem.removeLast() }
            clean = Substring(stem + keep)
        }
        return String(clean)
    }

    /// A URL in `directory` for `name` that does not exist yet: `name`, then `name (2).ext`, `name (3).ext`, …
    public static func unique(_ name: String, in directory: URL) -> URL {
        let fm = FileManager.default
        let first = directory.appendingPathComponent(name)
        if !fm.fileExists(atPath: first.path) { return first }
        let ext = pathExtension(name)
        let stem = ext.isEmpty ? name : String(name.dropLast(ext.count + 1))
        var n = 2
        while true {
            let candidate = directory.appendingPathComponent(ext.isEmpty ? "\(stem) (\(n))" : "\(stem) (\(n)).\(ext)")
            if !fm.fileExists(atPath: candidate.path) { return candidate }
            n += 1
        }
    }
}
