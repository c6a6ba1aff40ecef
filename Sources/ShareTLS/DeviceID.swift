/// A device's identity: the SHA-256 of its certificate (DER).
///
/// Shown as 56 characters in eight groups of seven (`MFZWI3D-BONSGYC-…`): base 32 of the digest in four blocks of
/// 13 characters, each followed by a check character, so a mistyped ID is detected. The check characters are
/// Syncthing's (its Luhn mod 32 from the left), so one certificate's ID is the same string in both worlds and
/// Syncthing's servers accept it; IDs written by earlier versions of share, whose check characters were computed from
/// each block's right end, still parse (the digest is what matters).
public struct DeviceID: Hashable, Sendable, Codable, CustomStringConvertible, Comparable {
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) {
        precondition(bytes.count == 32, "a device ID is 32 bytes")
        self.bytes = bytes
    }

    /// The ID of a certificate given as DER.
    public init(certificateDER: [UInt8]) {
        self.init(bytes: SHA256Hasher.hash(certificateDER))
    }

    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)

    /// The readable form with check characters and dashes.
    public var description: String { Self.readable(bytes, check: Self.syncthingCheck) }

    /// The form earlier versions printed (their check characters): only for names derived from it then, such as a
    /// partial's file name, which must stay the same across versions.
    public var earlierDescription: String { Self.readable(bytes, check: Self.luhn32) }

    /// Base 32 in four blocks of 13, each followed by its check character, in groups of seven.
    static func readable(_ bytes: [UInt8], check: ([UInt8]) -> UInt8) -> String {
        let base = base32(bytes)  // 52 characters
        var withChecks: [UInt8] = []
        for block in 0..<4 {
            let chunk = Array(base[(block * 13)..<(block * 13 + 13)])
            withChecks += chunk
            withChecks.append(check(chunk))
        }
        var out: [UInt8] = []
        for (index, char) in withChecks.enumerated() {
            if index > 0 && index % 7 == 0 { out.append(UInt8(ascii: "-")) }
            out.append(char)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The first group: enough to tell devices apart in messages.
    public var short: String { String(description.prefix(7)) }

    public enum ParseError: Error, Sendable, CustomStringConvertible, Equatable {
        case wrongLength(Int)
        case badCharacter(Character)
        case checkFailed(group: Int)

        public var description: String {
            switch self {
            case .wrongLength(let n): return "a device ID has 56 characters (ignoring dashes and spaces), not \(n)"
            case .badCharacter(let c): return "'\(c)' cannot appear in a device ID (A–Z and 2–7 only)"
            case .checkFailed(let group):
                // Block n (13 characters and its check character) is printed as groups 2n-1 and 2n.
                return
                    "the ID is mistyped in groups \(group * 2 - 1)–\(group * 2) (their check character does not match)"
            }
        }
    }

    /// Parses the readable form: case-insensitive, dashes and spaces ignored, check characters verified (either
    /// Syncthing's or those of earlier share versions, the same in all four blocks).
    public init(parsing text: String) throws(ParseError) {
        var chars: [UInt8] = []
        for scalar in text.unicodeScalars {
            if scalar == "-" || scalar == " " { continue }
            guard scalar.isASCII else { throw .badCharacter(Character(scalar)) }
            var byte = UInt8(scalar.value)
            if byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z") { byte -= 32 }
            guard Self.alphabet.contains(byte) else { throw .badCharacter(Character(scalar)) }
            chars.append(byte)
        }
        guard chars.count == 56 else { throw .wrongLength(chars.count) }
        var base: [UInt8] = []
        var syncthing = true
        var earlier = true
        for block in 0..<4 {
            let chunk = Array(chars[(block * 14)..<(block * 14 + 13)])
            let check = chars[block * 14 + 13]
            syncthing = syncthing && Self.syncthingCheck(chunk) == check
            earlier = earlier && Self.luhn32(chunk) == check
            guard syncthing || earlier else { throw .checkFailed(group: block + 1) }
            base += chunk
        }
        guard let bytes = Self.unbase32(base), bytes.count == 32 else { throw .checkFailed(group: 4) }
        self.init(bytes: bytes)
    }

    public static func < (lhs: DeviceID, rhs: DeviceID) -> Bool { lhs.bytes.lexicographicallyPrecedes(rhs.bytes) }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        do {
            try self.init(parsing: text)
        } catch {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: error.description))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    static func base32(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for byte in bytes {
            buffer = (buffer << 8) | UInt32(byte)
            bits += 8
            while bits >= 5 {
                bits -= 5
                out.append(alphabet[Int((buffer >> UInt32(bits)) & 31)])
            }
        }
        if bits > 0 { out.append(alphabet[Int((buffer << UInt32(5 - bits)) & 31)]) }
        return out
    }

    static func unbase32(_ chars: [UInt8]) -> [UInt8]? {
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for char in chars {
            guard let value = alphabet.firstIndex(of: char) else { return nil }
            buffer = (buffer << 5) | UInt32(value)
            bits += 5
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        // 52 characters carry 260 bits: the 4 padding bits must be zero.
        if bits > 0 && (buffer & ((1 << UInt32(bits)) - 1)) != 0 { return nil }
        return out
    }

    /// Syncthing's check character: weights 1, 2, 1, … from the leftmost character, each product folded as
    /// `p / 32 + p % 32`, and the character that makes the sum a multiple of 32.
    static func syncthingCheck(_ chars: [UInt8]) -> UInt8 {
        let n = 32
        var factor = 1
        var sum = 0
        for char in chars {
            let addend = factor * alphabet.firstIndex(of: char)!
            sum += addend / n + addend % n
            factor = factor == 2 ? 1 : 2
        }
        return alphabet[(n - sum % n) % n]
    }

    /// The check character of earlier share versions: weights 2, 1, 2, … from the rightmost data character. Still
    /// read, never written.
    static func luhn32(_ chars: [UInt8]) -> UInt8 {
        let n = 32
        var factor = 2
        var sum = 0
        for char in chars.reversed() {
            let codepoint = alphabet.firstIndex(of: char)!
            let addend = factor * codepoint
            sum += addend / n + addend % n
            factor = factor == 2 ? 1 : 2
        }
        return alphabet[(n - sum % n) % n]
    }
}
