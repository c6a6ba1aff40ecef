import ShareSync

/// Files whose content must come from another device and that no pull has taken yet, by path, offered to the
/// pulls in path order: a pull then brings neighbours, which are recorded, announced and recorded by the others
/// next to each other (a few pages of each index written per batch, not one page per file).
struct PullQueue {
    private(set) var entries: [String: FileEntry] = [:]
    /// The paths queued when they were last sorted, and where the pulls' next look begins (nothing before it is
    /// still queued).
    private var order: [String] = []
    private var cursor = 0
    /// Paths queued since (looked at first, sorted with the rest when a look reaches the end).
    private var added: [String] = []

    subscript(path: String) -> FileEntry? {
        get { entries[path] }
        set {
            guard let newValue else {
                entries[path] = nil
                return
            }
            if entries.updateValue(newValue, forKey: path) == nil { added.append(path) }
        }
    }

    var isEmpty: Bool { entries.isEmpty }
    var count: Int { entries.count }
    var values: Dictionary<String, FileEntry>.Values { entries.values }

    mutating func removeAll() { self = PullQueue() }

    /// Calls `look` with queued entries, those queued lately first (in path order too) and then the others in path
    /// order from where the last look began, until it answers false (or everything was looked at once). Many added
    /// at once (a plan of the whole folder) are sorted into the order first; a look that reaches the end sorts what
    /// was added since into the order and begins at its start next time.
    mutating func look(_ look: (String, FileEntry) -> Bool) {
        if added.count > Self.addedUnsorted { sort() }
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
        // The end: what is queued now (old and new) is sorted again, once anything new came.
        if !added.isEmpty || cursor > 0 { sort() }
    }

    /// How many paths added since the last sort are looked at as they came.
    static let addedUnsorted = 256

    private mutating func sort() {
        order = entries.keys.sorted()
        added = []
        cursor = 0
    }
}
