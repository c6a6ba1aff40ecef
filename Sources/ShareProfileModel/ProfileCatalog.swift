import FoundationEssentials
import ShareDisk

/// The profiles of one device, stored as JSON in its data directory (`$XDG_DATA_HOME/share/profiles.json`).
public struct ProfileCatalog: Sendable {
    public private(set) var profiles: [Profile]
    public let file: URL

    public struct CatalogError: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    public static func load(_ file: URL) throws -> ProfileCatalog {
        let data: [UInt8]?
        do {
            data = try Directory.open(file.deletingLastPathComponent().path).readFile(
                file.lastPathComponent, limit: 256 << 20)
        } catch let error as DiskError where error.kind == .notFound {
            data = nil
        } catch {
            throw CatalogError(description: "the profile catalog \(file.path) cannot be read: \(error)")
        }
        guard let data else { return ProfileCatalog(profiles: [], file: file) }
        do {
            return ProfileCatalog(profiles: try JSONDecoder().decode([Profile].self, from: Data(data)), file: file)
        } catch {
            throw CatalogError(
                description: "the profile catalog \(file.path) is corrupt (\(error)); it was left untouched")
        }
    }

    /// Writes the catalog atomically (temporary file, then rename), readable by its owner only (0600), in a
    /// private folder.
    public func save() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        do {
            let folder = try Directory.open(file.deletingLastPathComponent().path, create: true, mode: 0o700)
            try folder.writeAtomically(file.lastPathComponent, Array(try encoder.encode(profiles)), mode: 0o600)
        } catch let error as DiskError {
            throw CatalogError(description: "cannot save the profile catalog: \(error.message)")
        }
    }

    /// Finds a profile by name (case-insensitive) or id.
    public func find(_ reference: String) -> Profile? {
        if let id = UUID(uuidString: reference), let byID = profiles.first(where: { $0.id == id }) { return byID }
        let wanted = reference.lowercased()
        return profiles.first { $0.name.lowercased() == wanted }
    }

    /// Adds a profile, or updates the one with the same id (never a duplicate). Returns whether it was new.
    @discardableResult
    public mutating func upsert(_ profile: Profile) -> Bool {
        if let index = profiles.firstIndex(where: { $0.id == profile.id }) {
            profiles[index] = profile
            return false
        }
        profiles.append(profile)
        return true
    }

    @discardableResult
    public mutating func remove(_ reference: String) -> Profile? {
        guard let found = find(reference) else { return nil }
        profiles.removeAll { $0.id == found.id }
        return found
    }
}
