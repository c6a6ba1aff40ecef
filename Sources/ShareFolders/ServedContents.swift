import ShareThreads

/// Small files' contents this device just served, each already checked against its content digest, by folder and
/// digest: in a first sync every other device asks for the same files at about the same time, and each file is then
/// read and checked once rather than once for each of them. What it answers is the content the index named when it
/// was read (the content asked for, whatever the disk holds since: the asker checks it again). Bounded in bytes;
/// an entry is dropped a few seconds after it was kept, or when newer ones need the room.
final class ServedContents: Sendable {
    private struct Key: Hashable {
        var folder: String
        var digest: [UInt8]
    }

    private struct State {
        var kept: [Key: (bytes: [UInt8], at: Double, serial: Int)] = [:]
        /// Keys in the order they were kept, each with the serial it was kept under (from `first` on; a place whose
        /// serial is no longer the key's was kept again later, and is passed over).
        var order: [(key: Key, serial: Int)] = []
        var first = 0
        var serial = 0
        var bytes = 0
    }

    private let state = Guarded(State())
    /// At most this many bytes of contents kept.
    let capacity: Int
    /// How long an entry is kept.
    let seconds: Double
    private let now: @Sendable () -> Double

    init(
        capacity: Int = 16 << 20, seconds: Double = 5,
        now: @escaping @Sendable () -> Double = Threads.monotonicSeconds
    ) {
        self.capacity = capacity
        self.seconds = seconds
        self.now = now
    }

    /// The contents of `digest` in `folder` kept lately, if any.
    func contents(_ digest: [UInt8], in folder: String) -> [UInt8]? {
        let at = now()
        return state.withLock { state in
            Self.expire(&state, before: at - seconds)
            return state.kept[Key(folder: folder, digest: digest)]?.bytes
        }
    }

    /// Keeps `bytes`, the checked contents of `digest` in `folder` (nothing larger than a tenth of the capacity).
    func keep(_ bytes: [UInt8], digest: [UInt8], in folder: String) {
        guard bytes.count <= capacity / 10 else { return }
        let at = now()
        state.withLock { state in
            Self.expire(&state, before: at - seconds)
            let key = Key(folder: folder, digest: digest)
            state.serial += 1
            if let old = state.kept.updateValue((bytes, at, state.serial), forKey: key) {
                state.bytes -= old.bytes.count
            }
            state.bytes += bytes.count
            state.order.append((key, state.serial))
            while state.bytes > capacity, state.first < state.order.count { Self.dropFirst(&state) }
            Self.compact(&state)
        }
    }

    /// Drops what was kept longer than `seconds` ago (called every second or so: an idle agent holds none); true
    /// when that dropped the last of it (the memory it took can go back to the system).
    @discardableResult
    func expire() -> Bool {
        let at = now()
        return state.withLock { state in
            let held = !state.kept.isEmpty
            Self.expire(&state, before: at - seconds)
            return held && state.kept.isEmpty
        }
    }

    /// How many contents are kept (for tests).
    var count: Int { state.withLock { $0.kept.count } }

    private static func expire(_ state: inout State, before limit: Double) {
        while state.first < state.order.count {
            let place = state.order[state.first]
            if let entry = state.kept[place.key], entry.serial == place.serial, entry.at >= limit { break }
            dropFirst(&state)
        }
        compact(&state)
    }

    /// Drops the oldest place in the order, and its contents when they were not kept again since.
    private static func dropFirst(_ state: inout State) {
        let place = state.order[state.first]
        state.first += 1
        if state.kept[place.key]?.serial == place.serial, let old = state.kept.removeValue(forKey: place.key) {
            state.bytes -= old.bytes.count
        }
    }

    /// The order without the places passed over, once they are most of it.
    private static func compact(_ state: inout State) {
        if state.first == state.order.count {
            state.order.removeAll(keepingCapacity: false)
            state.first = 0
        } else if state.first > 1024, state.first * 2 > state.order.count {
            state.order.removeFirst(state.first)
            state.first = 0
        }
    }
}
