import ShareSync

/// Files whose content must come from another device and that no pull has taken yet, by path, offered to the
/// pulls in path order: a pull then brings neighbours, which are recorded, announced and recorded by the others
/// next to each other (a few pages of each index written per batch, not one page per file).
struct PullQueue {
    private(set) var entries: [String: FileEntry] = [:]
    /// The bytes of what is queued (kept as paths come and go, not added up again for each status; held at the top
    /// of its range: another device's index may name more bytes than 64 bits count).
    private(set) var bytes: UInt64 = 0
    /// Queued paths in path order, where the pulls' next look begins (nothing before it is still queued), and paths
    /// queued since (looked at first, merged into the order when many came or a look reaches the end). The order
    /// may still hold paths taken since (passed over by looks, dropped when they outnumber the queue); it holds no
    /// path twice.
    private var order: [String] = []
    private var cursor = 0
    private var added: [String] = []

    subscript(path: String) -> FileEntry? {
        get { entries[path] }
        set {
            guard let newValue else {
                if let old = entries.removeValue(forKey: path) { bytes -= min(bytes, old.size) }
                return
            }
            if let old = entries.updateValue(newValue, forKey: path) {
                bytes = (bytes - min(bytes, old.size)).heldAdding(newValue.size)
            } else {
                bytes = bytes.heldAdding(newValue.size)
                added.append(path)
            }
        }
    }

    var isEmpty: Bool { entries.isEmpty }
    var count: Int { entries.count }

    mutating func removeAll() { self = PullQueue() }

    /// Calls `look` with queued entries, those queued lately first (in path order too) and then the others in path
    /// order from where the last look began, until it answers false (or everything was looked at once). Many added
    /// at once (a plan of the whole folder, an index update) are merged into the order first; a look that reaches
    /// the end merges what was added since and begins at the order's start next time.
    mutating func look(_ look: (String, FileEntry) -> Bool) {
        if added.count > Self.addedUnsorted { merge() }
        // Each path once (one added, taken off and added again is in both lists, or twice in this one).
        var early: Set<String> = []
        for path in added.sorted() where early.insert(path).inserted {
            guard let entry = entries[path] else { continue }
            if !look(path, entry) { return }
        }
        var moving = true
        var at = cursor
        while at < order.count {
            let path = order[at]
            at += 1
            guard let entry = entries[path] else {
                // Taken since, or taken off the queue: a look begins after it next time.
                if moving { cursor = at }
                continue
            }
            // Left where it is (still queued): the next look begins here.
            moving = false
            if early.contains(path) { continue }
            if !look(path, entry) { return }
        }
        if !added.isEmpty || cursor > 0 { merge() }
    }

    /// How many paths added since the last merge are looked at as they came.
    static let addedUnsorted = 256

    /// Puts the paths added since into the order: sorted among themselves, then appended (an index arrives in path
    /// order, so they mostly come after everything queued) or merged in one pass; never the whole queue sorted
    /// again, which for 100,000 queued files cost more than pulling them.
    private mutating func merge() {
        var fresh = added.filter { entries[$0] != nil }
        added = []
        fresh.sort()
        if cursor > 0 {
            order.removeFirst(cursor)
            cursor = 0
        }
        if order.count > 2 * entries.count + 1024 { order.removeAll { entries[$0] == nil } }
        guard let first = fresh.first else { return }
        if order.last.map({ $0 < first }) ?? true {
            order.reserveCapacity(order.count + fresh.count)
            for path in fresh where path != order.last { order.append(path) }
            return
        }
        var merged: [String] = []
        merged.reserveCapacity(order.count + fresh.count)
        var (i, j) = (0, 0)
        while i < order.count || j < fresh.count {
            let next: String
            if j == fresh.count || (i < order.count && order[i] <= fresh[j]) {
                next = order[i]
                i += 1
            } else {
                next = fresh[j]
                j += 1
            }
            if next != merged.last { merged.append(next) }
        }
        order = merged
    }
}

extension UInt64 {
    /// The sum, or the largest value when the sum is larger: for counts of bytes other devices name.
    func heldAdding(_ other: UInt64) -> UInt64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }
}
