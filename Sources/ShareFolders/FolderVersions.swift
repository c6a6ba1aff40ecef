import FoundationEssentials
import ShareText
import Glibc
import ShareDisk
import ShareEngine
import ShareSync
import ShareTrust

/// The versions of a synced folder: files replaced or removed here by a change from another device, kept inside
/// the folder (`.share-versions`, never synced, never scanned) at their own path with the time they were replaced
/// in the name (`notes~20261127-030000.txt`, local time, as Syncthing's simple versioning names them), for a number of
/// days (a trash can: every version kept until it is that old). Kept as a second name of the same file (a hard
/// link: no bytes copied), or as a copy where the file system has none. Used under the folder's lock.
struct FolderVersions {
    let root: Directory
    /// How long a version is kept; 0: none kept.
    let days: Int

    static let defaultDays = 30

    /// One kept version.
    struct Version: Equatable {
        var path: String
        var time: Date
        var size: UInt64
        /// Where it is beneath the versions folder.
        var stored: String
    }

    /// `name` with `~TIME` before its extension (a name near the longest a file system allows has its stem
    /// fitted: `heldName`).
    static func stored(_ name: String, at time: Date) -> String {
        let stamp = TimeText.string(secondsSince1970: time.timeIntervalSince1970, format: "%Y%m%d-%H%M%S")
        let (stem, ext) = split(heldName(name))
        return stem + "~" + stamp + ext
    }

    /// A name's stem and extension (with its dot; a leading dot is part of the stem).
    private static func split(_ name: String) -> (stem: Substring, ext: Substring) {
        let dot = name.lastIndex(of: ".").flatMap { $0 == name.startIndex ? nil : $0 }
        guard let dot else { return (name[...], "") }
        return (name[..<dot], name[dot...])
    }

    /// The name a version of `name` is kept under, without its time: `name` itself, or, when a kept version's
    /// name would pass the longest a file system allows, its stem cut and marked by a hash of the whole name (an
    /// extension of more than 32 bytes cut with it), so that the file is kept rather than its replacement refused.
    static func heldName(_ name: String) -> String {
        // "~YYYYMMDD-HHMMSS" and room for "-N".
        let (stem, ext) = split(name)
        let fitted = FileNames.fitted(stem: String(stem), ext: String(ext), room: FileNames.longest - 16 - 8)
        return fitted.stem + fitted.ext
    }

    /// The original name and the time of a stored name (`-2`, `-3` … after the time: more than one version in
    /// the same second); nil for a name this did not make.
    static func parse(_ stored: String) -> (name: String, time: Date)? {
        guard let tilde = stored.lastIndex(of: "~") else { return nil }
        let after = stored[stored.index(after: tilde)...]
        guard after.count >= 15, let seconds = TimeText.seconds(compact: after.prefix(15)) else { return nil }
        let time = Date(timeIntervalSince1970: seconds)
        var rest = after.dropFirst(15)
        if rest.hasPrefix("-") {
            let digits = rest.dropFirst().prefix { $0.isNumber }
            guard !digits.isEmpty else { return nil }
            rest = rest.dropFirst(1 + digits.count)
        }
        guard rest.isEmpty || rest.hasPrefix(".") else { return nil }
        return (String(stored[..<tilde]) + rest, time)
    }

    /// Keeps the file `leaf` of `folder` (at `path` in the folder) as a version, before it is replaced or removed.
    func keep(_ folder: Directory, _ leaf: String, path: String, now: Date = Date()) throws {
        guard days > 0, let info = folder.info(leaf), info.kind == .file else { return }
        let parts = path.split(separator: "/").map(String.init)
        let target = try root.directory(components: [SyncNames.versions] + parts.dropLast(), create: true, mode: 0o755)
        var name = Self.stored(leaf, at: now)
        var n = 1
        while target.info(name) != nil {
            n += 1
            let base = Self.stored(leaf, at: now)
            let dot = base.lastIndex(of: ".").flatMap { base[..<$0].includes("~") ? $0 : nil }
            name = dot.map { base[..<$0] + "-\(n)" + base[$0...] } ?? base + "-\(n)"
            guard n < 1000 else { throw FolderDiskError(path, "too many versions of it in one second") }
        }
        do {
            try folder.link(leaf, to: name, in: target)
        } catch {
            // No hard links here (a FAT disk): a copy.
            try folder.copyFile(
                leaf, to: name, in: target, mode: info.mode & 0o777, modifiedNanoseconds: info.modifiedTime)
        }
    }

    /// Every version kept (beneath `path` when given: that file's, or a folder's files'), newest first.
    func list(_ path: String? = nil) -> [Version] {
        guard let top = try? root.directory(components: [SyncNames.versions]) else { return [] }
        var found: [Version] = []
        let heldAs = path.map { path in
            let slash = path.lastIndex(of: "/")
            return (slash.map { String(path[...$0]) } ?? "")
                + Self.heldName(String(path[(slash.map(path.index(after:)) ?? path.startIndex)...]))
        }
        var pending: [(Directory, String)] = [(top, "")]
        var visited = 0
        while let (folder, prefix) = pending.popLast(), visited < 1_000_000 {
            for name in folder.entries() {
                visited += 1
                guard let info = folder.info(name) else { continue }
                let inside = prefix.isEmpty ? name : prefix + "/" + name
                if info.kind == .directory {
                    if let child = try? folder.directory(components: [name]) { pending.append((child, inside)) }
                    continue
                }
                guard info.kind == .file, let (leaf, time) = Self.parse(name) else { continue }
                var original = prefix.isEmpty ? leaf : prefix + "/" + leaf
                // A version of a long name, kept under its fitted name, is listed as the file's when asked by it.
                if let path, let heldAs, original == heldAs { original = path }
                if let path, original != path, !original.hasPrefix(path + "/") { continue }
                found.append(Version(path: original, time: time, size: info.size, stored: inside))
            }
        }
        return found.sorted { ($0.time, $0.path) > ($1.time, $1.path) }
    }

    /// Puts a kept version of `path` back (the newest, or the newest kept at or before `at`); what is at the path
    /// now is kept as a version first. The folder's next scan takes it as a change made here.
    func restore(_ path: String, at: Date? = nil) throws -> Version {
        let all = list(path).filter { $0.path == path }
        guard !all.isEmpty else {
            throw ShareFailure(.noInput, "no version of \(path) is kept (share sync versions lists them)")
        }
        guard let chosen = all.first(where: { at == nil || $0.time <= at! }) else {
            throw ShareFailure(
                .noInput,
                "no version of \(path) is as old as that; the oldest kept is \(TimeText.string(secondsSince1970: all.last!.time.timeIntervalSince1970, format: "%Y%m%d-%H%M%S"))"
            )
        }
        let storedParts = chosen.stored.split(separator: "/").map(String.init)
        let source = try root.directory(components: [SyncNames.versions] + storedParts.dropLast())
        guard let info = source.info(storedParts.last!), info.kind == .file else {
            throw ShareFailure(.noInput, "the version of \(path) went away")
        }
        let parts = path.split(separator: "/").map(String.init)
        let target = try root.directory(components: Array(parts.dropLast()), create: true, mode: 0o755)
        if let now = target.info(parts.last!) {
            guard now.kind == .file else {
                throw ShareFailure(.usage, "\(path) is a folder or a link now; move it away to restore the file")
            }
            try keep(target, parts.last!, path: path)
        }
        let temporary =
            ".\(FileNames.prefix(parts.last!, bytes: 200)).share-restore-\(UInt32.random(in: 0...UInt32.max))"
        try source.copyFile(
            storedParts.last!, to: temporary, in: target, mode: info.mode & 0o777,
            modifiedNanoseconds: info.modifiedTime)
        do {
            try target.rename(temporary, to: parts.last!, in: target, replace: true)
        } catch {
            _ = try? target.remove(temporary)
            throw error
        }
        return chosen
    }

    /// Removes versions older than the folder keeps them (and folders left empty). How many went.
    @discardableResult
    func clean(now: Date = Date()) -> Int {
        guard days > 0 else { return 0 }
        let limit = now.addingTimeInterval(-Double(days) * 86_400)
        var removed = 0
        for version in list() where version.time < limit {
            let parts = version.stored.split(separator: "/").map(String.init)
            if let folder = try? root.directory(components: [SyncNames.versions] + parts.dropLast()),
                (try? folder.remove(parts.last!)) == true
            {
                removed += 1
            }
        }
        return removed
    }
}
