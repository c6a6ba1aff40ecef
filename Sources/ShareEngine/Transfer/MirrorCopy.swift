import Foundation
import ShareDisk
import ShareProtocol
import ShareTLS
import ShareThreads

/// The receiving side of a mirrored folder (`share mirror`): the copy lives in the receive folder under the
/// folder's name; each file arrives verified and replaces its earlier version atomically; removed files go. What
/// this copy last wrote is remembered (size, modification time, inode per path): a file changed here since — or
/// one that was never the mirror's — is never overwritten or removed silently: it is moved aside as a conflict copy
/// (`name.sync-conflict-YYYYMMDD-HHMMSS.ext`, as Syncthing names them) and the update goes on. One-way: nothing
/// changed here goes back.
final class MirrorCopy {
    struct Record: Codable, Equatable {
        var s: UInt64
        var m: Int64
        var n: Int
        var i: UInt64

        init(_ info: FileInfo) {
            s = info.size
            m = info.modified
            n = info.modifiedNanoseconds
            i = info.inode
        }
    }

    /// One line of the journal: a path written (with what it was then) or removed.
    private struct Line: Codable {
        var p: String
        var r: Record?
    }

    let root: Directory
    private let versions: Versions
    private let journalName: String
    /// What this copy last wrote, read from its journal once per process (updates of a large folder do not read it
    /// again); changed only under `DiskSink.mirrorLock`.
    final class Written: @unchecked Sendable {  // mutated only under DiskSink.mirrorLock
        var records: [String: Record] = [:]
        var lines = 0
    }
    private static let journals = Guarded([String: Written]())
    private let written: Written
    private var records: [String: Record] {
        get { written.records }
        set { written.records = newValue }
    }
    private var lines: Int {
        get { written.lines }
        set { written.lines = newValue }
    }
    /// Conflict copies made in this session (paths inside the copy).
    private(set) var conflicts: [String] = []

    /// The copy of `folder` from `sender` in `target` (made when missing).
    init(target: Directory, folder: String, sender: DeviceID, versions: Versions) throws {
        do {
            root = try target.directory(folder, create: true, mode: 0o755)
        } catch let error as DiskError {
            throw ProtocolError(.storage, "cannot keep the mirrored folder \(folder): \(error.message)")
        }
        self.versions = versions
        let place = target.ownInfo.map { "\($0.device):\($0.inode)" } ?? target.path
        let key = SHA256Hasher.hash(Array("\(place)|\(sender.description)|\(folder)".utf8)).hexString.prefix(32)
        let name = "mirror-\(key).log"
        journalName = name
        let folder = versions.folder
        written = Self.journals.withLock { journals in
            let place = "\(folder.path)/\(name)"
            if let known = journals[place] { return known }
            let loaded = Written()
            if let bytes = try? folder.readFile(name, limit: 256 << 20) {
                let decoder = JSONDecoder()
                for line in bytes.split(separator: UInt8(ascii: "\n")) {
                    guard let entry = try? decoder.decode(Line.self, from: Data(line)) else { continue }
                    loaded.records[entry.p] = entry.r
                    loaded.lines += 1
                }
            }
            journals[place] = loaded
            return loaded
        }
        if lines > 2 * records.count + 1000 { compact() }
    }

    /// The folder a path's file goes in (made when missing), and the file's name.
    private func place(of path: String, create: Bool) throws -> (Directory, String) {
        guard let parts = MirrorEntry.components(path) else {
            throw ProtocolError(.badMessage, "a mirrored path leaves its folder")
        }
        let directory = try root.directory(components: parts.dropLast().map(String.init), create: create, mode: 0o755)
        return (directory, String(parts.last!))
    }

    /// The file now at `path` (or, for a rename, at `was`), to receive the new version against: only a file this
    /// copy wrote and that is still as it wrote it. Anything else there (the user's own file, or one changed since)
    /// is no basis: a sender learns nothing of bytes it did not send.
    func basis(path: String, was: String?) -> (Directory, String, FileInfo)? {
        for candidate in [path, was].compactMap({ $0 }) {
            guard let (directory, leaf) = try? place(of: candidate, create: false),
                let info = directory.info(leaf), info.kind == .file, records[candidate] == Record(info)
            else { continue }
            return (directory, leaf, info)
        }
        return nil
    }

    /// Puts a verified file at `path`, replacing the mirror's earlier version; a file there that the mirror did not
    /// write is moved aside first.
    func place(_ partial: ReceivedBytes, path: String, mode: mode_t) throws {
        let (directory, leaf) = try place(of: path, create: true)
        try moveAsideIfChanged(directory, leaf, path: path)
        try partial.place(into: directory, as: leaf, mode: mode)
        record(path, directory.info(leaf).map(Record.init))
    }

    /// Removes the files the sender removed; one changed here is moved aside instead. Returns how many went.
    func remove(_ paths: [String]) -> Int {
        var removed = 0
        for path in paths {
            guard let (directory, leaf) = try? place(of: path, create: false), let info = directory.info(leaf) else {
                record(path, nil)
                continue
            }
            if info.kind == .file, records[path] == Record(info) {
                if (try? directory.remove(leaf)) == true { removed += 1 }
            } else if info.kind == .file {
                try? moveAside(directory, leaf, path: path)
            }
            record(path, nil)
        }
        return removed
    }

    private func moveAsideIfChanged(_ directory: Directory, _ leaf: String, path: String) throws {
        guard let info = directory.info(leaf) else { return }
        guard info.kind == .file else {
            throw ProtocolError(.storage, "\(path) in the mirrored folder is not a file here; it was left alone")
        }
        if records[path] != Record(info) { try moveAside(directory, leaf, path: path) }
    }

    private func moveAside(_ directory: Directory, _ leaf: String, path: String) throws {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd-HHmmss"
        let dot = leaf.lastIndex(of: ".").flatMap { $0 == leaf.startIndex ? nil : $0 }
        let stem = dot.map { String(leaf[..<$0]) } ?? leaf
        let ext = dot.map { String(leaf[$0...]) } ?? ""
        let name = directory.freeName(for: "\(stem).sync-conflict-\(formatter.string(from: Date()))\(ext)")
        do {
            try directory.rename(leaf, to: name, in: directory)
        } catch let error as DiskError {
            throw ProtocolError(.storage, "cannot keep the changed \(path) aside: \(error.message)")
        }
        let parent = path.split(separator: "/").dropLast().joined(separator: "/")
        conflicts.append(parent.isEmpty ? name : parent + "/" + name)
    }

    private func record(_ path: String, _ record: Record?) {
        records[path] = record
        guard let bytes = try? JSONEncoder().encode(Line(p: path, r: record)) else { return }
        let file =
            (try? versions.folder.openFile(journalName, .update))
            ?? (try? versions.folder.openFile(journalName, .create))
        guard let file else { return }
        defer { file.close() }
        try? file.write((bytes + [UInt8(ascii: "\n")])[...], at: file.size)
        lines += 1
    }

    /// Rewrites the journal with one line per file.
    private func compact() {
        var out: [UInt8] = []
        for (path, record) in records {
            guard let bytes = try? JSONEncoder().encode(Line(p: path, r: record)) else { continue }
            out += bytes + [UInt8(ascii: "\n")]
        }
        try? versions.folder.writeAtomically(journalName, out, durable: false)
        lines = records.count
    }
}
