/// A transfer representation made of several others, produced by `TransferRepresentationBuilder`.
public struct TupleTransferRepresentation<Item: Transferable, Value: Sendable>: TransferRepresentation {
    /// The children, as built.
    let value: Value
    /// The same children, in order, for resolution.
    let children: [any TransferRepresentation<Item>]

    init(value: Value, children: [any TransferRepresentation<Item>]) {
        self.value = value
        self.children = children
    }

    public var body: some TransferRepresentation<Item> {
        _NeverRepresentation<Item>()
    }

    public func _resolve(into list: inout [ResolvedTransferRepresentation<Item>]) {
        for child in children { child._resolve(into: &list) }
    }
}

/// A representation that contributes nothing; used as the body of primitives that need a concrete `Item`.
public struct _NeverRepresentation<Item: Transferable>: TransferRepresentation {
    public typealias Body = Never
    public func _resolve(into list: inout [ResolvedTransferRepresentation<Item>]) {}
}
