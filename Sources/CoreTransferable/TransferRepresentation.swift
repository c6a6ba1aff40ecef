/// A declarative description of the process of importing and exporting a transferable item.
///
/// Compose representations in a `body`, like SwiftUI views; the framework resolves the tree into an ordered flat
/// list of `ResolvedTransferRepresentation`s.
public protocol TransferRepresentation<Item>: Sendable {
    /// The type of the item that's being transferred.
    associatedtype Item: Transferable
    /// The type of the body, for composite representations. Primitive representations use `Never`.
    associatedtype Body: TransferRepresentation

    /// The representations that make up this one.
    @TransferRepresentationBuilder<Self.Item> var body: Self.Body { get }

    /// Appends this representation's resolved entries, in order. Primitive representations implement this;
    /// composite ones get the default, which resolves `body`.
    func _resolve(into list: inout [ResolvedTransferRepresentation<Item>])
}

extension TransferRepresentation {
    public func _resolve(into list: inout [ResolvedTransferRepresentation<Item>]) {
        var inner: [ResolvedTransferRepresentation<Body.Item>] = []
        body._resolve(into: &inner)
        list += castResolved(inner, to: Item.self)
    }
}

/// The builder enforces `Body.Item == Item`; the protocol cannot state it (primitives use `Never`), so the entries of
/// a body are re-typed here. A mismatch is a programming error in a hand-written `body`.
func castResolved<A, B>(_ entries: [ResolvedTransferRepresentation<A>], to: B.Type) -> [ResolvedTransferRepresentation<
    B
>] {
    guard A.self == B.self else {
        preconditionFailure("a TransferRepresentation body of \(A.self) was used for \(B.self)")
    }
    return unsafeBitCast(entries, to: [ResolvedTransferRepresentation<B>].self)
}

extension TransferRepresentation where Body == Never {
    /// Primitive representations have no body; resolution never asks for it.
    public var body: Never { fatalError("\(Self.self) is a primitive representation and has no body") }
}

extension Never: TransferRepresentation {
    public typealias Item = Never
    public typealias Body = Never
    public func _resolve(into list: inout [ResolvedTransferRepresentation<Never>]) {}
}

extension Never: Transferable {
    public static var transferRepresentation: Never { fatalError("Never has no representation") }
}
