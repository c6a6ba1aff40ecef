/// Creates a transfer representation by composing existing transfer representations (at most ten per block; nest a
/// custom `TransferRepresentation` for more).
@resultBuilder
public struct TransferRepresentationBuilder<Item: Transferable> {
    public static func buildExpression<R: TransferRepresentation>(_ content: R) -> R where R.Item == Item {
        content
    }

    public static func buildExpression<Encoder, Decoder>(
        _ content: CodableRepresentation<Item, Encoder, Decoder>
    ) -> CodableRepresentation<Item, Encoder, Decoder>
    where
        Item: Decodable, Item: Encodable, Encoder: TopLevelEncoder, Decoder: TopLevelDecoder,
        Encoder.Output == Data, Decoder.Input == Data
    {
        content
    }

    public static func buildBlock<Content: TransferRepresentation>(_ content: Content) -> Content
    where Content.Item == Item {
        content
    }
}

import FoundationEssentials
