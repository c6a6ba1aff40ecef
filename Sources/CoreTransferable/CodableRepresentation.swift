import FoundationEssentials

/// A transfer representation for types that are `Codable`: JSON by default, or any encoder/decoder pair.
///
/// A custom `contentType` should be declared (exported by its owner) so that receivers know what it conforms to.
public struct CodableRepresentation<Item, Encoder, Decoder>: TransferRepresentation, @unchecked Sendable  // see below
where
    Item: Transferable, Item: Decodable, Item: Encodable, Encoder: TopLevelEncoder, Decoder: TopLevelDecoder,
    Encoder.Output == Data, Decoder.Input == Data
{
    // @unchecked: the encoder and decoder are used only through `encode`/`decode`, which Foundation's coders allow
    // from several threads; the contentType is a value.
    public typealias Body = Never

    let contentType: UTType
    let encoder: Encoder
    let decoder: Decoder

    /// A representation using JSON.
    public init(for itemType: Item.Type = Item.self, contentType: UTType)
    where Encoder == JSONEncoder, Decoder == JSONDecoder {
        self.init(for: itemType, contentType: contentType, encoder: JSONEncoder(), decoder: JSONDecoder())
    }

    /// A representation using the given encoder and decoder.
    public init(for itemType: Item.Type = Item.self, contentType: UTType, encoder: Encoder, decoder: Decoder) {
        self.contentType = contentType
        self.encoder = encoder
        self.decoder = decoder
    }

    public func _resolve(into list: inout [ResolvedTransferRepresentation<Item>]) {
        let box = CoderBox(encoder: encoder, decoder: decoder)
        list.append(
            ResolvedTransferRepresentation(
                contentType: contentType, payload: .data,
                exporter: .data { item in try box.encoder.encode(item) },
                importer: .data { data in try box.decoder.decode(Item.self, from: data) }))
    }
}

/// Carries the coders into `@Sendable` closures (see the note on `CodableRepresentation`).
private struct CoderBox<Encoder, Decoder>: @unchecked Sendable {  // coders used only to encode and decode
    let encoder: Encoder
    let decoder: Decoder
}

extension TransferPayload {
    /// The bytes of the payload; a file is read whole (only where an API asks for `Data`).
    func bytes() throws -> Data {
        switch self {
        case .data(let data): return data
        case .file(let file):
            do {
                return try Data(contentsOf: file.file, options: .mappedIfSafe)
            } catch {
                throw TransferableSupportError(
                    .fileUnavailable, "cannot read \(file.file.path): \(error)")
            }
        }
    }
}
