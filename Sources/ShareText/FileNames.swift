/// Names that must fit where a file system allows them: 255 bytes of UTF-8 for one name on Linux's file systems.
/// A name made from another (a temporary name, a conflict copy, a kept version) of a file whose name is already near
/// that is fitted here, never refused by the system.
package enum FileNames {
    /// The longest a file name may be (bytes).
    package static let longest = 255

    /// `text` cut at a character to at most `bytes` bytes of UTF-8.
    package static func prefix(_ text: some StringProtocol, bytes: Int) -> String {
        guard text.utf8.count > bytes else { return String(text) }
        var cut = ""
        var used = 0
        for character in text {
            used += character.utf8.count
            guard used <= bytes else { break }
            cut.append(character)
        }
        return cut
    }

    /// An extension longer than this is cut as part of the stem when a name is fitted.
    package static let longestKeptExtension = 32

    /// A name's stem and extension in at most `room` bytes together: whole when they fit, else the stem cut at a
    /// character and ended by "…" and 8 hex digits of the 64-bit FNV-1a hash of the whole name (names alike at the
    /// start are told apart, and every device makes the same), an extension of more than `longestKeptExtension`
    /// bytes cut with the stem.
    package static func fitted(stem: String, ext: String, room: Int) -> (stem: String, ext: String) {
        guard stem.utf8.count + ext.utf8.count > room else { return (stem, ext) }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in (stem + ext).utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let digits = String(hash >> 32, radix: 16)
        let tag = "…" + String(repeating: "0", count: 8 - digits.count) + digits
        let (cut, kept) = ext.utf8.count > longestKeptExtension ? (stem + ext, "") : (stem, ext)
        return (prefix(cut, bytes: max(0, room - kept.utf8.count - tag.utf8.count)) + tag, kept)
    }
}
