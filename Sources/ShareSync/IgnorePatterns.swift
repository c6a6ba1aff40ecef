/// A shared folder's ignore patterns: the lines of `.shareignore` at its root, which is itself never synced. An
/// ignored path is neither scanned nor taken from the others, and what this device recorded of it before stays as it
/// was (ignoring a path never deletes it anywhere).
///
/// The rules, Syncthing's `.stignore` with gitignore's folder rule:
/// - one pattern a line; empty lines and lines beginning with `//` or `#` are comments;
/// - `*` matches any run of characters but `/`, `**` any run including `/`, `?` one character but `/`, `[abc]`,
///   `[a-z]` and `[!abc]` one of a set, `\` takes the next character as it is;
/// - a pattern beginning with `/` matches from the folder's root only; any other matches at any depth (`*.tmp`,
///   `build/out` anywhere);
/// - a pattern ending with `/` matches folders only;
/// - a pattern that matches a folder ignores everything in it, and nothing inside an ignored folder can be taken
///   back (gitignore's rule);
/// - the first pattern that matches a path decides (Syncthing's rule): `!` before a pattern takes what it matches
///   back, so `!keep.log` must come before `*.log`;
/// - `(?i)` before a pattern makes it ignore case; `(?d)` marks what it matches as deletable: such a file does not
///   keep a folder that another device removed (it is removed with it).
/// - `#include FILE` puts the patterns of another file of the folder at that line (Syncthing's rule): FILE is
///   relative to the file that names it (`/FILE` from the folder's root), inside the folder, read without following
///   a link; its patterns still match from the folder's root. An included file is a file of the folder like any
///   other, so it syncs: `#include .shareglobalignore` shares patterns among the devices while each keeps its own
///   `.shareignore`. A file included twice (a loop), more than 8 deep, beyond 32 files in all, missing or not
///   readable is reported and left out (their text, `.shareignore`'s with it, is read up to 1 MiB in all); the rest
///   of the patterns hold.
public struct IgnorePatterns: Sendable, Equatable {
    struct Rule: Sendable, Equatable {
        var negated: Bool
        var caseInsensitive: Bool
        var deletable: Bool
        var anchored: Bool
        var foldersOnly: Bool
        var glob: [Unicode.Scalar]
        var line: Int
    }

    var rules: [Rule] = []
    /// Lines that could not be used, with why.
    public private(set) var problems: [String] = []

    public static let none = IgnorePatterns()

    public init() {}

    /// Included files, at most this deep (a file the root file includes is 1 deep).
    public static let includeDepth = 8
    /// At most this many files included in all: the patterns are a few files, and each is looked at again every
    /// round (a synced file naming thousands of others is reported, not followed).
    public static let includedFiles = 32
    private static let tooMany = "more than \(includedFiles) files included (this one and the rest left out)"

    /// The patterns of `text`, the root's `.shareignore`; `read` gives the text of a folder-relative file an
    /// `#include` names (nil: missing or unreadable). Without `read`, an `#include` is reported and left out.
    public init(text: String, read: ((String) -> String?)? = nil) {
        var seen: Set<String> = []
        parse(text, file: nil, depth: 0, read: read, seen: &seen)
    }

    /// Adds the rules of `text`, the file at folder-relative `file` (nil: the root's `.shareignore`).
    private mutating func parse(
        _ text: String, file: String?, depth: Int, read: ((String) -> String?)?, seen: inout Set<String>
    ) {
        func at(_ line: Int) -> String { file.map { "\($0) line \(line)" } ?? "line \(line)" }
        for (index, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            var line = Substring(raw)
            while let last = line.last, last == "\r" || last == " " || last == "\t" { line.removeLast() }
            if line.hasPrefix("#include") && (line.count == 8 || line.dropFirst(8).first?.isWhitespace == true) {
                include(line.dropFirst(8), at: at(index + 1), in: file, depth: depth, read: read, seen: &seen)
                continue
            }
            if line.isEmpty || line.hasPrefix("//") || line.hasPrefix("#") { continue }
            var rule = Rule(
                negated: false, caseInsensitive: false, deletable: false, anchored: false, foldersOnly: false,
                glob: [], line: index + 1)
            while true {
                if line.hasPrefix("!") {
                    rule.negated = true
                    line = line.dropFirst()
                } else if line.hasPrefix("(?i)") {
                    rule.caseInsensitive = true
                    line = line.dropFirst(4)
                } else if line.hasPrefix("(?d)") {
                    rule.deletable = true
                    line = line.dropFirst(4)
                } else {
                    break
                }
            }
            if line.hasPrefix("/") {
                rule.anchored = true
                line = line.drop { $0 == "/" }
            }
            if line.hasSuffix("/") {
                rule.foldersOnly = true
                while line.hasSuffix("/") { line.removeLast() }
            }
            guard !line.isEmpty else {
                problems.append("\(at(index + 1)): a pattern that names nothing")
                continue
            }
            let text = rule.caseInsensitive ? line.lowercased() : String(line)
            rule.glob = Array(text.unicodeScalars)
            rules.append(rule)
        }
    }

    /// The `#include` of `argument` at `place` in the file `file`: its patterns added here.
    private mutating func include(
        _ argument: Substring, at place: String, in file: String?, depth: Int, read: ((String) -> String?)?,
        seen: inout Set<String>
    ) {
        guard let read else {
            problems.append("\(place): #include is not supported here")
            return
        }
        let name = argument.drop { $0 == " " || $0 == "\t" }
        guard !name.isEmpty else {
            problems.append("\(place): #include names no file")
            return
        }
        // Relative to the including file's folder; from the root when it begins with `/`.
        var parts = name.hasPrefix("/") ? [] : (file ?? "").split(separator: "/").dropLast().map(String.init)
        parts += name.split(separator: "/").map(String.init)
        let path = parts.joined(separator: "/")
        guard SyncNames.isValidPath(path), !SyncNames.isInternal(path) || path == SyncNames.ignore else {
            problems.append("\(place): #include \(name): not a file inside the folder")
            return
        }
        guard depth < Self.includeDepth else {
            problems.append("\(place): #include \(name): more than \(Self.includeDepth) files deep")
            return
        }
        guard path != SyncNames.ignore, !seen.contains(path) else {
            problems.append("\(place): #include \(name): included already (a file is included once)")
            return
        }
        guard seen.count < Self.includedFiles else {
            // Said once, at the first one left out.
            if !problems.contains(where: { $0.hasSuffix(Self.tooMany) }) {
                problems.append("\(place): #include \(name): \(Self.tooMany)")
            }
            return
        }
        seen.insert(path)
        guard let text = read(path) else {
            problems.append("\(place): #include \(name): no such file here (yet)")
            return
        }
        parse(text, file: path, depth: depth + 1, read: read, seen: &seen)
    }

    public var isEmpty: Bool { rules.isEmpty }

    /// Whether `path` (relative to the folder's root, `/`-separated) is ignored; `folder`: whether it is a folder.
    public func ignores(_ path: String, folder: Bool = false) -> Bool {
        guard !rules.isEmpty else { return false }
        let parts = path.split(separator: "/").map(String.init)
        // A folder ignored ignores everything in it.
        for end in 1..<max(1, parts.count) where decide(parts[0..<end], folder: true)?.negated == false {
            return true
        }
        return decide(parts[...], folder: folder).map { !$0.negated } ?? false
    }

    /// Whether `path` is ignored by a deletable pattern (`(?d)`): it does not keep a removed folder.
    public func isDeletable(_ path: String, folder: Bool = false) -> Bool {
        let parts = path.split(separator: "/").map(String.init)
        for end in 1...max(1, parts.count) {
            if let rule = decide(parts[0..<end], folder: end < parts.count || folder), !rule.negated {
                return rule.deletable
            }
        }
        return false
    }

    /// The first rule that matches the path made of `parts`.
    private func decide(_ parts: ArraySlice<String>, folder: Bool) -> Rule? {
        let path = parts.joined(separator: "/")
        let lowered = path.lowercased()
        for rule in rules where !rule.foldersOnly || folder {
            let subject = Array((rule.caseInsensitive ? lowered : path).unicodeScalars)
            if rule.anchored {
                if Self.match(rule.glob[...], subject[...]) { return rule }
                continue
            }
            // Anywhere: from the start of any part of the path.
            var start = 0
            while true {
                if Self.match(rule.glob[...], subject[start...]) { return rule }
                guard let slash = subject[start...].firstIndex(of: "/") else { break }
                start = slash + 1
            }
        }
        return nil
    }

    /// Whether `glob` matches all of `subject`.
    static func match(_ glob: ArraySlice<Unicode.Scalar>, _ subject: ArraySlice<Unicode.Scalar>) -> Bool {
        var g = glob.startIndex
        var s = subject.startIndex
        // Where to go back to after a `*` (a single star: not across `/`) or `**` that matched too little.
        var star: (glob: Int, subject: Int, crossesSlash: Bool)?
        while s < subject.endIndex {
            if g < glob.endIndex {
                let c = glob[g]
                if c == "*" {
                    let double = g + 1 < glob.endIndex && glob[g + 1] == "*"
                    var next = g + (double ? 2 : 1)
                    // `**/` also matches no folder at all.
                    if double, next < glob.endIndex, glob[next] == "/" {
                        if match(glob[(next + 1)...], subject[s...]) { return true }
                        next += 1
                    }
                    star = (next, s, double)
                    g = next
                    continue
                }
                if c == "?" {
                    if subject[s] != "/" {
                        g += 1
                        s += 1
                        continue
                    }
                } else if c == "[" {
                    if let (matched, end) = matchClass(glob, from: g, subject[s]), matched {
                        g = end
                        s += 1
                        continue
                    } else if matchClass(glob, from: g, subject[s]) == nil, subject[s] == "[" {
                        g += 1
                        s += 1
                        continue
                    }
                } else if c == "\\", g + 1 < glob.endIndex {
                    if glob[g + 1] == subject[s] {
                        g += 2
                        s += 1
                        continue
                    }
                } else if c == subject[s] {
                    g += 1
                    s += 1
                    continue
                }
            }
            // Back to the last star, one character further.
            guard let last = star, last.crossesSlash || subject[last.subject] != "/" else { return false }
            star = (last.glob, last.subject + 1, last.crossesSlash)
            g = last.glob
            s = last.subject + 1
        }
        while g < glob.endIndex, glob[g] == "*" { g += 1 }
        return g == glob.endIndex
    }

    /// A `[…]` class at `from`: whether `scalar` is in it and where the class ends (nil: no closing `]`, so the `[`
    /// is an ordinary character).
    static func matchClass(_ glob: ArraySlice<Unicode.Scalar>, from: Int, _ scalar: Unicode.Scalar) -> (Bool, Int)? {
        var i = from + 1
        var negated = false
        if i < glob.endIndex, glob[i] == "!" || glob[i] == "^" {
            negated = true
            i += 1
        }
        var found = false
        var first = true
        while i < glob.endIndex {
            let c = glob[i]
            if c == "]", !first { return (found != negated && scalar != "/", i + 1) }
            first = false
            if i + 2 < glob.endIndex, glob[i + 1] == "-", glob[i + 2] != "]" {
                if scalar.value >= c.value && scalar.value <= glob[i + 2].value { found = true }
                i += 3
            } else {
                if c == scalar { found = true }
                i += 1
            }
        }
        return nil
    }
}
