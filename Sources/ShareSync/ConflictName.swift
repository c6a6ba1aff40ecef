import ShareText
/// The name of a conflict copy: `stem.sync-conflict-YYYYMMDD-HHMMSS-DEVICE.ext`, as Syncthing names them, where the
/// time is the losing version's modification time (UTC) and DEVICE the first seven characters of the device that
/// made it. Both come from the version itself, so every device that holds the same losing version makes the same
/// copy under the same name, and the copies agree instead of multiplying.
public enum ConflictName {
    public static let marker = ".sync-conflict-"

    /// The longest name a copy may have: the longest a file system allows (255 bytes), less room for the number
    /// that tells apart copies of one second and device.
    static let longestName = FileNames.longest - 8
    /// What a copy's name holds besides its original's stem and extension: the marker, the time and the device.
    static let added = marker.utf8.count + 15 + 1 + 7
    /// The conflict copy of `path` for a losing version modified at `modified` (nanoseconds) by `device` (its short
    /// form, e.g. "ABCDEF1"); `number` past 1 tells apart another copy of the same second and device (after the
    /// device: `notes.sync-conflict-…-ABCDEF1-2.txt`, so that it still names `notes.txt`).
    public static func make(for path: String, modified: Int64, device: String, number: Int = 1) -> String {
        let (folder, stem, ext) = fitted(path)
        return folder + stem + marker + timestamp(modified) + "-" + String(device.prefix(7))
            + (number > 1 ? "-\(number)" : "") + ext
    }

    /// A path's folder, stem and extension as its copies' names hold them: whole when a copy's name fits in
    /// `longestName` bytes, else the stem cut at a character and marked "…" and 8 hex digits of a hash of the whole
    /// name (two long names alike at the start are told apart; every device computes the same), an extension too
    /// long to keep beside it cut as part of the stem, so that a copy of a file whose name is near the longest can
    /// be made at all.
    static func fitted(_ path: String) -> (folder: String, stem: String, ext: String) {
        let (folder, stem, ext) = parts(path)
        let (fittedStem, fittedExt) = FileNames.fitted(stem: stem, ext: ext, room: longestName - added)
        return (folder, fittedStem, fittedExt)
    }

    /// Whether `original`, taken from a copy's name, may be the shortened form of a longer path (its stem ends in
    /// "…" and 8 hex digits).
    public static func mayBeShortened(_ original: String) -> Bool {
        let stem = parts(original).stem.utf8
        guard stem.count > 11 else { return false }
        let tail = stem.suffix(11)
        return tail.starts(with: "…".utf8)
            && tail.dropFirst(3).allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// Whether `path` names a conflict copy (which is never itself set aside as one again).
    public static func isConflictCopy(_ path: String) -> Bool {
        // Most paths are no copy, and say so without being taken apart (every entry recorded asks).
        path.includesBytes(marker) && original(of: path) != nil
    }

    /// Whether `copy` is a conflict copy of `path` (any time, any device), its name shortened or not.
    public static func isCopy(_ copy: String, of path: String) -> Bool {
        guard let original = original(of: copy) else { return false }
        let (folder, stem, ext) = fitted(path)
        return original == path || original == folder + stem + ext
    }

    /// What orders a path's conflict copies oldest first: the time in the copy's name (then the rest of it).
    public static func age(_ copy: String) -> String {
        guard let range = copy.lastRange(of: marker) else { return copy }
        return String(copy[range.upperBound...])
    }

    /// The path a conflict copy was made of (nil when `copy` is not one); of a copy whose name was shortened, the
    /// shortened path (its stem ending in "…" and the hash of the whole name).
    public static func original(of copy: String) -> String? {
        let slash = copy.lastIndex(of: "/")
        let folder = slash.map { String(copy[...$0]) } ?? ""
        let name = slash.map { String(copy[copy.index(after: $0)...]) } ?? copy
        guard let range = name.firstRange(of: marker), range.lowerBound > name.startIndex else { return nil }
        let rest = name[range.upperBound...]
        // YYYYMMDD-HHMMSS-DEVICE, then the extension (with its dot) if any.
        let ext = rest.firstIndex(of: ".").map { String(rest[$0...]) } ?? ""
        return folder + String(name[..<range.lowerBound]) + ext
    }

    /// A path's folder (with its trailing slash), its name's stem and extension (with its dot; a leading dot is
    /// part of the stem).
    static func parts(_ path: String) -> (folder: String, stem: String, ext: String) {
        let slash = path.lastIndex(of: "/")
        let folder = slash.map { String(path[...$0]) } ?? ""
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        let dot = name.lastIndex(of: ".").flatMap { $0 == name.startIndex ? nil : $0 }
        return (folder, dot.map { String(name[..<$0]) } ?? name, dot.map { String(name[$0...]) } ?? "")
    }

    /// `YYYYMMDD-HHMMSS` (UTC) of a time in nanoseconds since 1970, without Foundation (civil-from-days).
    static func timestamp(_ nanoseconds: Int64) -> String {
        // Floor division (a time before 1970 is in the second that began before it), without going below the range.
        let seconds = nanoseconds / 1_000_000_000 - (nanoseconds % 1_000_000_000 < 0 ? 1 : 0)
        var days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let rest = seconds - days * 86_400
        days += 719_468
        let era = (days >= 0 ? days : days - 146_096) / 146_097
        let dayOfEra = days - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func pad(_ value: Int64, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return pad(year, 4) + pad(month, 2) + pad(day, 2) + "-" + pad(rest / 3600, 2) + pad(rest % 3600 / 60, 2)
            + pad(rest % 60, 2)
    }
}
