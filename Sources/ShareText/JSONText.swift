/// JSON as untyped values (`[String: Any]`, `[Any]`, `String`, `Int`, `Double`, `Bool`, `JSONText.null`), for the
/// messages and files whose shape is open (a wormhole peer's, agent.json kept with keys this version does not know).
/// `JSONSerialization` does this in swift-corelibs-foundation, which links CoreFoundation and ICU; typed values use
/// `JSONEncoder`/`JSONDecoder` (FoundationEssentials).
package enum JSONText {
    /// JSON's `null`, where a value was read.
    package struct Null: Equatable, Sendable {}
    package static let null = Null()

    package struct Malformed: Error, CustomStringConvertible {
        package let offset: Int
        package let description: String
    }

    /// Reads one JSON value (surrounded by white space only). Numbers without a fraction or exponent that fit an
    /// `Int` read as `Int`, others as `Double`.
    package static func value(_ bytes: some Collection<UInt8>) throws(Malformed) -> Any {
        var reader = Reader(bytes: Array(bytes))
        let value = try reader.value(depth: 0)
        reader.skipSpace()
        guard reader.at == reader.bytes.count else { throw reader.malformed("text after the value") }
        return value
    }

    /// Reads a JSON object; nil for anything else (malformed, or another kind of value).
    package static func object(_ bytes: some Collection<UInt8>) -> [String: Any]? {
        (try? value(bytes)) as? [String: Any]
    }

    /// Writes `value` (dictionaries with `String` keys, arrays, strings, integers, floating-point numbers, booleans,
    /// `JSONText.null` or `nil`). `sortedKeys` orders each object's keys; `pretty` indents by two spaces;
    /// `escapingSlashes` writes `/` as `\/` (as `JSONSerialization` does unless told not to).
    package static func bytes(
        _ value: Any, sortedKeys: Bool = false, pretty: Bool = false, escapingSlashes: Bool = true
    ) throws(Malformed) -> [UInt8] {
        var writer = Writer(sortedKeys: sortedKeys, pretty: pretty, escapingSlashes: escapingSlashes)
        try writer.write(value, indent: 0)
        return writer.out
    }

    /// `bytes(…)` as text.
    package static func string(
        _ value: Any, sortedKeys: Bool = false, pretty: Bool = false, escapingSlashes: Bool = true
    ) throws(Malformed) -> String {
        String(
            decoding: try bytes(value, sortedKeys: sortedKeys, pretty: pretty, escapingSlashes: escapingSlashes),
            as: UTF8.self)
    }

    private struct Reader {
        let bytes: [UInt8]
        var at = 0

        func malformed(_ what: String) -> Malformed { Malformed(offset: at, description: "\(what) at byte \(at)") }

        mutating func skipSpace() {
            while at < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[at]) { at += 1 }
        }

        mutating func expect(_ word: String) throws(Malformed) {
            for byte in word.utf8 {
                guard at < bytes.count, bytes[at] == byte else { throw malformed("expected \(word)") }
                at += 1
            }
        }

        mutating func value(depth: Int) throws(Malformed) -> Any {
            guard depth < 512 else { throw malformed("nesting too deep") }
            skipSpace()
            guard at < bytes.count else { throw malformed("unexpected end") }
            switch bytes[at] {
            case UInt8(ascii: "{"):
                at += 1
                var object: [String: Any] = [:]
                skipSpace()
                if at < bytes.count, bytes[at] == UInt8(ascii: "}") {
                    at += 1
                    return object
                }
                while true {
                    skipSpace()
                    guard at < bytes.count, bytes[at] == UInt8(ascii: "\"") else { throw malformed("expected a key") }
                    let key = try string()
                    skipSpace()
                    try expect(":")
                    object[key] = try value(depth: depth + 1)
                    skipSpace()
                    guard at < bytes.count else { throw malformed("unexpected end") }
                    at += 1
                    if bytes[at - 1] == UInt8(ascii: "}") { return object }
                    guard bytes[at - 1] == UInt8(ascii: ",") else { throw malformed("expected , or }") }
                }
            case UInt8(ascii: "["):
                at += 1
                var array: [Any] = []
                skipSpace()
                if at < bytes.count, bytes[at] == UInt8(ascii: "]") {
                    at += 1
                    return array
                }
                while true {
                    array.append(try value(depth: depth + 1))
                    skipSpace()
                    guard at < bytes.count else { throw malformed("unexpected end") }
                    at += 1
                    if bytes[at - 1] == UInt8(ascii: "]") { return array }
                    guard bytes[at - 1] == UInt8(ascii: ",") else { throw malformed("expected , or ]") }
                }
            case UInt8(ascii: "\""): return try string()
            case UInt8(ascii: "t"):
                try expect("true")
                return true
            case UInt8(ascii: "f"):
                try expect("false")
                return false
            case UInt8(ascii: "n"):
                try expect("null")
                return JSONText.null
            default: return try number()
            }
        }

        mutating func number() throws(Malformed) -> Any {
            let start = at
            var integral = true
            if at < bytes.count, bytes[at] == UInt8(ascii: "-") { at += 1 }
            let digitsStart = at
            while at < bytes.count, (0x30...0x39).contains(bytes[at]) { at += 1 }
            guard at > digitsStart else { throw malformed("expected a value") }
            guard bytes[digitsStart] != 0x30 || at == digitsStart + 1 else { throw malformed("a leading zero") }
            if at < bytes.count, bytes[at] == UInt8(ascii: ".") {
                integral = false
                at += 1
                let fraction = at
                while at < bytes.count, (0x30...0x39).contains(bytes[at]) { at += 1 }
                guard at > fraction else { throw malformed("expected digits") }
            }
            if at < bytes.count, bytes[at] == UInt8(ascii: "e") || bytes[at] == UInt8(ascii: "E") {
                integral = false
                at += 1
                if at < bytes.count, bytes[at] == UInt8(ascii: "+") || bytes[at] == UInt8(ascii: "-") { at += 1 }
                let exponent = at
                while at < bytes.count, (0x30...0x39).contains(bytes[at]) { at += 1 }
                guard at > exponent else { throw malformed("expected digits") }
            }
            let text = String(decoding: bytes[start..<at], as: UTF8.self)
            if integral, let int = Int(text) { return int }
            guard let double = Double(text) else { throw malformed("a number out of range") }
            return double
        }

        mutating func hex4() throws(Malformed) -> UInt32 {
            guard at + 4 <= bytes.count else { throw malformed("unexpected end") }
            var value: UInt32 = 0
            for byte in bytes[at..<at + 4] {
                guard let digit = Format.hexValue(byte) else { throw malformed("expected a hex digit") }
                value = value << 4 | UInt32(digit)
            }
            at += 4
            return value
        }

        mutating func string() throws(Malformed) -> String {
            at += 1  // the opening quote
            var out: [UInt8] = []
            while true {
                guard at < bytes.count else { throw malformed("unterminated string") }
                let byte = bytes[at]
                at += 1
                switch byte {
                case UInt8(ascii: "\""):
                    guard let text = String(validating: out, as: UTF8.self) else { throw malformed("not UTF-8") }
                    return text
                case UInt8(ascii: "\\"):
                    guard at < bytes.count else { throw malformed("unterminated string") }
                    let escape = bytes[at]
                    at += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"):
                        var code = try hex4()
                        if (0xD800...0xDBFF).contains(code) {
                            try expect("\\u")
                            let low = try hex4()
                            guard (0xDC00...0xDFFF).contains(low) else { throw malformed("a lone surrogate") }
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let scalar = Unicode.Scalar(code) else { throw malformed("a lone surrogate") }
                        out.append(contentsOf: String(Character(scalar)).utf8)
                    default: throw malformed("an unknown escape")
                    }
                case 0..<0x20: throw malformed("a control character in a string")
                default: out.append(byte)
                }
            }
        }
    }

    private struct Writer {
        let sortedKeys: Bool
        let pretty: Bool
        let escapingSlashes: Bool
        var out: [UInt8] = []

        mutating func newline(_ indent: Int) {
            guard pretty else { return }
            out.append(0x0A)
            out.append(contentsOf: repeatElement(0x20, count: indent * 2))
        }

        mutating func write(_ value: Any, indent: Int) throws(Malformed) {
            let mirror = Mirror(reflecting: value)
            if mirror.displayStyle == .optional {
                guard let wrapped = mirror.children.first?.value else {
                    out += "null".utf8
                    return
                }
                return try write(wrapped, indent: indent)
            }
            switch value {
            case is Null: out += "null".utf8
            case let bool as Bool: out += (bool ? "true" : "false").utf8
            case let text as String: write(string: text)
            case let text as Substring: write(string: String(text))
            case let int as Int: out += String(int).utf8
            case let int as Int64: out += String(int).utf8
            case let int as Int32: out += String(int).utf8
            case let int as UInt64: out += String(int).utf8
            case let int as UInt32: out += String(int).utf8
            case let int as UInt16: out += String(int).utf8
            case let int as UInt8: out += String(int).utf8
            case let int as UInt: out += String(int).utf8
            case let double as Double:
                guard double.isFinite else { throw Malformed(offset: out.count, description: "\(double) in JSON") }
                out += (double == double.rounded() && abs(double) < 1e15 ? String(Int64(double)) : "\(double)").utf8
            case let float as Float: try write(Double(float), indent: indent)
            case let object as [String: Any]:
                out.append(UInt8(ascii: "{"))
                let keys = sortedKeys ? object.keys.sorted() : Array(object.keys)
                for (index, key) in keys.enumerated() {
                    if index > 0 { out.append(UInt8(ascii: ",")) }
                    newline(indent + 1)
                    write(string: key)
                    out += (pretty ? " : " : ":").utf8
                    try write(object[key]!, indent: indent + 1)
                }
                if object.isEmpty, pretty { out.append(0x0A) }  // an empty one as Foundation writes it: a blank line
                newline(indent)
                out.append(UInt8(ascii: "}"))
            case let array as [Any]:
                out.append(UInt8(ascii: "["))
                for (index, element) in array.enumerated() {
                    if index > 0 { out.append(UInt8(ascii: ",")) }
                    newline(indent + 1)
                    try write(element, indent: indent + 1)
                }
                if array.isEmpty, pretty { out.append(0x0A) }  // an empty one as Foundation writes it: a blank line
                newline(indent)
                out.append(UInt8(ascii: "]"))
            default:
                throw Malformed(offset: out.count, description: "a value of type \(type(of: value)) in JSON")
            }
        }

        mutating func write(string: String) {
            out.append(UInt8(ascii: "\""))
            for byte in string.utf8 {
                switch byte {
                case UInt8(ascii: "\""): out += "\\\"".utf8
                case UInt8(ascii: "\\"): out += "\\\\".utf8
                case UInt8(ascii: "/") where escapingSlashes: out += "\\/".utf8
                case 0x0A: out += "\\n".utf8
                case 0x0D: out += "\\r".utf8
                case 0x09: out += "\\t".utf8
                case 0x08: out += "\\b".utf8
                case 0x0C: out += "\\f".utf8
                case 0..<0x20: out += ("\\u" + Format.hex(UInt64(byte), width: 4)).utf8
                default: out.append(byte)
                }
            }
            out.append(UInt8(ascii: "\""))
        }
    }
}
