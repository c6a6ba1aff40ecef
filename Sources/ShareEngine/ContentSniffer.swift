import UniformTypeIdentifiers
import ShareTrust
import ShareProtocol
import CoreTransferable

/// The type of bytes whose name says nothing (standard input), from their first bytes: the signatures of common
/// formats, UTF-8 text, else plain data.
package enum ContentSniffer {
    private static let signatures: [(offset: Int, bytes: [UInt8], type: UTType)] = [
        (257, Array("ustar".utf8), .tarArchive),
        (0, [0x1F, 0x8B], .gzip),
        (0, [0x50, 0x4B, 0x03, 0x04], .zip),
        (0, [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], .png),
        (0, [0xFF, 0xD8, 0xFF], .jpeg),
        (0, Array("GIF8".utf8), .gif),
        (0, Array("%PDF-".utf8), .pdf),
    ]

    /// The type `head` (the first bytes of the content, or all of it) shows.
    package static func type(of head: [UInt8]) -> UTType {
        for signature in signatures where head.count >= signature.offset + signature.bytes.count {
            if Array(head[signature.offset..<signature.offset + signature.bytes.count]) == signature.bytes {
                return signature.type
            }
        }
        // Text cut at the end of `head` may end inside a character (at most 3 bytes of one).
        guard !head.isEmpty, !head.contains(0) else { return .data }
        let valid = (0...min(3, head.count - 1)).contains {
            String(validating: head.dropLast($0), as: UTF8.self) != nil
        }
        return valid ? .utf8PlainText : .data
    }
}
