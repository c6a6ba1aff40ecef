import CoreTransferable
import FoundationEssentials

/// The sender's offer: every item with its ordered representations for this receiver.
public struct Offer: Sendable, Codable, Equatable {
    public var items: [OfferItem]
    /// Bytes per chunk for every item of the session.
    public var chunkSize: Int

    public init(items: [OfferItem], chunkSize: Int) {
        self.items = items
        self.chunkSize = chunkSize
    }

    public static let maxItems = 10_000
    public static let minChunkSize = 4 << 10
    public static let maxChunkSize = 4 << 20

    public func validate() throws(ProtocolError) {
        guard !items.isEmpty, items.count <= Self.maxItems else {
            throw ProtocolError(.badMessage, "an offer holds 1 to \(Self.maxItems) items, not \(items.count)")
        }
        guard (Self.minChunkSize...Self.maxChunkSize).contains(chunkSize) else {
            throw ProtocolError(
                .badMessage, "chunk size \(chunkSize) is outside \(Self.minChunkSize)–\(Self.maxChunkSize)")
        }
        var seen: Set<String> = []
        var previewBytes = 0
        for item in items {
            try item.validate()
            guard seen.insert(item.id).inserted else {
                throw ProtocolError(.badMessage, "item \(item.id) is offered twice")
            }
            previewBytes += item.preview?.image?.utf8.count ?? 0
        }
        guard previewBytes <= ItemPreview.maxImagesPerOffer * 4 / 3 + 4 * items.count else {
            throw ProtocolError(.badMessage, "the offer's preview images exceed \(ItemPreview.maxImagesPerOffer) bytes")
        }
    }

    /// The offer with preview images beyond `ItemPreview.maxImagesPerOffer` left out (titles stay), so an offer of
    /// many items still fits its limit.
    public func trimmingPreviews() -> Offer {
        var result = self
        var budget = ItemPreview.maxImagesPerOffer
        for index in result.items.indices {
            guard let image = result.items[index].preview?.image else { continue }
            // The decoded size of base 64: three bytes per four characters, less the padding.
            let size = image.utf8.count / 4 * 3 - image.suffix(2).filter { $0 == "=" }.count
            if size <= budget {
                budget -= size
            } else {
                result.items[index].preview?.image = nil
                result.items[index].preview?.imageType = nil
            }
        }
        return result
    }
}

/// What a receiver shows its user about an offered item before accepting it (Apple's `SharePreview`: a title and
/// an image). The type's description and the size come from the item's representations.
public struct ItemPreview: Sendable, Codable, Equatable {
    /// At most 256 bytes.
    public var title: String
    /// A small image, base 64: at most `maxImage` bytes once decoded.
    public var image: String?
    /// The image's content type (`public.png`, `public.jpeg`).
    public var imageType: String?

    public static let maxTitle = 256
    public static let maxImage = 32 << 10
    /// Preview images of one offer together; further previews go without their image.
    public static let maxImagesPerOffer = 1 << 20

    public init(title: String, image: [UInt8]? = nil, imageType: String? = nil) {
        self.title = title
        self.image = image.map { Data($0).base64EncodedString() }
        self.imageType = image == nil ? nil : imageType
    }

    /// The image's bytes, when it decodes.
    public var imageBytes: [UInt8]? { image.flatMap { Data(base64Encoded: $0) }.map(Array.init) }

    public func validate(item: String) throws(ProtocolError) {
        guard title.utf8.count <= Self.maxTitle,
            !title.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else { throw ProtocolError(.badMessage, "item \(item)'s preview title is too long or has control characters") }
        if let image {
            guard image.utf8.count <= (Self.maxImage + 2) / 3 * 4, let bytes = imageBytes, bytes.count <= Self.maxImage
            else {
                throw ProtocolError(
                    .badMessage, "item \(item)'s preview image is over \(Self.maxImage) bytes or not base 64")
            }
        }
        if let imageType, imageType.utf8.count > 255 || imageType.isEmpty {
            throw ProtocolError(.badMessage, "item \(item)'s preview image type is invalid")
        }
    }
}

/// A receiver's answer to an offer whose user must accept it first: it is kept as pending (under `id`) and the
/// sender offers it again later (after `retryAfter` seconds) to learn the answer; nothing else is sent in this
/// session.
public struct OfferHeld: Sendable, Codable, Equatable, Error {
    public var id: String
    public var message: String
    public var retryAfter: Double

    public init(id: String, message: String, retryAfter: Double) {
        self.id = id
        self.message = message
        self.retryAfter = retryAfter
    }
}

/// One item of an offer.
public struct OfferItem: Sendable, Codable, Equatable {
    /// Stable for the same source across attempts (so a receiver can resume); at most 64 characters.
    public var id: String
    /// What the sender calls it (a file name, "text"), for display only.
    public var label: String
    /// Ordered, most faithful first.
    public var representations: [OfferedRepresentation]
    /// Declarations of custom types the representations use.
    public var declarations: [UTTypeDeclaration]
    /// Identifies the source's version (size, modification time, inode); a partial of another version is discarded.
    public var version: String?
    /// For an item an agent forwards on behalf of another device (its watch, or a device sending to its watch): who
    /// it really comes from, as `watch via phone`. Believed only from the owner's own devices.
    public var origin: String?
    /// What the receiver's user is shown before accepting: a title and, optionally, a small image.
    public var preview: ItemPreview?

    public init(
        id: String, label: String, representations: [OfferedRepresentation],
        declarations: [UTTypeDeclaration] = [], version: String? = nil, origin: String? = nil,
        preview: ItemPreview? = nil
    ) {
        self.id = id
        self.label = label
        self.representations = representations
        self.declarations = declarations
        self.version = version
        self.origin = origin
        self.preview = preview
    }

    public func validate() throws(ProtocolError) {
        guard !id.isEmpty, id.utf8.count <= 64,
            id.unicodeScalars.allSatisfy({
                $0.isASCII && $0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-"
            })
        else {
            throw ProtocolError(.badMessage, "item id '\(id.prefix(80))' must be 1–64 letters, digits or '-'")
        }
        guard label.utf8.count <= 1024 else { throw ProtocolError(.badMessage, "item label is too long") }
        if let origin,
            origin.isEmpty || origin.utf8.count > 2 * Limits.maxDeviceName + 8
                || origin.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        {
            throw ProtocolError(.badMessage, "item \(id) names its origin with an empty, too long or control name")
        }
        try preview?.validate(item: id)
        guard !representations.isEmpty, representations.count <= 64 else {
            throw ProtocolError(
                .badMessage, "item \(id) offers \(representations.count) representations (1–64 allowed)")
        }
        guard declarations.count <= Limits.maxDeclarations else {
            throw ProtocolError(.badMessage, "item \(id) carries too many type declarations")
        }
        for representation in representations {
            guard representation.contentType.utf8.count <= 255, !representation.contentType.isEmpty else {
                throw ProtocolError(.badMessage, "item \(id) has an invalid content type")
            }
            if let size = representation.size, size > Limits.maxItemSize {
                throw ProtocolError(
                    .badMessage, "item \(id) claims \(size) bytes, over the limit of \(Limits.maxItemSize)")
            }
            if let name = representation.suggestedFileName, name.utf8.count > 1024 {
                throw ProtocolError(.badMessage, "item \(id) suggests a file name longer than 1024 bytes")
            }
        }
    }
}

/// The receiver's decision for one item.
public struct Choice: Sendable, Codable, Equatable {
    public var item: String
    /// Index into the item's representations; nil when refused.
    public var representation: Int?
    /// Why this representation (or why none).
    public var reason: String
    /// Set when the item is refused.
    public var refusal: ProtocolError?

    public init(item: String, representation: Int?, reason: String, refusal: ProtocolError? = nil) {
        self.item = item
        self.representation = representation
        self.reason = reason
        self.refusal = refusal
    }
}

/// The receiver's answer to an offer: one choice per item, in offer order.
public struct Select: Sendable, Codable, Equatable {
    public var choices: [Choice]
    public init(choices: [Choice]) { self.choices = choices }

    /// The same choices with reasons shortened until the encoded message fits in `limit` bytes: a select for a
    /// valid offer always fits (10,000 refusals that each list a long accept list would not).
    public func fitting(_ limit: Int) -> Select {
        var result = self
        for cap in [2_048, 256, 64, 0] {
            if MessageCoding.frame(.select, result).payload.count <= limit { return result }
            result.choices = choices.map { choice in
                var short = choice
                short.reason = Self.cut(choice.reason, cap)
                if var refusal = choice.refusal {
                    refusal = ProtocolError(refusal.code, Self.cut(refusal.message, cap))
                    short.refusal = refusal
                }
                return short
            }
        }
        return result
    }

    private static func cut(_ text: String, _ cap: Int) -> String {
        guard text.utf8.count > cap else { return text }
        var cut = String(text.prefix(cap))
        while cut.utf8.count > cap { cut.removeLast() }
        return cap > 0 ? cut + "…" : ""
    }
}

/// Before each accepted item: what the receiver already holds, verified, as ranges of chunk indices [start, end).
public struct Resume: Sendable, Codable, Equatable {
    public var item: String
    public var verified: [ChunkRange]
    /// The item's digest when it is not the session's: a partial recorded with another digest (SHA-256, by an earlier
    /// version or an older peer) keeps it. Only a digest both ends listed (or SHA-256) is named.
    public var digest: DigestAlgorithm?
    /// Set when a `basis` frame describing an earlier version of the item came just before (delta transfer).
    public var basis: Bool?

    public init(item: String, verified: [ChunkRange], digest: DigestAlgorithm? = nil, basis: Bool? = nil) {
        self.item = item
        self.verified = verified
        self.digest = digest
        self.basis = basis
    }
}

/// A half-open range of chunk indices.
public struct ChunkRange: Sendable, Codable, Equatable, Hashable {
    public var start: Int
    public var end: Int

    public init(_ start: Int, _ end: Int) {
        self.start = start
        self.end = end
    }

    public var count: Int { end - start }
}

/// After the last chunk of an item: its size and whole-item digest.
public struct Done: Sendable, Codable, Equatable {
    public var item: String
    public var size: UInt64
    public var chunks: Int
    /// Hex digest over the concatenated per-chunk digests, with the item's digest (see docs/PROTOCOL.md).
    public var digest: String
    /// The produced file's name, when the representation named none in the offer (a `FileRepresentation`'s file is
    /// known only once it is exported): at most 255 bytes, a name only. Receivers that do not know it ignore it.
    public var fileName: String?

    public static let maxFileName = 255

    public init(item: String, size: UInt64, chunks: Int, digest: String, fileName: String? = nil) {
        self.item = item
        self.size = size
        self.chunks = chunks
        self.digest = digest
        self.fileName = fileName
    }
}

/// The receiver confirms an item: verified and stored (or printed, or imported).
public struct Ack: Sendable, Codable, Equatable {
    public var item: String
    /// What happened to it: "saved", "printed", "imported".
    public var outcome: String
    /// Where it was saved (file name only), if saved.
    public var savedAs: String?

    public init(item: String, outcome: String, savedAs: String? = nil) {
        self.item = item
        self.outcome = outcome
        self.savedAs = savedAs
    }
}

/// The fixed part of a `chunk` or `data` frame: index (8 bytes, big endian) and the digest of the data (32 bytes);
/// the data follows.
public struct ChunkHeader: Sendable, Equatable {
    public static let size = 40
    public var index: Int
    public var digest: [UInt8]

    public init(index: Int, digest: [UInt8]) {
        self.index = index
        self.digest = digest
    }

    public func encoded() -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.size)
        let value = UInt64(index)
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8((value >> UInt64(shift)) & 0xFF)) }
        bytes += digest
        return bytes
    }

    /// Parses the header at the start of a frame payload.
    public static func parse(_ payload: ArraySlice<UInt8>) throws(ProtocolError) -> ChunkHeader {
        guard payload.count >= size else { throw ProtocolError(.badMessage, "chunk frame shorter than its header") }
        let start = payload.startIndex
        var value: UInt64 = 0
        for offset in 0..<8 { value = (value << 8) | UInt64(payload[start + offset]) }
        guard value <= UInt64(Int32.max) else { throw ProtocolError(.badMessage, "chunk index \(value) out of range") }
        return ChunkHeader(index: Int(value), digest: Array(payload[(start + 8)..<(start + 40)]))
    }
}

/// Chunk arithmetic shared by both ends.
public enum ChunkMath {
    /// Number of chunks for `size` bytes (at least one: an empty item is one empty chunk).
    public static func count(size: UInt64, chunkSize: Int) -> Int {
        max(1, Int((size + UInt64(chunkSize) - 1) / UInt64(chunkSize)))
    }

    /// Ranges covering the sorted indices.
    public static func ranges(_ indices: [Int]) -> [ChunkRange] {
        var result: [ChunkRange] = []
        for index in indices.sorted() {
            if let last = result.last, last.end == index {
                result[result.count - 1].end = index + 1
            } else if result.last.map({ index < $0.end }) != true {
                result.append(ChunkRange(index, index + 1))
            }
        }
        return result
    }

    /// Expands ranges into a set, rejecting malformed or out-of-bounds ranges.
    public static func indices(_ ranges: [ChunkRange], limit: Int) throws(ProtocolError) -> Set<Int> {
        var result: Set<Int> = []
        guard ranges.count <= 100_000 else { throw ProtocolError(.badMessage, "too many resume ranges") }
        var total = 0
        for range in ranges {
            guard range.start >= 0, range.end > range.start, range.end <= limit else {
                throw ProtocolError(.badMessage, "resume range \(range.start)..<\(range.end) is outside 0..<\(limit)")
            }
            total += range.count
            guard total <= limit else { throw ProtocolError(.badMessage, "resume ranges overlap") }
            for index in range.start..<range.end { result.insert(index) }
        }
        return result
    }
}
