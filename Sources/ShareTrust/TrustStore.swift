import FoundationEssentials
import ShareDisk
import ShareTLS

/// How a trusted device relates to this one; `TransferRepresentationVisibility` is checked against it.
public enum TrustRelation: Hashable, Sendable, CustomStringConvertible {
    /// Trusted, nothing more: receives only representations visible to all.
    case trusted
    /// The same owner's device (`.team`).
    case team
    /// A device in a named group (`.group`).
    case group(String)

    public var description: String {
        switch self {
        case .trusted: return "trusted"
        case .team: return "team"
        case .group(let name): return "group \(name)"
        }
    }
}

/// A device this one trusts.
public struct TrustedDevice: Hashable, Sendable {
    public var id: DeviceID
    public var name: String
    public var address: PeerAddress?
    public var relation: TrustRelation
    /// One of the owner's devices added as a watch (an explicit opt-in): only such a device may attach to this
    /// device's agent as a watch.
    public var watch: Bool
    public var added: Date
    /// Whether this device's offers wait for the user's answer (`share accept`); nil: the default for its relation.
    public var ask: Bool?

    public init(
        id: DeviceID, name: String, address: PeerAddress? = nil, relation: TrustRelation = .trusted,
        watch: Bool = false, added: Date = Date(), ask: Bool? = nil
    ) {
        self.id = id
        self.name = name
        self.address = address
        self.relation = relation
        self.watch = watch && AccessPolicy.mayBeWatch(relation)
        self.added = added
        self.ask = ask
    }

    /// Whether an offer from this device waits for the user: as set, else as the policy says for its relation.
    public var asks: Bool { ask ?? AccessPolicy.asksByDefault(relation) }
}

/// The list of trusted devices, kept as a human-readable JSON file (`trust.json` in the config directory), written
/// atomically. A file that does not parse is an error naming it; it is never silently emptied.
public struct TrustStore: Sendable {
    public private(set) var devices: [TrustedDevice]
    public let file: URL

    private struct FileFormat: Codable {
        var version: Int
        var devices: [Entry]
    }

    private struct Entry: Codable {
        var id: DeviceID
        var name: String
        var address: PeerAddress?
        var relation: String
        var group: String?
        var watch: Bool?
        var added: Date?
        var ask: Bool?
    }

    /// Loads the store; a missing file is an empty store.
    public static func load(_ file: URL) throws -> TrustStore {
        guard let data = PosixFiles.read(file.path) else {
            return TrustStore(devices: [], file: file)
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .internetDate
        let format: FileFormat
        do {
            format = try decoder.decode(FileFormat.self, from: data)
        } catch {
            throw ShareFailure(
                .dataError,
                "the trust store \(file.path) is corrupt (\(Self.reason(error))); fix it by hand or restore a backup — it was left untouched"
            )
        }
        guard format.version == 1 else {
            throw ShareFailure(
                .dataError, "the trust store \(file.path) has version \(format.version); this share reads version 1")
        }
        var devices: [TrustedDevice] = []
        for (index, entry) in format.devices.enumerated() {
            let relation: TrustRelation
            switch entry.relation {
            case "trusted": relation = .trusted
            case "team": relation = .team
            case "group":
                guard let group = entry.group, !group.isEmpty else {
                    throw ShareFailure(
                        .dataError,
                        "the trust store \(file.path) is corrupt: device \(index + 1) is in a group without a name")
                }
                relation = .group(group)
            default:
                throw ShareFailure(
                    .dataError,
                    "the trust store \(file.path) is corrupt: device \(index + 1) has unknown relation '\(entry.relation)'"
                )
            }
            devices.append(
                TrustedDevice(
                    id: entry.id, name: entry.name, address: entry.address, relation: relation,
                    watch: entry.watch ?? false, added: entry.added ?? Date(timeIntervalSince1970: 0), ask: entry.ask))
        }
        return TrustStore(devices: devices, file: file)
    }

    private static func reason(_ error: Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context), DecodingError.typeMismatch(_, let context),
            DecodingError.valueNotFound(_, let context), DecodingError.keyNotFound(_, let context):
            let path = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            return path.isEmpty ? context.debugDescription : "at \(path): \(context.debugDescription)"
        default:
            return "\(error)"
        }
    }

    public func save() throws {
        let entries = devices.map { device -> Entry in
            let (relation, group): (String, String?)
            switch device.relation {
            case .trusted: (relation, group) = ("trusted", nil)
            case .team: (relation, group) = ("team", nil)
            case .group(let g): (relation, group) = ("group", g)
            }
            return Entry(
                id: device.id, name: device.name, address: device.address, relation: relation, group: group,
                watch: device.watch ? true : nil, added: device.added, ask: device.ask)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .internetDate
        try AtomicFile.write(try encoder.encode(FileFormat(version: 1, devices: entries)), to: file, mode: 0o600)
    }

    public func device(_ id: DeviceID) -> TrustedDevice? { devices.first { $0.id == id } }

    /// Loads the store, lets `change` modify it and saves it, all under the store's lock file (`trust.json.lock`):
    /// two commands changing trust at once (two pairings) never lose an entry. Returns what `change` returned.
    @discardableResult
    public static func update<T>(_ file: URL, _ change: (inout TrustStore) throws -> T) throws -> T {
        let folder: Directory
        do {
            folder = try Directory.open(file.deletingLastPathComponent().path, create: true, mode: 0o700)
        } catch let error as DiskError {
            throw ShareFailure(.configuration, "cannot open the trust store's folder: \(error.message)")
        }
        let lock: FileLock
        do {
            lock = try folder.lock(".\(file.lastPathComponent).lock")
        } catch let error as DiskError {
            throw ShareFailure(.configuration, "cannot lock the trust store: \(error.message)")
        }
        defer { lock.release() }
        var store = try load(file)
        let result = try change(&store)
        try store.save()
        return result
    }

    /// Finds a device by name (case-insensitive), full ID, or a unique prefix of its ID (at least 7 characters).
    public func find(_ reference: String) -> TrustedDevice? {
        if let id = try? DeviceID(parsing: reference) { return device(id) }
        if let byName = devices.first(where: { $0.name.lowercased() == reference.lowercased() }) {
            return byName
        }
        let prefix = reference.uppercased().filter { $0 != "-" }
        guard prefix.count >= 7 else { return nil }
        let matches = devices.filter { $0.id.description.filter { $0 != "-" }.hasPrefix(prefix) }
        return matches.count == 1 ? matches[0] : nil
    }

    /// Adds or updates a device. A name used by another device is an error (names address peers).
    public mutating func add(_ device: TrustedDevice) throws {
        if let other = devices.first(where: {
            $0.id != device.id && $0.name.lowercased() == device.name.lowercased()
        }) {
            throw ShareFailure(
                .usage,
                "the name '\(device.name)' is already used by device \(other.id.short); choose another with --name")
        }
        if let index = devices.firstIndex(where: { $0.id == device.id }) {
            var updated = device
            updated.added = devices[index].added
            if updated.ask == nil { updated.ask = devices[index].ask }
            devices[index] = updated
        } else {
            devices.append(device)
        }
    }

    /// Removes a device by name or ID; returns it.
    public mutating func remove(_ reference: String) -> TrustedDevice? {
        guard let found = find(reference) else { return nil }
        devices.removeAll { $0.id == found.id }
        return found
    }
}
