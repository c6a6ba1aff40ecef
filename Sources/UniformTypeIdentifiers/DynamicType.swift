/// Dynamic identifiers (`dyn.a…`) for tags no declaration claims.
///
/// The part after `dyn.a` is a base-32 encoding (alphabet `abcdefghkmnpqrstuvwxyz0123456789`) of a tag specification
/// `?0=<parent>:<tag class>=<tag>`, so the identifier alone says what the type conforms to and which tag it stands
/// for, in every process and on every peer, with no registry.
struct DynamicType: Hashable, Sendable {
    var parents: [String]
    var tagClass: UTTagClass
    var tag: String

    static let prefix = "dyn.a"
    private static let alphabet = Array("abcdefghkmnpqrstuvwxyz0123456789".utf8)
    private static let decodeTable: [UInt8: UInt8] = {
        var table: [UInt8: UInt8] = [:]
        for (index, char) in alphabet.enumerated() { table[char] = UInt8(index) }
        return table
    }()

    init(parents: [String], tagClass: UTTagClass, tag: String) {
        self.parents = parents
        self.tagClass = tagClass
        self.tag = tag
    }

    /// Decodes a dynamic identifier; nil when `identifier` is not one of ours.
    init?(identifier: String) {
        guard identifier.utf8.count > Self.prefix.utf8.count, identifier.lowercased().hasPrefix(Self.prefix) else {
            return nil
        }
        var bytes: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for char in identifier.lowercased().utf8.dropFirst(Self.prefix.utf8.count) {
            guard let value = Self.decodeTable[char] else { return nil }
            buffer = (buffer << 5) | UInt32(value)
            bits += 5
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        guard let text = String(validating: bytes, as: UTF8.self), text.hasPrefix("?") else { return nil }
        var parents: [String] = []
        var tagClass: UTTagClass?
        var tag: String?
        for field in text.dropFirst().split(separator: ":") {
            guard let eq = field.firstIndex(of: "=") else { return nil }
            let key = String(field[..<eq])
            let value = String(field[field.index(after: eq)...])
            switch key {
            case "0": parents.append(value)
            case "1": (tagClass, tag) = (.filenameExtension, value)
            case "7": (tagClass, tag) = (.mimeType, value)
            default: (tagClass, tag) = (UTTagClass(rawValue: key), value)
            }
        }
        guard let tagClass, let tag, !parents.isEmpty else { return nil }
        self.init(parents: parents, tagClass: tagClass, tag: tag)
    }

    var identifier: String {
        var text = "?" + parents.map { "0=\($0)" }.joined(separator: ":")
        let code: String
        switch tagClass {
        case .filenameExtension: code = "1"
        case .mimeType: code = "7"
        default: code = tagClass.rawValue
        }
        text += ":\(code)=\(tag)"
        var out = Array(Self.prefix.utf8)
        var buffer: UInt32 = 0
        var bits = 0
        for byte in text.utf8 {
            buffer = (buffer << 8) | UInt32(byte)
            bits += 8
            while bits >= 5 {
                bits -= 5
                out.append(Self.alphabet[Int((buffer >> UInt32(bits)) & 31)])
            }
        }
        if bits > 0 { out.append(Self.alphabet[Int((buffer << UInt32(5 - bits)) & 31)]) }
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether a tag may become a dynamic type: non-empty, printable, no separators or `:`/`=` that would break the
    /// encoding, bounded length.
    static func isValidTag(_ tag: String, tagClass: UTTagClass) -> Bool {
        guard !tag.isEmpty, tag.utf8.count <= 127 else { return false }
        if tagClass == .mimeType { return MIMEType.isValid(tag) }
        return tag.unicodeScalars.allSatisfy { scalar in
            scalar.value > 0x20 && scalar.value != 0x7F && !"/\\:=?".unicodeScalars.contains(scalar)
        }
    }
}
