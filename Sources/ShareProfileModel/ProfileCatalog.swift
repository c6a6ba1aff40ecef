import Foundation

/// The profiles of one device, stored as JSON in its data directory (`$XDG_DATA_HOME/share/profiles.json`).
public struct ProfileCatalog: Sendable {
    public private(set) var profiles: [Profile]
    public let file: URL

    public struct CatalogError: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    public static func load(_ file: URL) throws -> ProfileCatalog {
        guard let data = FileManager.default.contents(atPath: file.path) else {
            return ProfileCatalog(profiles: [], file: file)
        }
        do {
            return ProfileCatalog(profiles: try JSONDecoder().decode([Profile].self, from: data), file: file)
        } catch {
            throw CatalogError(
                description: "the profile catalog \(file.path) is corrupt (\(error)); it was left untouched")
        }
    }

    /// Writes the catalog atomically (temporary file, then rename).
    public func save() throws {
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        try encoder.encode(profiles).write(to: file, options: .atomic)
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
