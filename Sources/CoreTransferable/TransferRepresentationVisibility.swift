/// The visibility levels that specify the kinds of receivers that can see an exported representation.
///
/// Across machines: `.ownProcess` never leaves the process; `.team` reaches only the owner's own devices; `.group`
/// reaches devices in a named group and the owner's devices; `.all` reaches any trusted device.
public struct TransferRepresentationVisibility: Equatable, Hashable, Sendable {
    /// Narrowest first: a representation is visible to a receiver whose scope is at least as narrow.
    let rank: Int

    /// Any receiver.
    public static let all = TransferRepresentationVisibility(rank: 3)
    /// Receivers of the same owner (apps from the same team; here: the owner's own devices).
    public static let team = TransferRepresentationVisibility(rank: 1)
    /// Receivers in the same group (an App Group; here: devices in a named group, and the owner's devices).
    public static let group = TransferRepresentationVisibility(rank: 2)
    /// Only the process that owns the item.
    public static let ownProcess = TransferRepresentationVisibility(rank: 0)

    /// Whether a representation with this visibility may be seen by a receiver in `scope`.
    public func isVisible(to scope: TransferRepresentationVisibility) -> Bool { rank >= scope.rank }

    /// The narrower of two visibilities (nested modifiers never widen what an inner one restricted).
    func narrowed(to other: TransferRepresentationVisibility) -> TransferRepresentationVisibility {
        rank <= other.rank ? self : other
    }
}

extension TransferRepresentationVisibility: CustomStringConvertible {
    public var description: String {
        switch rank {
        case 0: return "ownProcess"
        case 1: return "team"
        case 2: return "group"
        default: return "all"
        }
    }
}
