import FoundationEssentials
import ShareTLS

/// LocalSend's protocol, version 2 (2.1 as its apps speak it; 2.2's clients are served alike): the JSON bodies and
/// constants this side reads and writes. https://github.com/localsend/protocol
public enum LocalSend {
    public static let version = "2.1"
    public static let multicastGroup = "224.0.0.167"
    public static let defaultPort = 53317
    public static let apiPrefix = "/api/localsend/v2"
    public static let deviceTypes: Set<String> = ["mobile", "desktop", "web", "headless", "server"]

    /// The SHA-256 fingerprint of a certificate, as LocalSend writes it: 64 hexadecimal digits (compared without
    /// regard to case).
    public static func fingerprint(ofCertificateDER der: [UInt8]) -> String {
        Hex.upper(SHA256Hasher.hash(der))
    }

    /// A fingerprint as 32 bytes, or nil when it is not 64 hexadecimal digits.
    public static func fingerprintBytes(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count == 64 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        var index = 0
        while index < 64 {
            guard let high = Hex.value(digits[index]), let low = Hex.value(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }
}

/// What a LocalSend device says of itself (announcements, `register`, `info`, `prepare-upload`'s `info`).
public struct LocalSendInfo: Codable, Sendable, Equatable {
    public var alias: String
    public var version: String?
    public var deviceModel: String?
    public var deviceType: String?
    public var fingerprint: String
    public var port: Int?
    public var `protocol`: String?
    public var download: Bool?
    public var announce: Bool?

    public init(
        alias: String, version: String? = LocalSend.version, deviceModel: String?, deviceType: String?,
        fingerprint: String, port: Int?, protocol: String? = "https", download: Bool? = false, announce: Bool? = nil
    ) {
        self.alias = alias
        self.version = version
        self.deviceModel = deviceModel
        self.deviceType = deviceType
        self.fingerprint = fingerprint
        self.port = port
        self.protocol = `protocol`
        self.download = download
        self.announce = announce
    }

    private enum CodingKeys: String, CodingKey {
        case alias, version, deviceModel, deviceType, fingerprint, port, `protocol`, download, announce
    }

    /// Lenient as LocalSend's apps are: a missing alias or fingerprint is empty (the fingerprint that counts is the
    /// certificate's), a port given as text is read.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        alias = (try? container.decodeIfPresent(String.self, forKey: .alias)) ?? "LocalSend device"
        version = try? container.decodeIfPresent(String.self, forKey: .version)
        deviceModel = try? container.decodeIfPresent(String.self, forKey: .deviceModel)
        deviceType = try? container.decodeIfPresent(String.self, forKey: .deviceType)
        fingerprint = (try? container.decodeIfPresent(String.self, forKey: .fingerprint)) ?? ""
        port =
            (try? container.decodeIfPresent(Int.self, forKey: .port))
            ?? (try? container.decodeIfPresent(String.self, forKey: .port)).flatMap { Int($0) }
        `protocol` = try? container.decodeIfPresent(String.self, forKey: .protocol)
        download = try? container.decodeIfPresent(Bool.self, forKey: .download)
        announce = try? container.decodeIfPresent(Bool.self, forKey: .announce)
    }

    /// The same, without what only announcements carry.
    public var answer: LocalSendInfo {
        var copy = self
        copy.announce = nil
        return copy
    }
}

/// One file of an upload, as `prepare-upload` describes it.
public struct LocalSendFile: Codable, Sendable, Equatable {
    public var id: String
    public var fileName: String
    public var size: UInt64
    public var fileType: String
    public var sha256: String?
    /// A message's text, or a small preview.
    public var preview: String?

    public init(
        id: String, fileName: String, size: UInt64, fileType: String, sha256: String? = nil, preview: String? = nil
    ) {
        self.id = id
        self.fileName = fileName
        self.size = size
        self.fileType = fileType
        self.sha256 = sha256
        self.preview = preview
    }
}

public struct LocalSendPrepareUpload: Codable, Sendable {
    public var info: LocalSendInfo
    public var files: [String: LocalSendFile]
    public init(info: LocalSendInfo, files: [String: LocalSendFile]) {
        self.info = info
        self.files = files
    }
}

public struct LocalSendUploadSession: Codable, Sendable {
    public var sessionId: String
    /// File ID to the token that uploads it.
    public var files: [String: String]
    public init(sessionId: String, files: [String: String]) {
        self.sessionId = sessionId
        self.files = files
    }
}

enum Hex {
    static func upper(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func value(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return digit - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
