import FoundationEssentials
import ShareEngine
import ShareThreads
import ShareTrust
import ShareDisk

/// The shared folders this device keeps and the folders others offer it, in `STATE/folders/folders.json` (written
/// whole and atomically at each change; read once at start).
final class FolderBook: Sendable {
    struct Contents: Codable, Equatable {
        var folders: [SharedFolderSettings] = []
        var offers: [FolderOffer] = []
        /// Offers declined, by folder ID and device (not offered again).
        var declined: [String] = []
        /// The offers declined, as they were (the newest `keptRemovals`): `share sync accept` takes one after all.
        var declinedOffers: [FolderOffer] = []
        /// Folders removed here, by folder ID and each device they were shared with (the newest `keptRemovals`): the
        /// devices that still share them hear that they were removed, not only that they are not shared back.
        var removed: [String] = []

        init() {}

        init(from decoder: Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            folders = try container.decodeIfPresent([SharedFolderSettings].self, forKey: .folders) ?? []
            offers = try container.decodeIfPresent([FolderOffer].self, forKey: .offers) ?? []
            declined = try container.decodeIfPresent([String].self, forKey: .declined) ?? []
            declinedOffers = try container.decodeIfPresent([FolderOffer].self, forKey: .declinedOffers) ?? []
            removed = try container.decodeIfPresent([String].self, forKey: .removed) ?? []
        }
    }

    /// How many removals (folder and device) are remembered.
    static let keptRemovals = 1024

    /// A `declined` or `removed` entry's folder ID and device.
    static func split(_ entry: String) -> (id: String, device: String) {
        guard let bar = entry.firstIndex(of: "|") else { return (entry, "") }
        return (String(entry[..<bar]), String(entry[entry.index(after: bar)...]))
    }

    let file: URL
    private let contents: Guarded<Contents>
    /// Why the book in memory is not the one on the disk (a write failed: a full disk), until a write succeeds.
    private let unsaved = Guarded<String?>(nil)

    init(directory: URL) throws {
        try DevicePaths.ensurePrivateDirectory(directory)
        file = directory.appendingPathComponent("folders.json")
        var loaded = Contents()
        if let data = FileManager.default.contents(atPath: file.path) {
            if let decoded = try? JSONDecoder.iso8601.decode(Contents.self, from: data) {
                loaded = decoded
            } else {
                // There but unreadable (damaged): kept aside for the person, never overwritten by the next change
                // (the folders themselves are untouched; each is shared again with share sync add).
                try LockedJSONFile.keepAside("folders.json", in: Directory.open(directory.path))
            }
        }
        contents = Guarded(loaded)
    }

    var snapshot: Contents { contents.withLock { $0 } }
    var folders: [SharedFolderSettings] { contents.withLock { $0.folders } }
    var offers: [FolderOffer] { contents.withLock { $0.offers } }

    func folder(_ id: String) -> SharedFolderSettings? { contents.withLock { $0.folders.first { $0.id == id } } }

    /// Changes the book and writes it; returns what `body` returned.
    @discardableResult
    func change<T>(_ body: (inout Contents) throws -> T) throws -> T {
        try contents.withLock { contents in
            var changed = contents
            let result = try body(&changed)
            guard changed != contents else { return result }
            try write(changed)
            contents = changed
            return result
        }
    }

    /// Changes the book in memory whatever the disk allows, and writes it when it can: what the agent learned of
    /// the other devices (a folder offered, a device that joined one) holds while it runs though the disk is full,
    /// and the next write that succeeds carries it. The first write that fails is logged, once until one succeeds.
    func note(_ body: (inout Contents) -> Void) {
        contents.withLock { contents in
            var changed = contents
            body(&changed)
            guard changed != contents else { return }
            contents = changed
            do {
                try write(changed)
            } catch {
                let first = unsaved.withLock { unsaved in
                    defer { unsaved = "\(error)" }
                    return unsaved == nil
                }
                if first {
                    FolderService.log.warning(
                        "the list of shared folders and offers cannot be saved: it is kept while the agent runs and saved with the next change that can be",
                        metadata: ["file": "\(file.path)", "reason": "\(error)"])
                }
            }
        }
    }

    /// Writes the book; a failure is an input/output one, a full disk said as such with what to do.
    private func write(_ changed: Contents) throws {
        do {
            try AtomicFile.write(try JSONEncoder.iso8601.encode(changed), to: file, mode: 0o600, durable: true)
        } catch let error as AtomicFile.FileError where error.isNoSpace {
            throw ShareFailure(
                .ioError,
                "cannot save the list of shared folders (\(file.path)): the disk is full; free some space and try again"
            )
        } catch {
            throw ShareFailure(.ioError, "cannot save the list of shared folders: \(error)")
        }
        unsaved.withLock { $0 = nil }
    }

    func wasDeclined(_ id: String, from device: String) -> Bool {
        contents.withLock { $0.declined.contains("\(id)|\(device)") }
    }
}
