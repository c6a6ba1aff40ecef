/// Lexical checks on archive names and link targets: what may be created inside a target folder.
public enum SafePath {
    /// The components of a relative entry name (`.` and empty components dropped), or nil when it is absolute,
    /// climbs with `..`, or has a component too long for a file system. An empty result names the root itself.
    public static func components(_ path: String) -> [String]? {
        guard !path.hasPrefix("/"), path.utf8.count <= 4096 else { return nil }
        var out: [String] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            if part == "." { continue }
            if part == ".." || part.utf8.count > 255 { return nil }
            out.append(String(part))
        }
        return out
    }

    /// Whether a symbolic link at `link` (relative to the root) pointing to `target` resolves inside the root,
    /// following the other links of the same archive (`links`: path → target) as the file system would, at most 40
    /// times. Absolute targets never do.
    public static func linkStaysInside(link: String, target: String, links: [String: String] = [:]) -> Bool {
        guard let parts = components(link) else { return false }
        return resolvesInside(link: parts, target: target) { links[$0.joined(separator: "/")] }
    }

    /// Whether `target`, read as the link at `link` would read it, stays inside the root: each component is checked
    /// with `linkAt` (the target of a link at that path, or nil), links followed at most 40 times, and a `..` above
    /// the root leaves it. Absolute targets never stay inside.
    static func resolvesInside(link: [String], target: String, linkAt: ([String]) -> String?) -> Bool {
        guard !target.isEmpty, !target.hasPrefix("/") else { return false }
        var stack = Array(link.dropLast())
        var pending = Array(target.split(separator: "/", omittingEmptySubsequences: true).reversed())
        var expansions = 0
        while let part = pending.popLast() {
            switch part {
            case ".": continue
            case "..":
                if stack.isEmpty { return false }
                stack.removeLast()
            default:
                stack.append(String(part))
                guard let inner = linkAt(stack) else { continue }
                expansions += 1
                guard expansions <= 40, !inner.isEmpty, !inner.hasPrefix("/") else { return false }
                stack.removeLast()
                pending += inner.split(separator: "/", omittingEmptySubsequences: true).reversed()
            }
        }
        return true
    }
}

/// Where an entry's data begins, read from its raw tar header blocks: extension headers (pax `x`/`g`, GNU `L`/`K`)
/// are skipped to the entry's own header. Nil for forms whose data is not a plain run of bytes (GNU sparse) or when
/// the bytes given do not reach the end of the header.
enum TarHeaderSpan {
    static func length(of bytes: [UInt8]) -> Int? {
        var position = 0
        for _ in 0..<16 {
            guard position + 512 <= bytes.count else { return nil }
            let type = bytes[position + 156]
            guard let size = parseSize(bytes[(position + 124)..<(position + 136)]) else { return nil }
            switch type {
            case UInt8(ascii: "x"), UInt8(ascii: "g"), UInt8(ascii: "L"), UInt8(ascii: "K"):
                position += 512 + Int((size + 511) / 512 * 512)
            case UInt8(ascii: "S"):
                return nil
            default:
                return position + 512
            }
        }
        return nil
    }

    /// An octal or base-256 size field.
    static func parseSize(_ field: ArraySlice<UInt8>) -> UInt64? {
        guard let first = field.first else { return nil }
        if first & 0x80 != 0 {
            var value: UInt64 = UInt64(first & 0x7f)
            for byte in field.dropFirst() {
                guard value < (1 << 55) else { return nil }
                value = value << 8 | UInt64(byte)
            }
            return value
        }
        var value: UInt64 = 0
        for byte in field {
            if byte == 0 || byte == 32 {
                if value > 0 { break } else { continue }
            }
            guard byte >= 48, byte <= 55, value < (1 << 60) else { return nil }
            value = value * 8 + UInt64(byte - 48)
        }
        return value
    }
}
