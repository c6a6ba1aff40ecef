import Foundation
import ShareText
import Testing

/// ShareText does without swift-corelibs-foundation what the programs used it for; Foundation (linked into the tests
/// only) is the oracle: the same inputs give the same text.
@Suite struct ShareTextTests {
    /// Inputs with the edges each helper meets: spaces of every kind, line breaks, decomposed letters, escapes.
    static let texts = [
        "", " ", "plain", "  both  ", "\t tab\n", "\r\nline\r\n", "\u{00A0}nbsp\u{2003}", "e\u{301}te\u{301}",
        "Å", "A\u{30A}", "한국어", "\u{1100}\u{1161}\u{11A8}", "ﬁ", "a/b/c.txt", "\u{1F600} x \u{1F600}", "x\u{0}y",
    ]

    @Test func trimmingMatchesFoundation() {
        for text in Self.texts {
            #expect(
                text.trimmed == text.trimmingCharacters(in: .whitespacesAndNewlines), "\(Array(text.unicodeScalars))")
            #expect(text.trimmedSpaces == text.trimmingCharacters(in: .whitespaces), "\(Array(text.unicodeScalars))")
        }
    }

    @Test func normalizationFormCMatchesFoundation() {
        for text in Self.texts {
            #expect(
                Array(text.precomposed.unicodeScalars)
                    == Array(text.precomposedStringWithCanonicalMapping.unicodeScalars))
        }
        #expect("e\u{301}".precomposed.unicodeScalars.count == 1)
    }

    @Test func lastRangeFindsTheLastOccurrence() {
        let text = "a.sync-conflict-1.sync-conflict-2.txt"
        let range = text.lastRange(of: ".sync-conflict-")
        #expect(range == text.range(of: ".sync-conflict-", options: .backwards))
        #expect(String(text[range!.upperBound...]) == "2.txt")
        #expect("abc".lastRange(of: "x") == nil && "abc".lastRange(of: "") == nil && "ab".lastRange(of: "abc") == nil)
        #expect("abc".lastRange(of: "abc") == "abc".startIndex..<"abc".endIndex)
    }

    @Test func aSearchOfBytesFindsWhatASearchOfCharactersFinds() {
        for (text, needle) in [
            ("a/b.sync-conflict-1.txt", ".sync-conflict-"), ("ré/sumé.sync-conflict-x", ".sync-conflict-"),
            ("notes.txt", ".sync-conflict-"), (".sync-conflict", ".sync-conflict-"), ("abc", "abc"), ("abc", "c"),
            ("", "a"), ("ab", "abc"), ("aab", "ab"), ("x.tmp-1", ".tmp-"), ("中文.tmp-", ".tmp-"),
        ] {
            #expect(text.includesBytes(needle) == text.includes(needle), "\(text) \(needle)")
            #expect(text[...].includesBytes(needle) == text.contains(needle), "\(text) \(needle)")
        }
        #expect("abc".includesBytes(""))
    }

    @Test func percentEncodingRoundTripsAndDecodesAsFoundationDoes() {
        for text in Self.texts + ["100%", "%41%42", "%zz", "%4", "a+b c", "%C3%A9"] {
            #expect(text.percentEncoded().percentDecoded == text)
            #expect(text.percentDecoded == text.removingPercentEncoding, "\(text)")
        }
        #expect("a b/é".percentEncoded() == "a%20b%2F%C3%A9")
        #expect("a b/c".percentEncoded(keeping: "/") == "a%20b/c")
    }

    @Test func numbersFormatAsStringFormatDoes() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let value = Double.random(in: -1e7...1e7, using: &generator) / pow(10, Double(Int.random(in: 0...6)))
            for digits in 0...3 {
                #expect(Format.fixed(value, digits) == String(format: "%.\(digits)f", value))
            }
            let int = Int.random(in: -1_000_000_000...1_000_000_000)
            #expect(
                Format.c("%ld:%02ld", int / 60, abs(int % 60)) == String(format: "%ld:%02ld", int / 60, abs(int % 60)))
            #expect(Format.zeroPadded(int, width: 9) == String(format: "%09ld", int))
            let unsigned = UInt64.random(in: 0...UInt64.max)
            #expect(Format.hex(unsigned, width: 16) == String(format: "%016llx", unsigned))
        }
        #expect(Format.fixed(2.5, 0) == "2" && Format.fixed(0.125, 2) == "0.12" && Format.c("%3.0f%%", 7.0) == "  7%")
        #expect(Format.c("%0300ld", 7) == String(repeating: "0", count: 299) + "7")
    }

    @Test func byteCountsReadAsBinaryUnits() {
        #expect(Format.bytes(0) == "0 bytes" && Format.bytes(1023) == "1023 bytes")
        #expect(Format.bytes(1024) == "1.0 KiB" && Format.bytes(1536, small: "B") == "1.5 KiB")
        #expect(Format.bytes(134 * 1024) == "134.0 KiB" && Format.bytes(1 << 30) == "1.0 GiB")
        #expect(Format.bytes(5 << 40) == "5.0 TiB" && Format.bytes(3 << 50) == "3072.0 TiB")
        #expect(Format.bytes(12, small: "B") == "12 B")
    }

    @Test func pathPartsMatchNSString() {
        for path in [
            "a/b/c.txt", "c.tar.gz", ".profile", "c.", "/", "a/b/", "noext", "dir.d/file", "a b.c d", "x/.hidden.txt",
        ] {
            #expect(PathText.lastComponent(path) == (path as NSString).lastPathComponent, "\(path)")
            #expect(PathText.pathExtension(path) == (path as NSString).pathExtension, "\(path)")
        }
    }

    @Test func timesReadAndWriteAsDateFormatterDoes() {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "yyyyMMdd-HHmmss"
        for seconds in [0.0, 1_700_000_000, 1_800_000_123.9, 946_684_799, 4_102_444_800] {
            let date = Date(timeIntervalSince1970: seconds)
            let text = TimeText.string(secondsSince1970: seconds, format: "%Y%m%d-%H%M%S")
            #expect(text == formatter.string(from: date))
            #expect(TimeText.seconds(compact: text) == formatter.date(from: text)?.timeIntervalSince1970)
        }
        #expect(TimeText.seconds(compact: "20261127143005", utc: true) == 1795789805)
        for wrong in ["", "2026112714300", "20261327143005", "2026-11-27", "2026112714300x", "20261127-1430055"] {
            #expect(TimeText.seconds(compact: wrong) == nil, "\(wrong)")
        }
    }

    @Test func jsonReadsWhatJSONSerializationReadsAndWritesWhatItParses() throws {
        let texts = [
            #"{"a":1,"b":[true,false,null],"c":{"d":"x\"y\\z\/w\n\u00e9\ud83d\ude00"},"e":-2.5e3,"f":0.1,"g":[]}"#,
            #"[1, 2.0, -0, 1e2, "é", {}]"#, #" "top" "#, "123456789012", #"{"port":8080}"#,
        ]
        for text in texts {
            let ours = try JSONText.value(Array(text.utf8))
            let theirs = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
            let ourJSON = try JSONText.bytes(ours, sortedKeys: true)
            let theirJSON = try JSONSerialization.data(
                withJSONObject: theirs, options: [.sortedKeys, .fragmentsAllowed])
            let again = try JSONSerialization.jsonObject(with: Data(ourJSON), options: [.fragmentsAllowed])
            #expect(NSDictionary(dictionary: ["v": again]) == NSDictionary(dictionary: ["v": theirs]), "\(text)")
            #expect(try JSONText.bytes(JSONText.value(ourJSON), sortedKeys: true) == ourJSON)
            _ = theirJSON
        }
        let object: [String: Any] = ["b": 1, "a": ["x/y", 2.5, true, Optional<Int>.none as Any], "c": UInt64.max]
        #expect(
            try JSONText.string(object, sortedKeys: true)
                == #"{"a":["x\/y",2.5,true,null],"b":1,"c":18446744073709551615}"#)
        #expect(try JSONText.string(object, sortedKeys: true, escapingSlashes: false).contains(#""x/y""#))
        #expect(try JSONText.string(["k": [1]], pretty: true) == "{\n  \"k\" : [\n    1\n  ]\n}")
        // agent.json as Foundation wrote it, byte for byte: what earlier versions wrote reads back and diffs clean.
        let settings: [String: Any] = [
            "port": 22000, "folders": ["autoAccept": ["desk", "phone"], "path": "/home/me/Sync"],
            "localsend": ["pin": "1234", "peers": [String](), "answerTimeout": 2.5], "relay": true, "empty": [:],
        ]
        let foundation = try JSONSerialization.data(withJSONObject: settings, options: [.prettyPrinted, .sortedKeys])
        #expect(try JSONText.bytes(settings, sortedKeys: true, pretty: true) == Array(foundation))
        let compact = try JSONSerialization.data(withJSONObject: settings, options: [.sortedKeys])
        #expect(try JSONText.bytes(settings, sortedKeys: true) == Array(compact))
        for wrong in ["", "{", "[1,]", "{\"a\" 1}", "01", "1.", "\"\\x\"", "\"\u{1}\"", "tru", "[1] 2", "\"\\ud800\""] {
            #expect(throws: JSONText.Malformed.self, "\(wrong)") { try JSONText.value(Array(wrong.utf8)) }
        }
        #expect(throws: JSONText.Malformed.self) {
            try JSONText.value(Array((String(repeating: "[", count: 600) + String(repeating: "]", count: 600)).utf8))
        }
    }
}
