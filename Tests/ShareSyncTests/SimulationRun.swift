import ShareProtocol
import ShareSync
import ShareSyncStore

/// A schedule made from a seed, run, and checked.
struct SimulationRun {
    struct Options {
        var devices = 3
        var steps = 120
        /// Every change is followed by a full sync of all devices: nothing is ever concurrent, so a conflict copy
        /// would be a false one.
        var sequential = false
        /// Each device's index in a SQLite database of its own (in `directory`) instead of memory.
        var sqlite: String?
    }

    let seed: UInt64
    let options: Options

    /// The schedule of this seed.
    func schedule() -> [SimStep] {
        var random = SplitMix64(seed: seed)
        var steps: [SimStep] = []
        let n = options.devices
        for _ in 0..<options.steps {
            let roll = Int(random.next() % 100)
            let device = Int(random.next() % UInt64(n))
            switch roll {
            case 0..<30:
                steps.append(
                    .user(
                        device: device, op: Int(random.next() % 15), a: random.next(), b: random.next(),
                        scanNow: options.sequential || random.next() % 5 != 0))
            case 30..<38: steps.append(.scan(device: device))
            case 38..<55: steps.append(.sync(device: device))
            case 55..<85:
                let fate = Int(random.next() % 20)
                steps.append(.deliver(pick: random.next(), fate: fate == 0 ? 1 : fate == 1 ? 2 : 0))
            case 85..<92:
                let other = Int(random.next() % UInt64(n))
                steps.append(.link(a: device, b: other, up: random.next() % 2 == 0))
            case 92..<94: steps.append(.restart(device: device))
            case 94..<96: steps.append(.mount(device: device, up: random.next() % 2 == 0))
            case 96..<97:
                let name = Int(random.next() % 5)
                steps.append(.ignore(device: device, name: name == 4 ? nil : name))
            case 97..<98: steps.append(.mode(device: device, kind: Int(random.next() % 3)))
            default: steps.append(.clock(device: device, seconds: Int64(random.next() % 7200) - 3600))
            }
        }
        return steps
    }

    /// What a run ended with: nil when every invariant held, else what broke.
    struct Result {
        var failure: String?
        var trees: [[String: String]]
        var conflicts: Int
    }

    func run(_ steps: [SimStep]) -> Result {
        let simulation = Simulation(
            deviceCount: options.devices,
            store: options.sqlite.map { directory in
                { index, _ in
                    let path = "\(directory)/device\(index)-\(seed)-\(UInt32.random(in: 0...UInt32.max)).db"
                    let database = try! Database(path: path)
                    try! SQLiteFolderStore.prepare(database)
                    return try! SQLiteFolderStore(database: database, folder: Simulation.folderID)
                }
            })
        for step in steps {
            simulation.run(step)
            if options.sequential, case .user = step {
                guard simulation.settle() else {
                    return Result(failure: "did not settle after \(step)", trees: [], conflicts: 0)
                }
            }
        }
        let settled = simulation.settle()
        let trees = simulation.devices.map(\.disk.tree)
        let conflicts = simulation.devices.reduce(0) { $0 + $1.folder.conflicts.count }
        guard settled else {
            return Result(
                failure: "did not converge within its bound: \(differences(simulation))", trees: trees,
                conflicts: conflicts)
        }
        return Result(failure: check(simulation), trees: trees, conflicts: conflicts)
    }

    private func differences(_ simulation: Simulation) -> String {
        let first = simulation.devices[0].disk.tree
        for device in simulation.devices.dropFirst() where device.disk.tree != first {
            let paths = Set(first.keys).union(device.disk.tree.keys).filter { first[$0] != device.disk.tree[$0] }
            return "d0 and d\(device.index) differ at \(paths.sorted().prefix(5)): "
                + paths.sorted().prefix(3).map { "\($0): \(first[$0] ?? "-") vs \(device.disk.tree[$0] ?? "-")" }
                .joined(separator: "; ")
        }
        for device in simulation.devices {
            let plan = device.folder.plan()
            if !plan.isEmpty { return "d\(device.index) still plans \(plan.prefix(3))" }
        }
        return "?"
    }

    /// The invariants, after every device settled with all others in reach.
    private func check(_ simulation: Simulation) -> String? {
        let devices = simulation.devices
        if let violation = simulation.violations.first { return violation }
        for device in devices where !device.disk.throughLinks.isEmpty {
            return "d\(device.index) was asked to change \(device.disk.throughLinks[0]) through a link"
        }
        let tree = devices[0].disk.tree
        // Convergence: every device holds the same tree, and agrees on every path's version.
        for device in devices where device.disk.tree != tree { return "trees differ: \(differences(simulation))" }
        let paths = devices.reduce(into: Set<String>()) { $0.formUnion($1.store.allPaths()) }
        for path in paths {
            let versions = devices.map { $0.store.local(path).map { "\($0.entry.version) \($0.entry.deleted)" } ?? "-" }
            if Set(versions).count > 1 { return "devices disagree on \(path): \(versions)" }
            // The index says what the disk holds.
            for device in devices {
                let local = device.store.local(path)
                let onDisk = device.disk.nodes[path] != nil
                if (local.map { !$0.entry.deleted } ?? false) != onDisk {
                    return "d\(device.index)'s index and disk disagree on \(path)"
                }
            }
        }
        // No lost write: what a person wrote (and its device scanned) is somewhere, unless a later change of its
        // path that saw it (a write, a deletion, a rename away) superseded it.
        let contents = Set(devices[0].disk.nodes.values.filter { $0.kind == .file }.map(\.content))
        for event in simulation.events {
            guard let content = event.content, let version = event.version, !contents.contains(content) else {
                continue
            }
            // The content may have moved (a rename, a conflict copy): superseded where any of its copies was.
            let copies = simulation.events.filter { $0.content == content && $0.version != nil }
            let superseded = copies.contains { copy in
                simulation.events.contains { later in
                    later.path == copy.path && later.version.map { $0.compare(copy.version!) == .greater } ?? false
                }
            }
            _ = version
            if !superseded {
                return
                    "lost the write \(String(decoding: content, as: UTF8.self)) of d\(event.device) at \(event.path) \(version)"
            }
        }
        // No resurrection: a path deleted by a deletion that saw every write to it stays deleted.
        for path in tree.keys {
            let writes = simulation.events.filter { $0.path == path && !$0.deleted && $0.version != nil }
            for deletion in simulation.events where deletion.path == path && deletion.deleted {
                guard let seen = deletion.version else { continue }
                if !writes.isEmpty, writes.allSatisfy({ seen.dominates($0.version!) }) {
                    return "\(path) came back after a deletion \(seen) that saw every write to it"
                }
            }
        }
        // Conflicts only for real concurrency, between different contents; none at all when nothing was concurrent.
        for device in devices {
            for conflict in device.folder.conflicts where !conflict.forFolder {
                if conflict.winnerVersion.dominates(conflict.loserVersion) {
                    return "a conflict copy of \(conflict.path) for a version the winner had seen"
                }
            }
        }
        if options.sequential {
            let total = devices.reduce(0) { $0 + $1.folder.conflicts.count }
            if total > 0 { return "\(total) conflict copies without concurrent changes" }
        }
        return nil
    }

    /// The fewest steps of `steps` that still fail (taking out one step at a time, then chunks, while it fails).
    func shrink(_ steps: [SimStep]) -> [SimStep] {
        var current = steps
        var chunk = max(1, current.count / 2)
        while chunk >= 1 {
            var index = 0
            var removedAny = false
            while index < current.count {
                var candidate = current
                candidate.removeSubrange(index..<min(current.count, index + chunk))
                if run(candidate).failure != nil {
                    current = candidate
                    removedAny = true
                } else {
                    index += chunk
                }
            }
            if !removedAny { chunk /= 2 }
        }
        return current
    }
}
