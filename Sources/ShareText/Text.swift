import Glibc

// Text helpers that Foundation's `NSString` layer would otherwise provide. That layer (`String(format:)`,
// `CharacterSet`, `trimmingCharacters`, `range(of:options:)`, `precomposedStringWithCanonicalMapping`,
// `NSString.pathExtension`) lives in swift-corelibs-foundation, which links CoreFoundation and ICU (about 40 MB of
// a statically linked `share`); these use the standard library and the C library only.

extension StringProtocol {
    /// Without leading and trailing white space and line breaks (what `.whitespacesAndNewlines` trims).
    package var trimmed: String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }

    /// Without leading and trailing white space other than line breaks (what `.whitespaces` trims).
    package var trimmedSpaces: String {
        let isSpace: (Character) -> Bool = { $0.isWhitespace && !$0.isNewline }
        return String(drop(while: isSpace).reversed().drop(while: isSpace).reversed())
    }

    /// Whether `other` occurs in the text, compared by characters. Foundation's `contains(_:)` on strings, which
    /// the compiler prefers wherever Foundation is loaded, goes through `NSString`'s `range(of:)`.
    package func includes(_ other: some StringProtocol) -> Bool { firstRange(of: other) != nil }

    /// Whether `other`'s UTF-8 bytes occur in the text's, compared byte by byte: for an ASCII marker, the answer of
    /// `includes` without taking the text apart into characters (for what is asked of every path of a folder).
    package func includesBytes(_ other: String) -> Bool {
        var text = String(self)
        var other = other
        return text.withUTF8 { haystack in
            other.withUTF8 { needle in
                guard let first = needle.first else { return true }
                guard haystack.count >= needle.count else { return false }
                for start in 0...(haystack.count - needle.count) where haystack[start] == first {
                    if memcmp(haystack.baseAddress! + start, needle.baseAddress!, needle.count) == 0 { return true }
                }
                return false
            }
        }
    }

    /// The last range of `other` in the string, compared by characters (`range(of:options: .backwards)`).
    package func lastRange(of other: some StringProtocol) -> Range<Index>? {
        let needle = Array(other)
        guard !needle.isEmpty else { return nil }
        var end = endIndex
        while true {
            var start = end
            var matched = 0
            while matched < needle.count, start > startIndex {
                start = index(before: start)
                matched += 1
            }
            guard matched == needle.count else { return nil }
            if self[start..<end].elementsEqual(needle) { return start..<end }
            end = index(before: end)
        }
    }

    /// The string in Unicode Normalization Form C (`precomposedStringWithCanonicalMapping`): a name typed on macOS
    /// (decomposed) and the same name typed on Linux (composed) compare equal after this.
    package var precomposed: String { String(decoding: String(self)._nfcCodeUnits, as: UTF8.self) }

    /// Percent-encodes every byte of the UTF-8 text but ASCII letters, digits and `kept` (RFC 3986's encoding).
    package func percentEncoded(keeping kept: String = "") -> String {
        var out = ""
        for byte in utf8 {
            let scalar = Unicode.Scalar(byte)
            if (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte)
                || (byte < 0x80 && kept.unicodeScalars.contains(scalar))
            {
                out.unicodeScalars.append(scalar)
            } else {
                out += "%" + Format.hex(UInt64(byte), width: 2, uppercase: true)
            }
        }
        return out
    }

    /// The text with `%XX` escapes decoded; nil where an escape is malformed or the bytes are not UTF-8 (what
    /// `removingPercentEncoding` answers).
    package var percentDecoded: String? {
        var bytes: [UInt8] = []
        var iterator = Array(utf8)[...]
        while let byte = iterator.popFirst() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard iterator.count >= 2, let high = Format.hexValue(iterator.removeFirst()),
                let low = Format.hexValue(iterator.removeFirst())
            else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// Compares ignoring case (ASCII and Unicode lowercase mapping), as `caseInsensitiveCompare` orders.
    package func caseInsensitivelyPrecedes(_ other: some StringProtocol) -> Bool {
        lowercased() < other.lowercased()
    }
}

/// Numbers and paths as text, without `String(format:)`.
package enum Format {
    /// `value` through a printf conversion of the C library (`"%.2f"`, `"%3.0f%%"`, `"%09ld"`): the C locale's
    /// decimal point, as `String(format:)` without a locale writes it.
    package static func c(_ format: String, _ arguments: CVarArg...) -> String {
        withVaList(arguments) { list in
            var buffer = [CChar](repeating: 0, count: 128)
            let needed = Int(vsnprintf(&buffer, buffer.count, format, list))
            guard needed >= buffer.count else { return text(buffer, needed) }
            return withVaList(arguments) { again in
                var larger = [CChar](repeating: 0, count: needed + 1)
                _ = vsnprintf(&larger, larger.count, format, again)
                return text(larger, needed)
            }
        }
    }

    /// The first `count` characters vsnprintf wrote (none when it failed).
    private static func text(_ characters: [CChar], _ count: Int) -> String {
        String(decoding: characters.prefix(max(0, count)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `value` with `digits` digits after the decimal point (`%.Nf`).
    package static func fixed(_ value: Double, _ digits: Int) -> String { c("%.\(digits)f", value) }

    /// A byte count as a person reads it: `812 bytes`, `1.5 KiB`, `3.2 GiB` (binary units, one decimal); `small`
    /// names the unit below a KiB (progress lines write `B`).
    package static func bytes(_ count: UInt64, small: String = "bytes") -> String {
        let units = [small, "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) \(small)" : fixed(value, 1) + " " + units[unit]
    }

    /// `value` in hexadecimal, zero-padded to `width` digits.
    package static func hex(_ value: UInt64, width: Int, uppercase: Bool = false) -> String {
        let digits = String(value, radix: 16, uppercase: uppercase)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }

    /// `value` in decimal, zero-padded to `width` characters, a minus sign counted among them (`%0Nld`).
    package static func zeroPadded(_ value: some BinaryInteger, width: Int) -> String {
        let digits = String(value.magnitude)
        let room = width - (value < 0 ? 1 : 0)
        let padded = digits.count >= room ? digits : String(repeating: "0", count: room - digits.count) + digits
        return value < 0 ? "-" + padded : padded
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: return byte - 0x30
        case 0x41...0x46: return byte - 0x41 + 10
        case 0x61...0x66: return byte - 0x61 + 10
        default: return nil
        }
    }
}

/// A path's last component and extension, as `NSString` computes them for the paths share handles.
package enum PathText {
    /// The last component (`a/b/c.txt` → `c.txt`; trailing slashes ignored; `/` → `/`).
    package static func lastComponent(_ path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard trimmed != "/" else { return "/" }
        if let slash = trimmed.lastIndex(of: "/") { return String(trimmed[trimmed.index(after: slash)...]) }
        return String(trimmed)
    }

    /// The extension of the last component, without its dot (`c.tar.gz` → `gz`; `.profile` and `c.` → ``).
    package static func pathExtension(_ path: String) -> String {
        let last = lastComponent(path)
        guard let dot = last.lastIndex(of: "."), dot > last.startIndex else { return "" }
        return String(last[last.index(after: dot)...])
    }
}

/// Local or UTC times as text through the C library's `strftime` (`"%Y-%m-%d %H:%M"`), which `DateFormatter`
/// would do through ICU.
package enum TimeText {
    package static func string(secondsSince1970 seconds: Double, format: String, utc: Bool = false) -> String {
        var time = time_t(seconds.rounded(.down))
        var parts = tm()
        if utc { gmtime_r(&time, &parts) } else { localtime_r(&time, &parts) }
        var buffer = [CChar](repeating: 0, count: 128)
        let count = strftime(&buffer, buffer.count, format, &parts)
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The time `YYYYMMDDHHMMSS` names (a `-` allowed between the date and the time), in UTC or local time; nil
    /// for anything else.
    package static func seconds(compact text: some StringProtocol, utc: Bool = false) -> Double? {
        var digits = Array(text.utf8)
        if digits.count == 15, digits[8] == UInt8(ascii: "-") { digits.remove(at: 8) }
        guard digits.count == 14, digits.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        func field(_ from: Int, _ count: Int) -> Int32 {
            digits[from..<from + count].reduce(0) { $0 * 10 + Int32($1 - 0x30) }
        }
        var parts = tm()
        parts.tm_year = field(0, 4) - 1900
        parts.tm_mon = field(4, 2) - 1
        parts.tm_mday = field(6, 2)
        parts.tm_hour = field(8, 2)
        parts.tm_min = field(10, 2)
        parts.tm_sec = field(12, 2)
        parts.tm_isdst = -1
        guard (0...11).contains(parts.tm_mon), (1...31).contains(parts.tm_mday), parts.tm_hour < 24,
            parts.tm_min < 60, parts.tm_sec < 61
        else { return nil }
        let time = utc ? timegm(&parts) : mktime(&parts)
        return time == -1 ? nil : Double(time)
    }
}
