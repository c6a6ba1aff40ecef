/// A magic-wormhole code such as `7-guitarist-revenge`: the nameplate (a number the mailbox server hands out) and
/// words of the PGP list, starting with an odd-list word and alternating, as the `wormhole` command spells them. The
/// whole code, nameplate included, is the SPAKE2 password.
public struct WormholeCode: Sendable, Equatable, CustomStringConvertible {
    public let nameplate: String
    public let words: [String]

    public var description: String { ([nameplate] + words).joined(separator: "-") }

    /// The password bytes SPAKE2 takes (the code as typed, UTF-8).
    public var password: [UInt8] { Array(description.utf8) }

    public init(nameplate: String, words: [String]) {
        self.nameplate = nameplate
        self.words = words
    }

    /// `count` random words for `nameplate` (each word carries 8 bits; two words, the default, make a guessing
    /// attacker's chance 1 in 65,536 per attempt).
    public static func random(nameplate: String, count: Int = 2) -> WormholeCode {
        let bytes = Sodium.randomBytes(count)
        let words = bytes.enumerated().map { index, byte in
            index % 2 == 0 ? oddWords[Int(byte)] : evenWords[Int(byte)]
        }
        return WormholeCode(nameplate: nameplate, words: words)
    }

    /// Parses a typed code: a nameplate of digits, then at least one word. Words are not checked against the list
    /// (other clients may use other lists); case is kept, as the password is the code exactly as typed.
    public init(parsing text: String) throws(WormholeError) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 2, let first = parts.first, !first.isEmpty, first.allSatisfy(\.isASCII),
            first.allSatisfy(\.isNumber)
        else {
            throw WormholeError(
                .badCode, "'\(text)' is not a wormhole code: expected a number and words, such as 7-guitarist-revenge")
        }
        guard parts.dropFirst().allSatisfy({ !$0.isEmpty && !$0.includes(" ") }) else {
            throw WormholeError(.badCode, "'\(text)' is not a wormhole code: a word is empty or has a space")
        }
        self.init(nameplate: first, words: Array(parts.dropFirst()))
    }
}
