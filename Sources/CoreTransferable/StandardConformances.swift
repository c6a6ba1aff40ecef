import FoundationEssentials

extension String: Transferable {
    /// UTF-8 plain text both ways; any plain text is accepted on import.
    public static var transferRepresentation: some TransferRepresentation {
        DataRepresentation(contentType: .utf8PlainText) {
            Data($0.utf8)
        } importing: {
            try decodeText($0)
        }
        DataRepresentation(importedContentType: .plainText) { try decodeText($0) }
    }
}

extension Data: Transferable {
    /// Bytes as `public.data` both ways.
    public static var transferRepresentation: some TransferRepresentation {
        DataRepresentation(contentType: .data) {
            $0
        } importing: {
            $0
        }
    }
}

extension URL: Transferable {
    /// A file URL as `public.file-url`, any URL as `public.url`, and the URL's text as plain text.
    public static var transferRepresentation: some TransferRepresentation {
        DataRepresentation(contentType: .fileURL) {
            Data($0.absoluteString.utf8)
        } importing: {
            try decodeURL($0)
        }
        .exportingCondition { $0.isFileURL }
        DataRepresentation(contentType: .url) {
            Data($0.absoluteString.utf8)
        } importing: {
            try decodeURL($0)
        }
        DataRepresentation(exportedContentType: .utf8PlainText) { Data($0.absoluteString.utf8) }
        DataRepresentation(importedContentType: .plainText) { try decodeURL($0) }
    }
}

extension AttributedString: Transferable {
    /// The characters as UTF-8 plain text both ways (attributes have no portable encoding here).
    public static var transferRepresentation: some TransferRepresentation {
        DataRepresentation(contentType: .utf8PlainText) {
            Data(String($0.characters).utf8)
        } importing: {
            AttributedString(try decodeText($0))
        }
        DataRepresentation(importedContentType: .plainText) { AttributedString(try decodeText($0)) }
    }
}

private func decodeText(_ data: Data) throws -> String {
    if let text = String(data: data, encoding: .utf8) { return text }
    if data.count >= 2, data.starts(with: [0xFF, 0xFE]) || data.starts(with: [0xFE, 0xFF]),
        let text = String(data: data, encoding: .utf16)
    {
        return text
    }
    throw TransferableSupportError(.importFailed, "the text is neither UTF-8 nor UTF-16 with a byte-order mark")
}

private func decodeURL(_ data: Data) throws -> URL {
    let text = try decodeText(data).trimmingWhitespace()
    guard !text.isEmpty, !text.contains(where: \.isNewline), let url = URL(string: text), url.scheme != nil else {
        throw TransferableSupportError(.importFailed, "'\(text.prefix(80))' is not an absolute URL")
    }
    return url
}
