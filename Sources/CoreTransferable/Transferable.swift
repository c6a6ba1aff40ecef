/// A protocol that describes how a type interacts with transport APIs such as sharing, copying and pasting, or
/// sending to another machine.
///
/// Conforming types list, most faithful first, the representations they can be transferred as. A receiver gets the
/// first representation it understands, and only that one is produced.
@preconcurrency
public protocol Transferable: Sendable {
    /// The type of the representation used to import and export the item.
    associatedtype Representation: TransferRepresentation

    /// The representation used to import and export the item.
    @TransferRepresentationBuilder<Self> static var transferRepresentation: Self.Representation { get }
}
