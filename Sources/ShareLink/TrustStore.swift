import Foundation
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
    public var added: Date

    public init(
        id: DeviceID, name: String, address: PeerAddress? = nil, relation: TrustRelation = .trusted,
        added: Date = Date()
    ) {
        self.id = id
        self.name = name
        self.address = address
        self.relation = relation
        self.added = added
    }
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
        var added: Date?
    }

    /// Loads the store; a missing file is an empty store.
    public static func load(_ file: URL) throws -> TrustStore {
        guard let data = PosixFiles.read(file.path) else {
            return TrustStore(devices: [], file: file)
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        let format: FileFormat
        do {
            format = try decoder.decode(FileFormat.self, from: data)
        } catch {
            throw ShareError(
                .dataError,
                "the trust store \(file.path) is corrupt (\(Self.reason(error))); fix it by hand or restore a backup — it was left untouched"
            )
        }
        guard format.version == 1 else {
            throw ShareError(
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
                    throw ShareError(
                        .dataError,
                        "the trust store \(file.path) is corrupt: device \(index + 1) is in a group without a name")
                }
                relation = .group(group)
            default:
                throw ShareError(
                    .dataError,
                    "the trust store \(file.path) is corrupt: device \(index + 1) has unknown relation '\(entry.relation)'"
                )
            }
            devices.append(
                TrustedDevice(
                    id: entry.id, name: entry.name, address: entry.address, relation: relation,
                    added: entry.added ?? Date(timeIntervalSince1970: 0)))
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
            switch device.relation {
            case .trusted:
                return Entry(
                    id: device.id, name: device.name, address: device.address, relation: "trusted", group: nil,
                    added: device.added)
            case .team:
                return Entry(
                    id: device.id, name: device.name, address: device.address, relation: "team", group: nil,
                    added: device.added)
            case .group(let g):
                return Entry(
                    id: device.id, name: device.name, address: device.address, relation: "group", group: g,
                    added: device.added)
            }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        try AtomicFile.write(try encoder.encode(FileFormat(version: 1, devices: entries)), to: file, mode: 0o600)
    }

    public func device(_ id: DeviceID) -> TrustedDevice? { devices.first { $0.id == id } }

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
            throw ShareError(
                .usage,
                "the name '\(device.name)' is already used by device \(other.id.short); choose another with --name")
        }
        if let index = devices.firstIndex(where: { $0.id == device.id }) {
            var updated = device
            updated.added = devices[index].added
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
