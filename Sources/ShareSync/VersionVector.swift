/// A device as a version vector names it: the first 64 bits of its device ID (Syncthing's short ID).
public typealias ShortID = UInt64

/// How a file's version came about: for each device that changed it, a counter that device raised with each of its
/// changes. Two versions are equal, one follows the other (it saw every change the other did), or they are
/// concurrent (each has a change the other never saw: a conflict, unless their contents agree).
///
/// A device raises its own counter to `max(counter + 1, now)` (seconds since 1970), as Syncthing does: counters stay
/// close to wall time, so a device that lost its memory and starts again from an old vector still moves forward.
public struct VersionVector: Hashable, Sendable, CustomStringConvertible {
    public struct Counter: Hashable, Sendable {
        public var device: ShortID
        public var value: UInt64
        public init(device: ShortID, value: UInt64) {
            self.device = device
            self.value = value
        }
    }

    /// Sorted by device, no zero values, each device once.
    public private(set) var counters: [Counter]

    public init() { counters = [] }

    /// `counters` in any order; zeros dropped, and of a device named twice the larger value kept.
    public init(_ counters: [Counter]) {
        var byDevice: [ShortID: UInt64] = [:]
        for counter in counters where counter.value > 0 {
            byDevice[counter.device] = max(byDevice[counter.device] ?? 0, counter.value)
        }
        self.counters = byDevice.map { Counter(device: $0.key, value: $0.value) }.sorted { $0.device < $1.device }
    }

    public static let empty = VersionVector()

    public var isEmpty: Bool { counters.isEmpty }

    /// The counter of `device` (0 when it never changed the file).
    public func value(of device: ShortID) -> UInt64 {
        counters.first { $0.device == device }?.value ?? 0
    }

    /// This version changed once more by `device`, at `now` (seconds since 1970). A counter at the top of its range
    /// stays there (no peer may send one above `Limits.maxVersionCounter`; this never stops the program).
    public func updated(by device: ShortID, now: UInt64) -> VersionVector {
        var next = counters
        if let index = next.firstIndex(where: { $0.device == device }) {
            let (raised, overflow) = next[index].value.addingReportingOverflow(1)
            next[index].value = max(overflow ? UInt64.max : raised, now)
        } else {
            next.append(Counter(device: device, value: max(1, now)))
        }
        return VersionVector(next)
    }

    /// Every change either saw.
    public func merged(with other: VersionVector) -> VersionVector {
        VersionVector(counters + other.counters)
    }

    public enum Ordering: Sendable, Equatable {
        case equal, greater, lesser, concurrent
    }

    /// How this version stands to `other`: `greater` when it saw every change `other` did and more.
    public func compare(_ other: VersionVector) -> Ordering {
        var greater = false
        var lesser = false
        var i = 0
        var j = 0
        while i < counters.count || j < other.counters.count {
            let a = i < counters.count ? counters[i] : nil
            let b = j < other.counters.count ? other.counters[j] : nil
            if let a, b == nil || a.device < b!.device {
                greater = true
                i += 1
            } else if let b, a == nil || b.device < a!.device {
                lesser = true
                j += 1
            } else if let a, let b {
                if a.value > b.value { greater = true }
                if a.value < b.value { lesser = true }
                i += 1
                j += 1
            }
            if greater && lesser { return .concurrent }
        }
        if greater { return .greater }
        if lesser { return .lesser }
        return .equal
    }

    /// Whether this version saw every change `other` did (equal or greater).
    public func dominates(_ other: VersionVector) -> Bool {
        let order = compare(other)
        return order == .equal || order == .greater
    }

    public var description: String {
        "{" + counters.map { "\(String($0.device, radix: 16).prefix(7)):\($0.value)" }.joined(separator: ",") + "}"
    }
}
