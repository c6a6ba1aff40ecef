import CoreTransferable
import Foundation
import ShareArchive

extension UTType {
    /// A bundle of profiles: `manifest.json` plus the portraits and videos it names, as a tar archive.
    public static let shareProfilesArchive = UTType(exportedAs: "app.share.profiles-archive", conformingTo: .tarArchive)
}

/// Several profiles shared at once, "among friends": first as a bundle (manifest plus portraits and videos), then
/// as CSV when nothing in it needs a file (CSV cannot carry a portrait or a video), then as their names.
public struct ProfilesArchive: Transferable, Sendable, Equatable {
    public var profiles: [Profile]

    public init(profiles: [Profile]) {
        self.profiles = profiles
    }

    /// Whether any profile has a portrait or a video.
    public var hasAttachments: Bool { profiles.contains { $0.portrait != nil || $0.video != nil } }

    /// The names, one per line.
    public var names: String { profiles.map(\.name).joined(separator: "\n") }

    public static var transferRepresentation: some TransferRepresentation {
        FileRepresentation(contentType: .shareProfilesArchive) { archive in
            let file = FileManager.default.temporaryDirectory.appendingPathComponent(
                "profiles-\(UUID().uuidString).tar")
            try archive.write(to: file, format: .pax)
            return SentTransferredFile(file)
        } importing: { received in
            try ProfilesArchive(contentsOf: received.file)
        }
        .suggestedFileName("Profiles.tar")
        DataRepresentation(contentType: .commaSeparatedText) { archive in
            try archive.csv()
        } importing: { data in
            try ProfilesArchive(csv: data)
        }
        .exportingCondition { !$0.hasAttachments }
        .suggestedFileName("Profiles.csv")
        ProxyRepresentation(exporting: \.names)
    }

    public struct FormatError: Error, CustomStringConvertible, Sendable {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    // MARK: Bundle

    /// The manifest's form of one profile: attachments as paths inside the bundle.
    struct ManifestProfile: Codable {
        var id: UUID
        var name: String
        var bio: String
        var funFacts: [String]
        var portrait: String?
        var video: String?
    }

    struct Manifest: Codable {
        var format: Int
        var profiles: [ManifestProfile]
    }

    /// The bundle's entries: `manifest.json`, then `media/<id>/portrait.<ext>` and `media/<id>/video.<ext>`.
    public func plan() throws -> ArchivePlan {
        let now = Int64(Date().timeIntervalSince1970)
        var manifest = Manifest(format: 1, profiles: [])
        var media: [ArchivePlan.Entry] = []
        for profile in profiles {
            var entry = ManifestProfile(
                id: profile.id, name: profile.name, bio: profile.bio, funFacts: profile.funFacts)
            let folder = "media/\(profile.id.uuidString.lowercased())"
            var attached: [ArchivePlan.Entry] = []
            for (kind, url) in [("portrait", profile.portrait), ("video", profile.video)] {
                guard let url else { continue }
                let ext = url.pathExtension.isEmpty ? "" : "." + url.pathExtension.lowercased()
                let path = "\(folder)/\(kind)\(ext)"
                do {
                    attached.append(try .file(url, as: path))
                } catch {
                    throw FormatError("\(profile.name)'s \(kind) \(url.path) cannot be read; fix or remove it")
                }
                if kind == "portrait" { entry.portrait = path } else { entry.video = path }
            }
            if !attached.isEmpty {
                media.append(ArchivePlan.Entry(path: folder, kind: .directory, mode: 0o755, modified: now))
                media += attached
            }
            manifest.profiles.append(entry)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let json = try encoder.encode(manifest)
        var entries = [
            ArchivePlan.Entry(
                path: "manifest.json", kind: .file, size: UInt64(json.count), mode: 0o644, modified: now,
                source: .bytes(json))
        ]
        if !media.isEmpty {
            entries.append(ArchivePlan.Entry(path: "media", kind: .directory, mode: 0o755, modified: now))
            entries += media
        }
        return try ArchivePlan(entries: entries)
    }

    /// Writes the bundle to a file: tar, zstd-compressed tar or zip.
    public func write(to file: URL, format: ArchiveWriter.Format, compression: ArchiveWriter.Compression = .none)
        throws
    {
        let plan = try plan()
        let partial = file.deletingLastPathComponent().appendingPathComponent(
            ".\(file.lastPathComponent).\(UUID().uuidString).partial")
        defer { try? FileManager.default.removeItem(at: partial) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        try plan.write(
            to: try ArchiveWriter(file: partial.path, format: format, compression: compression), buffer: buffer)
        guard rename(partial.path, file.path) == 0 else {
            throw FormatError("cannot create \(file.path): \(String(cString: strerror(errno)))")
        }
    }

    /// Reads a bundle from an archive file (any format libarchive reads): extracted safely into a temporary folder,
    /// profiles read from its manifest; attachments are left out (use `importBundle` to keep them).
    public init(contentsOf file: URL) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "share-profiles-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        try Self.extract(file, into: folder)
        let (manifest, _) = try Self.readManifest(in: folder)
        profiles = manifest.profiles.map {
            Profile(id: $0.id, name: $0.name, bio: $0.bio, funFacts: $0.funFacts)
        }
    }

    /// Extracts an archive file under the safe-extraction policy; the headers are inspected first, so a hostile
    /// archive is refused before anything is written.
    public static func extract(_ file: URL, into folder: URL, policy: ExtractionPolicy = ExtractionPolicy()) throws {
        _ = try Extractor.inspect(file: file, policy: policy)
        let reader = try ArchiveReader(file: file.path)
        let extractor = try Extractor(root: folder, policy: policy)
        try extractor.run(reader)
    }

    /// The manifest of an extracted bundle, at its top or inside its single top-level folder.
    static func readManifest(in folder: URL) throws -> (Manifest, URL) {
        var base = folder
        let fm = FileManager.default
        if !fm.fileExists(atPath: folder.appendingPathComponent("manifest.json").path),
            let items = try? fm.contentsOfDirectory(atPath: folder.path), items.count == 1
        {
            base = folder.appendingPathComponent(items[0])
        }
        let manifestURL = base.appendingPathComponent("manifest.json")
        var info = stat()
        guard lstat(manifestURL.path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw FormatError("it has no manifest.json; it is not a profiles archive")
        }
        guard info.st_size <= 16 << 20 else { throw FormatError("its manifest.json is larger than 16 MiB") }
        do {
            return (try JSONDecoder().decode(Manifest.self, from: Data(contentsOf: manifestURL)), base)
        } catch {
            throw FormatError("its manifest.json is not valid: \(error)")
        }
    }

    public struct ImportResult: Sendable {
        public var added = 0
        public var updated = 0
        public var names: [String] = []
        public init() {}
    }

    /// Adds or updates these profiles in the catalog at `catalogFile` (by id); a profile imported without
    /// attachments keeps the portrait and video it already had.
    public func merge(into catalogFile: URL) throws -> ImportResult {
        var catalog = try ProfileCatalog.load(catalogFile)
        var result = ImportResult()
        for profile in profiles {
            var merged = profile
            if let existing = catalog.profiles.first(where: { $0.id == profile.id }) {
                merged.portrait = profile.portrait ?? existing.portrait
                merged.video = profile.video ?? existing.video
            }
            if catalog.upsert(merged) { result.added += 1 } else { result.updated += 1 }
            result.names.append(profile.name)
        }
        try catalog.save()
        return result
    }

    /// Imports an extracted bundle into the catalog at `catalogFile`: attachments move under
    /// `media/<id>/` inside `mediaRoot`; the same id updates its profile, never duplicates it.
    public static func importBundle(at folder: URL, into catalogFile: URL, media mediaRoot: URL) throws
        -> ImportResult
    {
        let (manifest, base) = try readManifest(in: folder)
        var catalog = try ProfileCatalog.load(catalogFile)
        var result = ImportResult()
        let fm = FileManager.default
        for entry in manifest.profiles {
            var profile = Profile(id: entry.id, name: entry.name, bio: entry.bio, funFacts: entry.funFacts)
            let destination = mediaRoot.appendingPathComponent("media/\(entry.id.uuidString.lowercased())")
            for (kind, path) in [("portrait", entry.portrait), ("video", entry.video)] {
                guard let path else { continue }
                guard let parts = SafePath.components(path), parts.first == "media", parts.count >= 2 else {
                    throw FormatError("\(entry.name)'s \(kind) '\(path)' is not inside the bundle's media folder")
                }
                let source = base.appendingPathComponent(parts.joined(separator: "/"))
                var info = stat()
                guard lstat(source.path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
                    throw FormatError("\(entry.name)'s \(kind) '\(path)' is missing from the bundle")
                }
                try fm.createDirectory(at: destination, withIntermediateDirectories: true)
                let target = destination.appendingPathComponent(parts.last!)
                try? fm.removeItem(at: target)
                try fm.moveItem(at: source, to: target)
                if kind == "portrait" { profile.portrait = target } else { profile.video = target }
            }
            if catalog.upsert(profile) { result.added += 1 } else { result.updated += 1 }
            result.names.append(profile.name)
        }
        try catalog.save()
        return result
    }

    // MARK: CSV

    static let csvHeader = ["id", "name", "bio", "fun_facts"]

    /// RFC 4180 CSV: a header row, then one row per profile; fun facts separated by newlines inside their field.
    public func csv() throws -> Data {
        guard !hasAttachments else {
            throw FormatError("CSV cannot carry portraits or videos; export a .tar, .tar.zst or .zip instead")
        }
        var rows = [Self.csvHeader]
        for profile in profiles {
            rows.append([profile.id.uuidString, profile.name, profile.bio, profile.funFacts.joined(separator: "\n")])
        }
        let text = rows.map { $0.map(Self.quote).joined(separator: ",") }.joined(separator: "\r\n") + "\r\n"
        return Data(text.utf8)
    }

    private static func quote(_ field: String) -> String {
        guard field.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return field }
        return "\"" + field.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Reads CSV with a header naming at least `name` (and optionally `id`, `bio`, `fun_facts`). A row without a
    /// valid id gets a new one.
    public init(csv data: Data) throws {
        guard let text = String(data: data, encoding: .utf8) else { throw FormatError("the CSV is not UTF-8") }
        let rows = try Self.parseCSV(text)
        guard let header = rows.first?.map({ $0.trimmingCharacters(in: .whitespaces).lowercased() }),
            let nameColumn = header.firstIndex(of: "name")
        else { throw FormatError("the CSV has no header row with a 'name' column") }
        let column = { (name: String) in header.firstIndex(of: name) }
        profiles = []
        for (number, row) in rows.dropFirst().enumerated() where !(row.count == 1 && row[0].isEmpty) {
            func field(_ index: Int?) -> String { index.flatMap { $0 < row.count ? row[$0] : nil } ?? "" }
            let name = field(nameColumn)
            guard !name.isEmpty else { throw FormatError("CSV row \(number + 2) has no name") }
            let facts = field(column("fun_facts") ?? column("funfacts")).split(whereSeparator: \.isNewline)
                .map(String.init).filter { !$0.isEmpty }
            profiles.append(
                Profile(
                    id: UUID(uuidString: field(column("id"))) ?? UUID(), name: name, bio: field(column("bio")),
                    funFacts: facts))
        }
    }

    static func parseCSV(_ text: String) throws -> [[String]] {
        var rows: [[String]] = []
        var row: [String] = []
        var field = ""
        var quoted = false
        var iterator = Array(text.unicodeScalars).makeIterator()
        var pending: Unicode.Scalar? = nil
        func next() -> Unicode.Scalar? {
            if let p = pending {
                pending = nil
                return p
            }
            return iterator.next()
        }
        while let c = next() {
            if quoted {
                if c == "\"" {
                    if let after = next() {
                        if after == "\"" {
                            field.unicodeScalars.append("\"")
                        } else {
                            quoted = false
                            pending = after
                        }
                    } else {
                        quoted = false
                    }
                } else {
                    field.unicodeScalars.append(c)
                }
                continue
            }
            switch c {
            case "\"" where field.isEmpty: quoted = true
            case ",":
                row.append(field)
                field = ""
            case "\r": continue
            case "\n":
                row.append(field)
                rows.append(row)
                row = []
                field = ""
            default: field.unicodeScalars.append(c)
            }
        }
        if quoted { throw FormatError("the CSV ends inside a quoted field") }
        if !field.isEmpty || !row.isEmpty {
            row.append(field)
            rows.append(row)
        }
        return rows
    }
}
