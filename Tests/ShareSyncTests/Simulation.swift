import ShareProtocol
import ShareSync

/// A seeded generator (splitmix64): every choice of a schedule comes from it, so a seed names a run.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}

/// One step of a schedule. Each carries its own random numbers, so a schedule with steps taken out still runs
/// (which is how a failing one is shrunk).
enum SimStep: Equatable, CustomStringConvertible {
    /// A person's change on a device: `op` says which, `a` and `b` pick the paths and names.
    case user(device: Int, op: Int, a: UInt64, b: UInt64, scanNow: Bool)
    case scan(device: Int)
    /// The device plans and does what it can, announces what it recorded and asks for what it needs.
    case sync(device: Int)
    /// A message in flight: delivered (0), lost (1, which breaks its link), or delivered twice (2).
    case deliver(pick: UInt64, fate: Int)
    case link(a: Int, b: Int, up: Bool)
    /// The device restarts: what it held in memory (links, pulls under way) is gone; its index and files stay.
    case restart(device: Int)
    case clock(device: Int, seconds: Int64)
    /// The folder's disk is taken away (its marker gone, as an unmounted disk) or given back.
    case mount(device: Int, up: Bool)
    /// The device's ignore patterns: a name ignored wherever it is (nil: none).
    case ignore(device: Int, name: Int?)
    /// The folder's type on the device (`share sync set --type`): 0 send-receive, 1 send-only, 2 receive-only.
    case mode(device: Int, kind: Int)

    var description: String {
        switch self {
        case .user(let d, let op, let a, let b, let scan):
            return "user(d\(d), op \(op), \(a % 1000), \(b % 1000)\(scan ? "" : ", unscanned"))"
        case .scan(let d): return "scan(d\(d))"
        case .sync(let d): return "sync(d\(d))"
        case .deliver(let pick, let fate): return "deliver(\(pick % 100), \(["ok", "lost", "twice"][fate]))"
        case .link(let a, let b, let up): return "link(d\(a)-d\(b) \(up ? "up" : "down"))"
        case .restart(let d): return "restart(d\(d))"
        case .clock(let d, let s): return "clock(d\(d), \(s) s)"
        case .mount(let d, let up): return "\(up ? "mount" : "unmount")(d\(d))"
        case .ignore(let d, let name):
            return "ignore(d\(d), \(name.map { Simulation.names[$0 % Simulation.names.count] } ?? "nothing"))"
        case .mode(let d, let kind): return "mode(d\(d), \(["send-receive", "send-only", "receive-only"][kind % 3]))"
        }
    }
}

/// What a person did, and the version it got when its device scanned it: the writes that must survive, and the
/// deletions that must stay.
struct SimEvent {
    var device: Int
    var path: String
    /// The content written (nil: a deletion, or a folder or link made).
    var content: [UInt8]?
    var deleted = false
    var version: VersionVector?
}

/// Several devices sharing one folder, in memory: their indexes, files and links, and a network that loses,
/// duplicates and reorders messages, with partitions and restarts, all driven by one schedule.
final class Simulation {
    static let folderID = "sim-folder"

    final class Device {
        let index: Int
        let id: ShortID
        let store: FolderStore
        let disk: SimDisk
        let folder: SyncFolder
        var offset: Int64 = 0
        /// A name this device ignores wherever it is.
        var ignored: String? {
            didSet { folder.patterns = ignored.map { IgnorePatterns(text: "# from the schedule\n" + $0) } ?? .none }
        }
        func ignores(_ path: String) -> Bool { folder.patterns.ignores(path, folder: true) }
        /// The link machine of each linked peer, by peer.
        var machines: [Int: FolderLinkMachine] = [:]
        /// Content asked for and not yet come: path → (version, peer, link epoch).
        var requested: [String: (version: VersionVector, peer: Int, epoch: Int)] = [:]
        /// Syncs so far: every third is the agent's full round (a whole scan, then a plan of the unsettled paths).
        var syncs = 0

        init(index: Int, id: ShortID, store: FolderStore, time: @escaping () -> Int64) {
            self.index = index
            self.id = id
            self.store = store
            let disk = SimDisk(now: time)
            self.disk = disk
            folder = SyncFolder(
                me: id, store: store, disk: disk,
                clock: {
                    let t = time(); return (UInt64(max(0, t / 1_000_000_000)), t)
                },
                label: { String($0, radix: 36).uppercased() })
            folder.includes = { !SyncNames.isInternal($0) }
            folder.deletionShare = nil
        }
    }

    enum Payload {
        case hello(FolderHello)
        case update(IndexUpdate)
        case pull([FileEntry])
        /// The content of the files asked for that the holder has at that version, and the paths it has not.
        case content([(FileEntry, [UInt8])], missing: [String])
    }

    struct Message {
        var from: Int
        var to: Int
        var epoch: Int
        var payload: Payload
    }

    struct Pair: Hashable {
        let a: Int
        let b: Int
        init(_ x: Int, _ y: Int) {
            a = min(x, y)
            b = max(x, y)
        }
    }

    var devices: [Device] = []
    var time: Int64 = 1_800_000_000 * 1_000_000_000
    var connected: Set<Pair> = []
    var epochs: [Pair: Int] = [:]
    var nextEpoch = 1
    var queue: [Message] = []
    var events: [SimEvent] = []
    var counter = 0
    var log: [String] = []

    /// `store`: each device's index (in memory unless given).
    init(deviceCount: Int, store: ((Int, ShortID) -> FolderStore)? = nil) {
        for index in 0..<deviceCount {
            let id: ShortID = 0x1000_0000_0000_0000 &* UInt64(index + 1) &+ 0x2345
            let made = store?(index, id) ?? MemoryFolderStore(indexID: id &* 31 &+ 7)
            let device = Device(index: index, id: id, store: made) { [unowned self] in
                self.time + self.devices[index].offset
            }
            devices.append(device)
        }
        for a in 0..<deviceCount { for b in (a + 1)..<max(a + 1, deviceCount) { connected.insert(Pair(a, b)) } }
    }

    // MARK: Links

    /// What `device` announces to `peer` of the folder.
    func announcement(_ device: Device, to peer: Device) -> FolderAnnouncement {
        let held = device.store.remoteState(peer.id)
        return FolderAnnouncement(
            id: Self.folderID, label: "sim", type: "send-receive", devices: [],
            indexID: String(device.store.indexID, radix: 16), sequence: device.store.sequence,
            heldIndexID: held.map { String($0.indexID, radix: 16) } ?? "", heldSequence: held?.have ?? 0)
    }

    /// Makes the links every connected pair should have, and ends those it should not.
    func ensureLinks() {
        for a in 0..<devices.count {
            for b in (a + 1)..<max(a + 1, devices.count) {
                let pair = Pair(a, b)
                if connected.contains(pair) {
                    if epochs[pair] == nil { open(pair) }
                } else if epochs[pair] != nil {
                    close(pair)
                }
            }
        }
    }

    func open(_ pair: Pair) {
        let epoch = nextEpoch
        nextEpoch += 1
        epochs[pair] = epoch
        for (x, y) in [(pair.a, pair.b), (pair.b, pair.a)] {
            let machine = FolderLinkMachine(local: [announcement(devices[x], to: devices[y])])
            devices[x].machines[y] = machine
            queue.append(Message(from: x, to: y, epoch: epoch, payload: .hello(machine.hello)))
            _ = machine
        }
    }

    func close(_ pair: Pair) {
        epochs[pair] = nil
        devices[pair.a].machines[pair.b] = nil
        devices[pair.b].machines[pair.a] = nil
        for device in [devices[pair.a], devices[pair.b]] {
            device.requested = device.requested.filter { $0.value.peer != pair.a && $0.value.peer != pair.b }
        }
    }

    func send(_ from: Int, _ to: Int, _ payload: Payload) {
        guard let epoch = epochs[Pair(from, to)] else { return }
        queue.append(Message(from: from, to: to, epoch: epoch, payload: payload))
    }

    /// Sends `device`'s entries to `peer` from `since`, as its link machine asked.
    func sendIndex(_ device: Device, to peer: Int, since: UInt64) {
        let records = device.store.localSince(since, limit: 1_000_000)
        guard let last = records.last else { return }
        send(
            device.index, peer,
            .update(
                IndexUpdate(
                    folder: Self.folderID, indexID: String(device.store.indexID, radix: 16), from: since,
                    to: last.sequence, records: records.map(\.record))))
        device.machines[peer]?.sent(Self.folderID, upTo: last.sequence)
    }

    /// `device` recorded entries: every linked peer hears of them.
    func announce(_ device: Device) {
        for peer in device.machines.keys.sorted() {
            guard let machine = device.machines[peer] else { continue }
            for case .sendIndex(_, let since) in machine.localChanged(Self.folderID) {
                sendIndex(device, to: peer, since: since)
            }
        }
    }

    // MARK: Steps

    func run(_ step: SimStep) {
        defer {
            if let path = traced {
                let now = describe(path)
                if now != lastTrace { print("after \(step):\n\(now)") }
                lastTrace = now
            }
        }
        time += 1_000_000_000
        ensureLinks()
        switch step {
        case .user(let d, let op, let a, let b, let scanNow):
            user(devices[d % devices.count], op: op, a: a, b: b)
            if scanNow { scan(devices[d % devices.count]) }
        case .scan(let d):
            scan(devices[d % devices.count])
        case .sync(let d):
            sync(devices[d % devices.count])
        case .deliver(let pick, let fate):
            guard !queue.isEmpty else { return }
            let message = queue.remove(at: Int(pick % UInt64(queue.count)))
            switch fate {
            case 1:
                // A message lost breaks its connection: the link is made again, and its hellos say where each stands.
                let pair = Pair(message.from, message.to)
                if epochs[pair] == message.epoch { close(pair) }
            case 2:
                deliver(message)
                deliver(message)
            default:
                deliver(message)
            }
        case .link(let a, let b, let up):
            let pair = Pair(a % devices.count, b % devices.count)
            guard pair.a != pair.b else { return }
            if up { connected.insert(pair) } else { connected.remove(pair) }
            ensureLinks()
        case .restart(let d):
            let device = devices[d % devices.count]
            for peer in Array(device.machines.keys) { close(Pair(device.index, peer)) }
            device.requested = [:]
        case .clock(let d, let seconds):
            devices[d % devices.count].offset += seconds * 1_000_000_000
        case .mount(let d, let up):
            devices[d % devices.count].disk.mounted = up
        case .mode(let d, let kind):
            setMode(devices[d % devices.count], [.sendReceive, .sendOnly, .receiveOnly(revertLocal: false)][kind % 3])
        case .ignore(let d, let name):
            devices[d % devices.count].ignored = name.map { Self.names[$0 % Self.names.count] }
        }
    }

    /// The folder's type on `device` changes, as the agent changes it: a receive-only folder that is one no more
    /// records what was changed there anew (so it is announced), and everything is planned again.
    func setMode(_ device: Device, _ mode: SyncFolder.Mode) {
        let before = device.folder.mode
        guard before != mode else { return }
        device.folder.mode = mode
        if case .receiveOnly = before, !device.folder.sendLocalChanges().isEmpty { announce(device) }
    }

    /// What broke an invariant that holds at every step (not only at the end): a folder not there recording
    /// anything, an ignored path recorded as deleted, a change asked through a link.
    var violations: [String] = []
    var lastTrace = ""

    func scan(_ device: Device, forPlan: Bool = false) {
        let recorded = device.folder.scan(forPlan: forPlan)
        if !device.disk.mounted, !recorded.isEmpty {
            violations.append("d\(device.index) recorded \(recorded.count) entries while its folder was not there")
        }
        for entry in recorded where entry.deleted && device.ignores(entry.path) {
            violations.append("d\(device.index) recorded the ignored \(entry.path) as deleted")
        }
        noteScanned(device, recorded)
        announce(device)
    }

    /// Every change this device recorded as its own (a person's write, deletion, folder or link, a time or mode
    /// changed, a conflict copy made) is an event with its version: what must survive, and what may supersede.
    func noteScanned(_ device: Device, _ recorded: [FileEntry]) {
        for entry in recorded where entry.modifiedBy == device.id {
            let content = !entry.deleted && entry.kind == .file ? device.disk.nodes[entry.path]?.content : nil
            events.append(
                SimEvent(
                    device: device.index, path: entry.path, content: content, deleted: entry.deleted,
                    version: entry.version))
        }
    }

    func sync(_ device: Device) {
        // Requests whose link ended, or for a version no longer wanted, are forgotten (asked again below).
        device.requested = device.requested.filter { path, request in
            let local = device.store.local(path).map { [$0.entry] } ?? []
            let global = GlobalVersion.winner(Array(device.store.remotes(path).values) + local)
            return epochs[Pair(device.index, request.peer)] == request.epoch && global?.version == request.version
        }
        device.syncs += 1
        let full = device.syncs % 3 == 0
        if full { scan(device, forPlan: true) }
        let outcome = device.folder.execute(device.folder.plan(afterFullScan: full))
        noteScanned(device, outcome.recorded)
        if !outcome.rescans.isEmpty { noteScanned(device, device.folder.scan(paths: outcome.rescans)) }
        announce(device)
        var asks: [Int: [FileEntry]] = [:]
        for entry in outcome.fetches where device.requested[entry.path]?.version != entry.version {
            // From a linked device that announced exactly this version.
            let holders = device.machines.keys.sorted().filter { peer in
                device.store.remotes(entry.path)[devices[peer].id].map { $0.version == entry.version && !$0.deleted }
                    ?? false
            }
            guard let peer = holders.first, let epoch = epochs[Pair(device.index, peer)] else { continue }
            device.requested[entry.path] = (entry.version, peer, epoch)
            asks[peer, default: []].append(entry)
        }
        for (peer, entries) in asks.sorted(by: { $0.key < $1.key }) { send(device.index, peer, .pull(entries)) }
    }

    func deliver(_ message: Message) {
        guard epochs[Pair(message.from, message.to)] == message.epoch else { return }
        let device = devices[message.to]
        let peer = devices[message.from]
        switch message.payload {
        case .hello(let hello):
            guard var machine = device.machines[message.from] else { return }
            guard let actions = try? machine.received(hello) else {
                // A peer that breaks the protocol loses its connection (as the agent's link does).
                close(Pair(message.from, message.to))
                return
            }
            device.machines[message.from] = machine
            for case .sendIndex(_, let since) in actions { sendIndex(device, to: message.from, since: since) }
        case .update(let update):
            guard let machine = device.machines[message.from] else { return }
            let held = device.store.remoteState(peer.id).map { (String($0.indexID, radix: 16), $0.have) }
            guard let actions = try? machine.received(update, held: held) else {
                close(Pair(message.from, message.to))
                return
            }
            for action in actions {
                switch action {
                case .apply(let update, let reset):
                    let entries = update.records.compactMap { try? FileEntry(record: $0) }
                    device.store.applyRemote(
                        peer.id, indexID: UInt64(update.indexID, radix: 16) ?? 0, reset: reset, entries: entries,
                        have: update.to)
                case .gap:
                    close(Pair(message.from, message.to))
                default:
                    break
                }
            }
        case .pull(let entries):
            var answer: [(FileEntry, [UInt8])] = []
            var missing: [String] = []
            var distrusted: [String] = []
            for entry in entries {
                guard let local = device.store.local(entry.path), local.entry.version == entry.version,
                    !local.entry.deleted, let node = device.disk.nodes[entry.path], node.kind == .file
                else {
                    missing.append(entry.path)
                    continue
                }
                guard SimDisk.digest(node.content) == entry.digest else {
                    missing.append(entry.path)
                    // As the agent's holder does: content not what the index names under the stamp it recorded
                    // (a change the scans could not see) is read again at once.
                    if let recorded = local.stamp, let now = device.disk.stamp(entry.path), recorded.same(as: now) {
                        distrusted.append(entry.path)
                    }
                    continue
                }
                answer.append((entry, node.content))
            }
            send(device.index, message.from, .content(answer, missing: missing))
            if !distrusted.isEmpty {
                device.folder.distrust(distrusted)
                noteScanned(device, device.folder.scan(paths: Set(distrusted)))
                announce(device)
            }
        case .content(let items, let missing):
            for path in missing where device.requested[path]?.peer == message.from { device.requested[path] = nil }
            var rescans: Set<String> = []
            for (entry, content) in items {
                guard device.requested[entry.path]?.version == entry.version else { continue }
                device.requested[entry.path] = nil
                guard SimDisk.digest(content) == entry.digest else { continue }
                do {
                    let outcome = try device.folder.place(entry) {
                        try device.disk.put(entry.path, content: content, mode: entry.mode, modified: entry.modified)
                    }
                    switch outcome {
                    case .placed(let recorded): noteScanned(device, recorded)
                    case .changedHere: rescans.insert(entry.path)
                    case .notWanted: break
                    }
                } catch {
                    continue
                }
            }
            if !rescans.isEmpty { noteScanned(device, device.folder.scan(paths: rescans)) }
            announce(device)
        }
    }

    // MARK: A person

    func nextContent(_ device: Device) -> [UInt8] {
        counter += 1
        return Array("d\(device.index)w\(counter)".utf8)
    }

    static let names = ["a.txt", "b.txt", "c", "d.md"]
    static let folders = ["x", "y", "x/z"]

    func user(_ device: Device, op: Int, a: UInt64, b: UInt64) {
        let disk = device.disk
        let files = disk.nodes.filter { $0.value.kind == .file }.keys.sorted()
        let dirs = disk.nodes.filter { $0.value.kind == .directory }.keys.sorted()
        func pick(_ list: [String], _ n: UInt64) -> String? { list.isEmpty ? nil : list[Int(n % UInt64(list.count))] }
        func newPath(_ n: UInt64) -> String {
            let parent = pick([""] + dirs, n / 7)!
            let name = Self.names[Int(n % UInt64(Self.names.count))]
            return parent.isEmpty ? name : parent + "/" + name
        }
        switch op % 15 {
        case 0:  // create
            let path = newPath(a)
            let content = nextContent(device)
            if disk.nodes[path] == nil { _ = disk.write(path, content) }
        case 1:  // edit
            guard let path = pick(files, a) else { return }
            let content = nextContent(device)
            _ = disk.write(path, content)
        case 2:  // append
            guard let path = pick(files, a), let old = disk.nodes[path]?.content else { return }
            let content = old + Array("+".utf8) + nextContent(device)
            _ = disk.write(path, content)
        case 3:  // truncate
            guard let path = pick(files, a), let old = disk.nodes[path]?.content, old.count > 1 else { return }
            let content = Array(old.prefix(old.count / 2)) + Array("~".utf8) + nextContent(device)
            _ = disk.write(path, content)
        case 4:  // delete a file
            guard let path = pick(files, a) else { return }
            _ = disk.delete(path)
        case 5:  // rename a file
            guard let path = pick(files, a) else { return }
            _ = disk.rename(path, newPath(b))
        case 6:  // make a folder
            let path = Self.folders[Int(a % UInt64(Self.folders.count))]
            _ = disk.mkdir(path)
        case 7:  // rename a folder
            guard let path = pick(dirs, a) else { return }
            let target = Self.folders[Int(b % UInt64(Self.folders.count))] + "2"
            _ = disk.rename(path, target)
        case 8:  // delete a folder and all in it
            guard let path = pick(dirs, a) else { return }
            _ = disk.delete(path)
        case 9:  // a link (its target kept as text: one leaves the folder)
            let path = newPath(a)
            _ = disk.symlink(path, ["a.txt", "../outside", "/etc/passwd", "x/z"][Int(b % 4)])
        case 10:  // the executable bit, on or off
            guard let path = pick(files + dirs, a), let mode = disk.nodes[path]?.mode else { return }
            _ = disk.chmod(path, mode ^ 0o111)
        case 11:  // a file replaced by a folder of the same name
            guard let path = pick(files, a) else { return }
            _ = disk.delete(path)
            _ = disk.mkdir(path)
        case 12:  // a folder replaced by a file of the same name
            guard let path = pick(dirs, a) else { return }
            _ = disk.delete(path)
            _ = disk.write(path, nextContent(device))
        case 13:  // a rename that changes only the case
            guard let path = pick(files, a) else { return }
            _ = disk.rename(path, path.uppercased())
        default:  // only the time changes (touched)
            guard let path = pick(files, a), let node = disk.nodes[path] else { return }
            _ = disk.write(path, node.content)
        }
    }

    // MARK: The end

    /// Heals every partition and runs until nothing is left to do (bounded); whether it got there.
    func settle(rounds: Int = 400) -> Bool {
        connected = []
        for a in 0..<devices.count { for b in (a + 1)..<max(a + 1, devices.count) { connected.insert(Pair(a, b)) } }
        for device in devices {
            device.disk.mounted = true
            if device.ignored != nil { device.ignored = nil }
            setMode(device, .sendReceive)
        }
        for round in 0..<rounds {
            if let path = traced, round < 6 || round % 100 == 0 {
                print("-- round \(round)\n\(describe(path))")
                for device in devices {
                    print("   d\(device.index) plans \(device.folder.plan().filter { $0.path.hasPrefix(path) })")
                }
            }
            time += 1_000_000_000
            ensureLinks()
            for device in devices { scan(device) }
            while !queue.isEmpty { deliver(queue.removeFirst()) }
            var busy = false
            for device in devices {
                sync(device)
                busy = busy || !device.requested.isEmpty
            }
            busy = busy || !queue.isEmpty
            while !queue.isEmpty { deliver(queue.removeFirst()) }
            if !busy, quiet() { return true }
        }
        return false
    }

    /// Whether every device's plan is empty and every tree is the same.
    func quiet() -> Bool {
        for device in devices where !device.folder.plan().isEmpty { return false }
        let first = devices[0].disk.tree
        return devices.allSatisfy { $0.disk.tree == first }
    }
}
