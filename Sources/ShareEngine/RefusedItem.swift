import FoundationEssentials

/// An item this program refused, or that had nothing in common with what it accepts; the sender was told the same
/// reason.
public struct RefusedItem: Sendable, Codable, Equatable {
    /// What the sender calls it.
    public var label: String
    /// The sending device, by its name here.
    public var from: String
    /// Why: for instance the types offered beside the ones accepted.
    public var reason: String

    /// A refusal as reported.
    public init(label: String, from: String, reason: String) {
        self.label = label
        self.from = from
        self.reason = reason
    }
}
