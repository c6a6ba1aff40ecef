/// A transfer representation made of several others, produced by `TransferRepresentationBuilder`.
public struct TupleTransferRepresentation<Item: Transferable, Value: Sendable>: TransferRepresentation {
    /// The children, as built.
    let value: Value
    /// Resolves the children in order (one closure rather than an array of boxed existentials).
    let resolveChildren: @Sendable (inout [ResolvedTransferRepresentation<Item>]) -> Void

    init(value: Value, resolveChildren: @escaping @Sendable (inout [ResolvedTransferRepresentation<Item>]) -> Void) {
        self.value = value
        self.resolveChildren = resolveChildren
    }

    public var body: some TransferRepresentation<Item> {
        _NeverRepresentation<Item>()
    }

    public func _resolve(into list: inout [ResolvedTransferRepresentation<Item>]) {
        resolveChildren(&list)
    }
}

/// A representation that contributes nothing; used as the body of primitives that need a concrete `Item`.
public struct _NeverRepresentation<Item: Transferable>: TransferRepresentation {
    public typealias Body = Never
    public func _resolve(into list: inout [ResolvedTransferRepresentation<Item>]) {}
}
