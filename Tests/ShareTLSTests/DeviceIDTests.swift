import Foundation
import Testing

@testable import ShareTLS

@Suite struct DeviceIDTests {
    let id = DeviceID(bytes: (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) })

    @Test func readableFormHasEightGroupsOfSeven() {
        let text = id.description
        let groups = text.split(separator: "-")
        #expect(groups.count == 8 && groups.allSatisfy { $0.count == 7 })
        #expect(text.allSatisfy { $0 == "-" || DeviceID.alphabet.contains($0.asciiValue!) })
        #expect(id.short == String(groups[0]))
    }

    @Test func parsesItsOwnFormCaseAndSpacingInsensitively() throws {
        #expect(try DeviceID(parsing: id.description) == id)
        #expect(try DeviceID(parsing: id.description.lowercased()) == id)
        #expect(try DeviceID(parsing: id.description.replacingOccurrences(of: "-", with: " ")) == id)
        #expect(try DeviceID(parsing: id.description.replacingOccurrences(of: "-", with: "")) == id)
    }

    @Test func everySingleCharacterTypoIsDetected() {
        let chars = Array(id.description.replacingOccurrences(of: "-", with: ""))
        var undetected = 0
        for position in chars.indices {
            for replacement in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567" where replacement != chars[position] {
                var typo = chars
                typo[position] = replacement
                if (try? DeviceID(parsing: String(typo))) != nil { undetected += 1 }
            }
        }
        #expect(undetected == 0)
    }

    @Test func almostAllSwappedNeighboursAreDetected() {
        // Luhn mod N detects a transposition of neighbours except for a few value pairs (like 0↔9 in decimal Luhn).
        // Syncthing's variant (the check character is not weighted with the block) lets a few more through: over
        // these IDs 5.8 % of swaps pass; at least 92 % must be caught. Every single-character typo is caught.
        var swaps = 0
        var undetected = 0
        for seed in 0..<40 {
            let sample = DeviceID(bytes: (0..<32).map { UInt8(truncatingIfNeeded: ($0 + 1) &* (seed + 7) &* 131) })
            let chars = Array(sample.description.replacingOccurrences(of: "-", with: ""))
            for position in 0..<(chars.count - 1) where chars[position] != chars[position + 1] {
                var typo = chars
                typo.swapAt(position, position + 1)
                swaps += 1
                if (try? DeviceID(parsing: String(typo))) != nil { undetected += 1 }
            }
        }
        #expect(swaps > 1000)
        #expect(Double(undetected) / Double(swaps) < 0.08, "\(undetected) of \(swaps) swaps undetected")
    }

    @Test func badInputSaysWhatIsWrong() {
        #expect(throws: DeviceID.ParseError.wrongLength(3)) { try DeviceID(parsing: "ABC") }
        #expect(throws: DeviceID.ParseError.badCharacter("1")) {
            try DeviceID(parsing: "1" + String(repeating: "A", count: 55))
        }
        #expect(throws: DeviceID.ParseError.badCharacter("é")) { try DeviceID(parsing: "é") }
    }

    @Test func codableUsesTheReadableForm() throws {
        let data = try JSONEncoder().encode([id])
        #expect(String(decoding: data, as: UTF8.self) == "[\"\(id.description)\"]")
        #expect(try JSONDecoder().decode([DeviceID].self, from: data) == [id])
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(DeviceID.self, from: Data("\"nope\"".utf8)) }
    }

    @Test func sha256KnownAnswers() {
        #expect(
            SHA256Hasher.hash(Array("abc".utf8)).hexString
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            SHA256Hasher.hash([UInt8]()).hexString == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        )
        let hasher = SHA256Hasher()
        hasher.update(Array("a".utf8))
        hasher.update(Array("bc".utf8))
        #expect(hasher.finalize() == SHA256Hasher.hash(Array("abc".utf8)))
    }

    /// Syncthing's own test vectors: its check characters, and an ID of its test suite written in its form.
    @Test func checkCharactersAreSyncthings() throws {
        #expect(DeviceID.syncthingCheck(Array("WG2IWWALPC2HZ".utf8)) == UInt8(ascii: "H"))
        #expect(DeviceID.syncthingCheck(Array("KHQNO2S5QSILR".utf8)) == UInt8(ascii: "K"))
        #expect(DeviceID.syncthingCheck(Array("MFZWI3DBONSGY".utf8)) == UInt8(ascii: "C"))
        let syncthings = "P56IOI7-MZJNU2Y-IQGDREY-DM2MGTI-MGL3BXN-PQ6W5BM-TBBZ4TJ-XZWICQ2"
        let parsed = try DeviceID(parsing: syncthings)
        #expect(parsed.description == syncthings)
    }

    /// IDs written by earlier versions (check characters from each block's right end) still parse to the same
    /// digest, and are printed in Syncthing's form from then on.
    @Test func idsWithTheEarlierCheckCharactersStillParse() throws {
        let base = DeviceID.base32(id.bytes)
        var earlier: [UInt8] = []
        for block in 0..<4 {
            let chunk = Array(base[(block * 13)..<(block * 13 + 13)])
            earlier += chunk + [DeviceID.luhn32(chunk)]
        }
        let text = String(decoding: earlier, as: UTF8.self)
        #expect(try DeviceID(parsing: text) == id)
        #expect(text != id.description.replacingOccurrences(of: "-", with: ""))
        // Mixing the two schemes across blocks is a typo, not an ID.
        var mixed = Array(id.description.replacingOccurrences(of: "-", with: "").utf8)
        mixed[13] = earlier[13]
        if mixed[13] != Array(id.description.replacingOccurrences(of: "-", with: "").utf8)[13] {
            #expect(throws: DeviceID.ParseError.self) { try DeviceID(parsing: String(decoding: mixed, as: UTF8.self)) }
        }
    }
}
