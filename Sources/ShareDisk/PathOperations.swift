import Glibc
import ShareText

/// Removing and copying by path, for what share keeps in its own state folders (spools, job folders, temporary
/// copies): the folder is opened and the last name is worked on through its handle, like everything else written
/// under a folder (links are never followed; a tree is removed depth first).
public enum PathOperations {
    /// Removes the file, link or folder tree at `path`; true if something was removed, false if nothing was there.
    @discardableResult
    public static func remove(_ path: String) throws -> Bool {
        let (folder, name) = try split(path)
        guard let parent = try? Directory.open(folder) else { return false }
        return try parent.removeTree(name)
    }

    /// `remove`, for cleanup that has nothing to report when it fails.
    public static func removeIfPresent(_ path: String) { _ = try? remove(path) }

    /// `path` as the system resolves it: absolute, its links followed as far as it exists (the rest appended as
    /// written, `.` and `..` taken out first).
    public static func resolved(_ path: String) -> String {
        var absolute = path
        if !path.hasPrefix("/"), let here = getcwd(nil, 0) {
            defer { free(here) }
            absolute = String(cString: here) + "/" + path
        }
        var existing: [String] = []
        for part in absolute.split(separator: "/") where part != "." {
            if part == ".." { _ = existing.popLast() } else { existing.append(String(part)) }
        }
        var rest: [String] = []
        while true {
            if let real = realpath("/" + existing.joined(separator: "/"), nil) {
                defer { free(real) }
                let resolved = String(cString: real)
                guard !rest.isEmpty else { return resolved }
                return (resolved == "/" ? "" : resolved) + "/" + rest.joined(separator: "/")
            }
            guard let last = existing.popLast() else { return "/" + rest.joined(separator: "/") }
            rest.insert(last, at: 0)
        }
    }

    /// Copies the file (or folder tree) at `source` to `target`, replacing it, through handles of the folders on
    /// both sides: links are copied as links, never followed. The copy is made under a temporary name and renamed
    /// into place.
    public static func copy(_ source: String, to target: String, mode: mode_t = 0o600) throws {
        let (fromFolder, fromName) = try split(source)
        let (toFolder, toName) = try split(target)
        let from = try Directory.open(fromFolder)
        let to = try Directory.open(toFolder)
        let temporary = ".\(FileNames.prefix(toName, bytes: 200)).copy-\(UInt32.random(in: 0...UInt32.max))"
        var done = false
        defer { if !done { _ = try? to.removeTree(temporary) } }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        try copy(fromName, in: from, to: temporary, in: to, mode: mode, buffer: &buffer)
        _ = try? to.removeTree(toName)
        try to.rename(temporary, to: toName, in: to, replace: true)
        done = true
    }

    private static func copy(
        _ name: String, in from: Directory, to newName: String, in to: Directory, mode: mode_t, buffer: inout [UInt8]
    ) throws {
        guard let info = from.info(name) else { throw DiskError(.notFound, "\(from.path)/\(name) is gone") }
        switch info.kind {
        case .directory:
            let source = try from.directory(components: [name])
            let target = try to.directory(components: [newName], create: true, mode: 0o700)
            for entry in source.entries() {
                try copy(entry, in: source, to: entry, in: target, mode: mode, buffer: &buffer)
            }
        case .link:
            try to.symlink(newName, target: try from.readLink(name))
        case .file:
            try from.copyFile(name, to: newName, in: to, mode: mode, buffer: &buffer)
        default:
            throw DiskError(.wrongKind, "\(from.path)/\(name) is neither a file, a folder nor a link")
        }
    }

    private static func split(_ path: String) throws -> (folder: String, name: String) {
        var trimmed = path
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return (".", trimmed) }
        let folder = String(trimmed[..<slash])
        return (folder.isEmpty ? "/" : folder, String(trimmed[trimmed.index(after: slash)...]))
    }
}

extension Directory {
    /// Copies the file `name` here to the new file `newName` in `target` (which must not exist), with `mode` and,
    /// when given, the modification time; a copy that fails part way is removed. `buffer` is reused between copies.
    public func copyFile(
        _ name: String, to newName: String, in target: Directory, mode: mode_t, modifiedNanoseconds: Int64? = nil,
        buffer: inout [UInt8]
    ) throws {
        if buffer.isEmpty { buffer = [UInt8](repeating: 0, count: 1 << 20) }
        let input = try openFile(name, .read)
        defer { input.close() }
        let output = try target.openFile(newName, .create, mode: mode)
        var done = false
        defer {
            output.close()
            if !done { _ = try? target.remove(newName) }
        }
        var offset: UInt64 = 0
        while true {
            let n = try buffer.withUnsafeMutableBytes { try input.read(into: $0, at: offset) }
            if n == 0 { break }
            try buffer.withUnsafeBytes { try output.write(UnsafeRawBufferPointer(rebasing: $0[0..<n]), at: offset) }
            offset += UInt64(n)
        }
        if let modifiedNanoseconds {
            try target.setAttributes(newName, mode: mode, modifiedNanoseconds: modifiedNanoseconds)
        }
        done = true
    }

    /// The same with a buffer of its own.
    public func copyFile(
        _ name: String, to newName: String, in target: Directory, mode: mode_t, modifiedNanoseconds: Int64? = nil
    ) throws {
        var buffer: [UInt8] = []
        try copyFile(
            name, to: newName, in: target, mode: mode, modifiedNanoseconds: modifiedNanoseconds, buffer: &buffer)
    }
}
