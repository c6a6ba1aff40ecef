import ShareDisk
import CoreTransferable
import FoundationEssentials
import ShareText
import ShareTrust
import ShareProtocol
import UniformTypeIdentifiers

/// What `share copy` published: only a description (paths, texts, URLs, profile names) and when it expires. Nothing
/// is produced until a peer pastes; a newer copy replaces it. Kept in `STATE/clipboard.json` (0600).
package struct ClipboardItem: Codable, Sendable, Equatable {
    package var files: [String] = []
    package var texts: [String] = []
    package var urls: [String] = []
    package var profiles: [String] = []
    package var copied = Date()
    package var expires: Date

    package init(expiresIn seconds: Double) {
        expires = Date().addingTimeInterval(seconds)
    }

    package var isExpired: Bool { Date() >= expires }

    /// What was copied, by name; a text is described by its length only, never shown.
    package var summary: String {
        let parts =
            files.map { PathText.lastComponent($0) } + texts.map { "text (\($0.count) characters)" } + urls
            + profiles.map { "profile \($0)" }
        return parts.joined(separator: ", ")
    }

    package static func file(_ paths: DevicePaths) -> URL { paths.state.appendingPathComponent("clipboard.json") }

    /// The current item, or nil (none, unreadable, or expired — an expired item is removed).
    package static func load(_ paths: DevicePaths) -> ClipboardItem? {
        let url = file(paths)
        guard let data = FileManager.default.contents(atPath: url.path),
            let item = try? JSONDecoder.iso8601.decode(ClipboardItem.self, from: data)
        else { return nil }
        if item.isExpired {
            PathOperations.removeIfPresent(url.path)
            return nil
        }
        return item
    }

    package func save(_ paths: DevicePaths) throws {
        try DevicePaths.ensurePrivateDirectory(paths.state)
        try AtomicFile.write(try JSONEncoder.iso8601.encode(self), to: Self.file(paths), mode: 0o600, durable: false)
    }

    /// The items a paste produces, for a peer with `relation`.
    package func items(device: LocalDevice, relation: PeerRelation) throws -> [OutgoingItem] {
        var items = SendItems()
        try items.add(paths: files.map { URL(fileURLWithPath: $0) })
        items.texts = texts
        items.urls = urls.compactMap { URL(string: $0) }
        try items.add(profiles: profiles, all: false, catalogFile: device.paths.profilesFile)
        return try items.items(for: relation)
    }
}
