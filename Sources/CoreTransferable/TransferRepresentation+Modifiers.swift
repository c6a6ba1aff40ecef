extension TransferRepresentation {
    /// Suppresses export of this representation for items for which `condition` is false. Keep it cheap: no I/O.
    public func exportingCondition(
        _ condition: @escaping @Sendable (Self.Item) -> Bool
    ) -> _ConditionalTransferRepresentation<Self> {
        _ConditionalTransferRepresentation(base: self, condition: condition)
    }

    /// Limits which receivers can see this representation.
    public func visibility(_ visibility: TransferRepresentationVisibility) -> some TransferRepresentation<Self.Item> {
        _ModifiedTransferRepresentation(base: self) { entry in
            entry.visibility = entry.visibility.narrowed(to: visibility)
        }
    }

    /// The file name (with extension) a receiver should use when it writes the item to disk. If several names are
    /// specified, the last one is used.
    public func suggestedFileName(_ fileName: String) -> some TransferRepresentation<Self.Item> {
        _ModifiedTransferRepresentation(base: self) { entry in entry.fileName = .constant(fileName) }
    }

    /// A per-item file name (with extension) a receiver should use when it writes the item to disk.
    public func suggestedFileName(
        _ fileName: @escaping @Sendable (Self.Item) -> String?
    ) -> some TransferRepresentation<Self.Item> {
        _ModifiedTransferRepresentation(base: self) { entry in entry.fileName = .perItem(fileName) }
    }
}

/// A representation whose export is suppressed for items failing a condition (returned by `exportingCondition`).
public struct _ConditionalTransferRepresentation<Base: TransferRepresentation>: TransferRepresentation {
    public typealias Item = Base.Item
    public typealias Body = Never
    let base: Base
    let condition: @Sendable (Base.Item) -> Bool

    public func _resolve(into list: inout [ResolvedTransferRepresentation<Base.Item>]) {
        let start = list.count
        base._resolve(into: &list)
        for index in start..<list.count { list[index].conditions.append(condition) }
    }
}

/// A representation with a modifier applied to each of its resolved entries.
struct _ModifiedTransferRepresentation<Base: TransferRepresentation>: TransferRepresentation {
    typealias Item = Base.Item
    typealias Body = Never
    let base: Base
    let modify: @Sendable (inout ResolvedTransferRepresentation<Base.Item>) -> Void

    func _resolve(into list: inout [ResolvedTransferRepresentation<Base.Item>]) {
        let start = list.count
        base._resolve(into: &list)
        for index in start..<list.count { modify(&list[index]) }
    }
}
