import FoundationEssentials

extension URL {
    /// A URL made by appending a path component and the type's preferred extension (unless already valid for it).
    public func appendingPathComponent(_ partialName: String, conformingTo contentType: UTType) -> URL {
        let isDirectory = contentType.conforms(to: .directory)
        return appendingPathComponent(partialName, isDirectory: isDirectory).appendingPathExtension(for: contentType)
    }

    /// Appends a path component and the type's preferred extension (unless already valid for it).
    public mutating func appendPathComponent(_ partialName: String, conformingTo contentType: UTType) {
        self = appendingPathComponent(partialName, conformingTo: contentType)
    }

    /// A URL with the type's preferred extension appended, unless the existing extension already maps to a type
    /// conforming to `contentType` (`puppy.jpg` + `.plainText` → `puppy.jpg.txt`).
    public func appendingPathExtension(for contentType: UTType) -> URL {
        let existing = pathExtension
        if !existing.isEmpty,
            UTType.types(tag: existing, tagClass: .filenameExtension, conformingTo: contentType)
                .contains(where: { !$0.isDynamic })
        {
            return self
        }
        guard let preferred = contentType.preferredFilenameExtension else { return self }
        return appendingPathExtension(preferred)
    }

    /// Appends the type's preferred extension unless the existing one already maps to `contentType`.
    public mutating func appendPathExtension(for contentType: UTType) {
        self = appendingPathExtension(for: contentType)
    }
}
