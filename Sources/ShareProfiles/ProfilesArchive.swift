import ShareProfileModel
import CoreTransferable
import FoundationEssentials
import ShareText
import ShareArchive
import ShareDisk

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
        defer { PathOperations.removeIfPresent(partial.path) }
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
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "share-profiles-\(UUID().uuidString)"
        ).path
        let folder = try Self.disk { try Directory.open(path, create: true, mode: 0o700) }
        defer { PathOperations.removeIfPresent(path) }
        try Self.extract(file, into: folder)
        let (manifest, _) = try Self.readManifest(in: folder)
        profiles = manifest.profiles.map {
            Profile(id: $0.id, name: $0.name, bio: $0.bio, funFacts: $0.funFacts)
        }
    }

    /// Extracts an archive file under the safe-extraction policy; the headers are inspected first, so a hostile
    /// archive is refused before anything is written.
    public static func extract(_ file: URL, into folder: Directory, policy: ExtractionPolicy = ExtractionPolicy())
        throws
    {
        _ = try Extractor.inspect(file: file, policy: policy)
        let reader = try ArchiveReader(file: file.path)
        try Extractor(root: folder, policy: policy).run(reader)
    }

    /// The manifest of an extracted bundle, at its top or inside its single top-level folder, and that folder.
    static func readManifest(in folder: Directory) throws -> (Manifest, Directory) {
        var base = folder
        if folder.info("manifest.json") == nil {
            let items = folder.entries()
            if items.count == 1, folder.info(items[0])?.kind == .directory {
                base = try disk { try folder.directory(components: [items[0]]) }
            }
        }
        guard base.info("manifest.json")?.kind == .file else {
            throw FormatError("it has no manifest.json; it is not a profiles archive")
        }
        let bytes: [UInt8]
        do {
            bytes = try base.readFile("manifest.json", limit: 16 << 20) ?? []
        } catch {
            throw FormatError("its manifest.json cannot be read (larger than 16 MiB?): \(error)")
        }
        do {
            return (try JSONDecoder().decode(Manifest.self, from: Data(bytes)), base)
        } catch {
            throw FormatError("its manifest.json is not valid: \(error)")
        }
    }

    static func disk<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as DiskError {
            throw FormatError(error.message)
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

    /// Imports an extracted bundle into the catalog at `catalogFile`: attachments move under `media/<id>/` inside
    /// `mediaRoot` (files 0600); the same id updates its profile, never duplicates it. Every path the manifest names
    /// is resolved beneath the bundle's own folder handle, never through a link: a manifest cannot reach a file
    /// outside its bundle.
    public static func importBundle(at folder: Directory, into catalogFile: URL, media mediaRoot: Directory) throws
        -> ImportResult
    {
        let (manifest, base) = try readManifest(in: folder)
        var catalog = try ProfileCatalog.load(catalogFile)
        var result = ImportResult()
        for entry in manifest.profiles {
            var profile = Profile(id: entry.id, name: entry.name, bio: entry.bio, funFacts: entry.funFacts)
            let mediaFolder = "media/\(entry.id.uuidString.lowercased())"
            for (kind, path) in [("portrait", entry.portrait), ("video", entry.video)] {
                guard let path else { continue }
                guard let parts = SafePath.components(path), parts.first == "media", parts.count >= 2,
                    let name = parts.last
                else {
                    throw FormatError("\(entry.name)'s \(kind) '\(path)' is not inside the bundle's media folder")
                }
                let source: Directory
                do {
                    source = try base.directory(components: Array(parts.dropLast()))
                } catch {
                    throw FormatError("\(entry.name)'s \(kind) '\(path)' is missing from the bundle")
                }
                guard source.info(name)?.kind == .file else {
                    throw FormatError("\(entry.name)'s \(kind) '\(path)' is missing from the bundle")
                }
                try disk {
                    let destination = try mediaRoot.directory(mediaFolder, create: true, mode: 0o700)
                    try source.rename(name, to: name, in: destination, replace: true)
                    try destination.openFile(name, .update).setMode(0o600)
                }
                let target = URL(fileURLWithPath: mediaRoot.path + "/" + mediaFolder + "/" + name)
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
        return "\"" + field.replacing("\"", with: "\"\"") + "\""
    }

    /// Reads CSV with a header naming at least `name` (and optionally `id`, `bio`, `fun_facts`). A row without a
    /// valid id gets a new one.
    public init(csv data: Data) throws {
        guard let text = String(data: data, encoding: .utf8) else { throw FormatError("the CSV is not UTF-8") }
        let rows = try Self.parseCSV(text)
        guard let header = rows.first?.map({ $0.trimmedSpaces.lowercased() }),
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
