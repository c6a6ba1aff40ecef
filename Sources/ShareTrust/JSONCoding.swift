import FoundationEssentials
import ShareDisk
import ShareNet

extension JSONEncoder {
    public static var iso8601: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .internetDate
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}

extension JSONDecoder {
    public static var iso8601: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .internetDate
        return decoder
    }
}

/// A small JSON file that both the agent and the command line change (signed trust notices, pending offers): read,
/// changed and written back atomically (0600) under its own lock file in the same folder, so two writers never lose
/// each other's change. A file that is missing or does not decode reads as `empty`.
public enum LockedJSONFile {
    /// Renames the file `name` in `directory`, which could not be read, to `NAME.unreadable-TIME` beside it (kept for
    /// the person, never overwritten by the next change), and says so in the log; the name it now has.
    @discardableResult
    public static func keepAside(_ name: String, in directory: Directory) throws -> String {
        let aside = "\(name).unreadable-\(Int(Date().timeIntervalSince1970))"
        try directory.rename(name, to: aside, in: directory)
        Log.logger("share.files").error(
            "an unreadable file was kept aside", metadata: ["file": "\(directory.path)/\(name)", "as": "\(aside)"])
        return aside
    }

    public static func read<Value: Decodable>(_ file: URL, or empty: Value) -> Value {
        guard let data = PosixFiles.read(file.path), let value = try? JSONDecoder.iso8601.decode(Value.self, from: data)
        else { return empty }
        return value
    }

    /// `change` gets the value and the folder's handle (for files kept beside it).
    public static func update<Value: Codable, T>(
        _ file: URL, empty: Value, _ change: (inout Value, Directory) throws -> T
    ) throws -> T {
        let folder = file.deletingLastPathComponent()
        try DevicePaths.ensurePrivateDirectory(folder)
        let directory = try Directory.open(folder.path)
        let lock = try directory.lock(".\(file.lastPathComponent).lock")
        defer { lock.release() }
        var value = empty
        if let data = PosixFiles.read(file.path, limit: 64 << 20),
            let decoded = try? JSONDecoder.iso8601.decode(Value.self, from: data)
        {
            value = decoded
        } else if directory.info(file.lastPathComponent) != nil {
            // There but unreadable (damaged, or larger than anything written here should be): kept aside for the
            // user, never overwritten with an empty value.
            try keepAside(file.lastPathComponent, in: directory)
        }
        let result = try change(&value, directory)
        try directory.writeAtomically(
            file.lastPathComponent, Array(try JSONEncoder.iso8601.encode(value)), mode: 0o600)
        return result
    }
}
