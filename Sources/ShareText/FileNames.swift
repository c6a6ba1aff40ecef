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

    /// `stem` in at most `room` bytes: whole when it fits, else cut at a character and ended by "…" and 8 hex
    /// digits of the 64-bit FNV-1a hash of `whole` (the whole name it came from), so that names alike at the start
    /// are told apart and every device makes the same.
    package static func fitted(_ stem: String, room: Int, whole: String) -> String {
        guard stem.utf8.count > room else { return stem }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in whole.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let digits = String(hash >> 32, radix: 16)
        let tag = "…" + String(repeating: "0", count: 8 - digits.count) + digits
        return prefix(stem, bytes: max(0, room - tag.utf8.count)) + tag
    }
}
