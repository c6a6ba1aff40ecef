import FoundationEssentials
import Glibc
import Logging
import ShareDisk
import ShareEngine
import ShareNet
import ShareProtocol
import ShareReach
import ShareSync
import ShareSyncStore
import ShareThreads
import ShareTLS
import ShareTrust

/// How an agent takes folders other devices offer it (agent.json's `folders`).
package struct FolderAcceptance: Codable, Sendable, Equatable {
    /// Devices (names or IDs) whose folders are accepted without asking, into `path`.
    package var autoAccept: [String] = []
    /// Where accepted folders go by default (a folder per folder, by its name); nil: the agent's inbox for the
    /// device.
    package var path: String?

    package init(autoAccept: [String] = [], path: String? = nil) {
        self.autoAccept = autoAccept
        self.path = path
    }
}

/// The agent's shared folders (`share sync`): each folder's index and worker, the folder links to the devices
/// they are shared with (one per device, carrying every folder's index updates both ways), and the pulls that bring
/// files from the devices that hold them. Only the owner's devices (`AccessPolicy`'s `syncFolders`) share folders.
package final class FolderService: AgentPart, Sendable {
    package let partName = "shared folders"
    static let log = Log.logger("share.folders")
    /// Seconds between full rescans (`SHARE_FOLDER_RESCAN_SECONDS` for tests); changes are otherwise seen by inotify.
    static let rescanInterval: Double =
        ProcessInfo.processInfo.environment["SHARE_FOLDER_RESCAN_SECONDS"].flatMap(Double.init) ?? 300
    /// Seconds after the first change of a burst before it is scanned, at least; a burst goes on while changes come
    /// less than `settleGap` apart, for `settleLongest` at most (the files of one removal or save are found by one
    /// scan, so that a mass deletion is seen whole).
    static let settle = 0.25
    static let settleGap = 0.15
    static let settleLongest = 2.0
    /// Most files one pull asks for, and pulls of one folder from one device at a time.
    static let pullBatch = 1000
    static let pullsPerDevice = 1
    /// Most entries in one index update: a peer plans and starts pulling the first thousand of a large index while
    /// the rest still comes.
    static let entriesPerUpdate = 1000
    /// How many paths a part of a folder's first scan records (`recordInParts`).
    static let scanPart = 1000
    /// Paths in a row held only by devices with a pull under way after which a look for pulls ends.
    static let busyLook = 64
    /// Seconds a link must last for its end to be taken as an ordinary one (opened again at once, every time).
    static let steadyLink = 10.0

    let device: LocalDevice
    let me: ShortID
    let trust: TrustCache
    let reach: ReachSettings
    let acceptance: FolderAcceptance
    /// Where a folder offered by a device lands by default: the agent's inbox folder for that device.
    let inbox: @Sendable (String) -> URL
    /// Tells the person something on the desktop (a summary and a body): the agent's notifications.
    let notify: @Sendable (_ summary: String, _ body: String) -> Void
    let book: FolderBook
    let directory: URL
    let versions: Versions?

    struct Run {
        var folders: [String: SharedFolder] = [:]
        var links: [DeviceID: FolderLink] = [:]
        /// Devices this agent had a link with since it started.
        var everLinked: Set<DeviceID> = []
        /// Link attempts under way, and when each device may be tried again.
        var connecting: Set<DeviceID> = []
        var retryAt: [DeviceID: Date] = [:]
        var failures: [DeviceID: Int] = [:]
        /// Links in a row that ended within `steadyLink` seconds of opening, by device.
        var quickEnds: [DeviceID: Int] = [:]
        /// Why the last link attempt to each device failed.
        var linkErrors: [DeviceID: String] = [:]
        /// Why each folder that could not be opened could not (its status says it).
        var openErrors: [String: String] = [:]
        /// Pulls under way, by "folder|device".
        var pulling: [String: Int] = [:]
        /// Pulls in a row that brought none of their files, by the same key.
        var pullFailures: [String: Int] = [:]
        /// Folders being accepted now.
        var accepting: Set<String> = []
        /// Files asked of a device over its link ("folder|ref"), those whose push session ended or that the device
        /// said will not come, and those a push session is bringing now.
        var asked: [String: FileEntry] = [:]
        var answered: Set<String> = []
        var arriving: Set<String> = []
        /// The sessions carrying files to or from each device now (pulls, pushes and their serving sides).
        var transfers: [DeviceID: [ObjectIdentifier: PeerConnection]] = [:]
        var threads = 0
        var stopping = false
        var watchChanges: [String: [String: Bool]] = [:]
        var linkerWake = false
    }
    let run = Guarded(Run())
    /// Counts what may change a folder's status (its logic used, a link opened or closed, the agent stopping):
    /// a wait for every folder to settle is woken by it.
    let changes = Guarded<UInt64>(0)
    /// Small files just served, read and checked once for every device that pulls them.
    let served = ServedContents()

    /// Wakes whatever waits for the folders' statuses (`statuses(settlingWithin:)`).
    func changed() { changes.withLock { $0 &+= 1 } }

    package init(
        device: LocalDevice, trust: TrustCache, reach: ReachSettings, acceptance: FolderAcceptance,
        inbox: @escaping @Sendable (String) -> URL,
        notify: @escaping @Sendable (_ summary: String, _ body: String) -> Void = { _, _ in }
    ) throws {
        self.notify = notify
        self.device = device
        me = ShortIDs.of(device.id)
        self.trust = trust
        self.reach = reach
        self.acceptance = acceptance
        self.inbox = inbox
        directory = device.paths.state.appendingPathComponent("folders", isDirectory: true)
        book = try FolderBook(directory: directory)
        versions = try? Versions(directory: device.paths.versions)
    }

    // MARK: Lifecycle

    package func start(failed: @escaping @Sendable (Error) -> Void) throws {
        run.withLock { $0.stopping = false }
        for settings in book.folders { open(settings) }
        spawn("share-folders-link") { [self] in linker() }
        spawn("share-folders-watch") { [self] in watcher() }
    }

    package func stop() {
        let (links, folders) = run.withLock { run -> ([FolderLink], [SharedFolder]) in
            run.stopping = true
            return (Array(run.links.values), Array(run.folders.values))
        }
        for link in links { link.stop() }
        for folder in folders { folder.withFolder { $0.quitting = true } }
        changed()
        run.wait(seconds: 15) { $0.threads == 0 }
    }

    var stopping: Bool { run.withLock { $0.stopping } }

    /// Runs `body` on a thread of its own, counted until it returns (stop waits for every one).
    func spawn(_ name: String, _ body: @escaping @Sendable () -> Void) {
        guard
            run.withLock({ run -> Bool in
                guard !run.stopping else { return false }
                run.threads += 1
                return true
            })
        else { return }
        Threads.start(name: name) { [self] in
            body()
            run.withLock { $0.threads -= 1 }
        }
    }

    /// Opens a folder's index and files and starts its worker; a folder whose place is gone stays listed, stopped.
    @discardableResult
    func open(_ settings: SharedFolderSettings) -> SharedFolder? {
        if let open = run.withLock({ $0.folders[settings.id] }) { return open }
        do {
            let root = try Directory.open(settings.path)
            let index = directory.appendingPathComponent("\(settings.id).db").path
            let opening = { [self] in
                let database = try Database(path: index)
                try database.check()
                try SQLiteFolderStore.prepare(database)
                return try SharedFolder(
                    settings: settings, root: root, database: database, me: me,
                    changed: { [weak self] in self?.changed() })
            }
            let folder: SharedFolder
            do {
                folder = try opening()
            } catch let error as DatabaseError where error.damaged {
                // What a damaged index held is made again: the scan records what the files are, and the other
                // devices send their indexes whole to a new one (a file both hold alike is no conflict).
                let aside = Self.setAside("\(settings.id).db", in: directory.path)
                Self.log.warning(
                    "a shared folder's index was damaged: set aside, made again from its files and the other devices",
                    metadata: ["folder": "\(settings.label)", "reason": "\(error)", "aside": "\(aside ?? "removed")"])
                folder = try opening()
            }
            // A folder gets its marker once, when first opened (or first opened by a version that made markers);
            // from then on one that lost it is stopped (its worker says why) rather than taken for emptied.
            if settings.marked != true {
                try? Self.makeMarker(in: root)
                book.note { book in
                    if let index = book.folders.firstIndex(where: { $0.id == settings.id }) {
                        book.folders[index].marked = true
                    }
                }
            }
            folder.withFolder { state in
                state.notifiedConflicts = Set(state.store.conflictCopies().map(SharedFolder.conflictKey))
                state.notifiedGeneration = state.store.conflictGeneration
            }
            run.withLock { run in
                run.folders[settings.id] = folder
                run.openErrors[settings.id] = nil
            }
            spawn("share-folder") { [self] in work(folder) }
            wakeLinker()
            return folder
        } catch {
            Self.log.warning(
                "cannot open a shared folder", metadata: ["folder": "\(settings.label)", "reason": "\(error)"])
            run.withLock { $0.openErrors[settings.id] = "\(error)" }
            return nil
        }
    }

    /// Moves a damaged index (and its log) beside it as `NAME.damaged`, replacing one set aside before; where it
    /// went, or nil when it could only be removed.
    static func setAside(_ name: String, in folder: String) -> String? {
        let aside = name + ".damaged"
        for stale in [name + "-shm", aside + "-wal"] { PathOperations.removeIfPresent(folder + "/" + stale) }
        do {
            let directory = try Directory.open(folder)
            try directory.rename(name, to: aside, in: directory, replace: true)
            if directory.info(name + "-wal") != nil {
                try directory.rename(name + "-wal", to: aside + "-wal", in: directory, replace: true)
            }
            return folder + "/" + aside
        } catch {
            for left in [name, name + "-wal"] { PathOperations.removeIfPresent(folder + "/" + left) }
            return nil
        }
    }

    var folders: [SharedFolder] { run.withLock { Array($0.folders.values) } }

    func folder(_ id: String) -> SharedFolder? { run.withLock { $0.folders[id] } }

    /// The policy's word on sharing folders with `peer` (the owner's devices only): every "may it…" of folders asks
    /// it here.
    func folderPolicy(_ peer: TrustedDevice) -> AccessPolicy.Decision {
        AccessPolicy.decide(.syncFolders, peer: peer, localName: device.name)
    }

    /// Why a folder is not shared with `device` (the policy refused it), said to this device's owner: which device
    /// and what would change it.
    func notShared(_ device: TrustedDevice) -> String {
        let policy = AccessPolicy.foldersOnlyWithOwner(self.device.name)
        if device.watch {
            return "\(device.name) is a watch, and \(policy); a watch takes sends, not folders"
        }
        return "\(device.name) is trusted here without --team, so not as one of your own devices, and \(policy)"
            + "; if it is yours: share trust add \(device.id) --name \(device.name) --team"
    }

    /// Whether the device `id` names (an ID or a name) is trusted and may share folders.
    func sharesFolders(_ id: String) -> Bool { trust.store.find(id).map { folderPolicy($0).isAllowed } ?? false }

    /// Whether `peer` may keep a folder link with this device: trusted, as its owner's.
    func mayLink(_ peer: DeviceID) -> Bool { trust.store.device(peer).map { folderPolicy($0).isAllowed } ?? false }

    /// The trusted devices a folder is shared with that the policy lets share folders (the owner's devices).
    func devices(of settings: SharedFolderSettings) -> [TrustedDevice] {
        settings.devices.compactMap { id in
            guard let device = trust.store.find(id), device.id != self.device.id, folderPolicy(device).isAllowed
            else { return nil }
            return device
        }
    }

    // MARK: Control

    /// Shares `settings` (a new folder of this device's): its path must be a folder.
    package func add(_ settings: SharedFolderSettings) throws -> SharedFolderSettings {
        var settings = settings
        var info = stat()
        guard stat(settings.path, &info) == 0 else {
            throw ShareFailure(.noInput, "\(settings.path) does not exist; name a folder to share")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw ShareFailure(.noInput, "\(settings.path) is not a folder") }
        guard !settings.label.isEmpty, SharedFolderSettings.label(settings.label) == settings.label else {
            throw ShareFailure(
                .usage, "a folder's label is 1 to 255 bytes without control characters: choose another with --label")
        }
        for name in settings.devices {
            guard let device = trust.store.find(name) else {
                throw ShareFailure(.usage, "no trusted device is called '\(name)' (see: share trust list)")
            }
            if case .refused = folderPolicy(device) { throw ShareFailure(.refused, notShared(device)) }
        }
        settings.devices = settings.devices.compactMap { trust.store.find($0)?.id.description }
        guard Set(settings.devices).count < Limits.maxFolderDevices else {
            throw ShareFailure(.usage, "a folder is shared with at most \(Limits.maxFolderDevices - 1) other devices")
        }
        let place = PathOperations.resolved(settings.path)
        if let shared = book.folders.first(where: { PathOperations.resolved($0.path) == place }) {
            return try share(shared, with: settings)
        }
        try checkPlace(settings.path)
        try Self.mark(settings.path, doing: "share")
        try book.change { $0.folders.append(settings) }
        open(settings)
        refreshLinks()
        return settings
    }

    /// Gives a folder about to be shared or accepted (`doing`) its marker (`.sharefolder`), which says from then on
    /// that the folder is there (a disk not mounted is never taken for emptied). A folder that cannot hold it (a
    /// read-only disk) is refused here with why, not shared and then stopped for want of it.
    static func mark(_ path: String, doing: String) throws {
        do {
            try makeMarker(in: try Directory.open(path))
        } catch {
            throw ShareFailure(
                .cannotCreate,
                "cannot \(doing) \(path): its marker \(SyncNames.marker) cannot be made in it (\(error)); a shared "
                    + "folder keeps one so that a disk not mounted is never taken for emptied: make the folder "
                    + "writable, or send it instead (share send)")
        }
    }

    static func makeMarker(in root: Directory) throws {
        if root.info(SyncNames.marker) == nil { try root.makeFolder(SyncNames.marker, mode: 0o755) }
    }

    /// A folder shared already is shared with the devices `asked` names too: each is offered it now, and the devices
    /// it was shared with learn of them from this device's next hello (and share it with those they trust as their
    /// owner's too). Its type and settings stay as they are.
    private func share(_ shared: SharedFolderSettings, with asked: SharedFolderSettings) throws -> SharedFolderSettings
    {
        let names = shared.devices.map { trust.store.find($0)?.name ?? $0 }.joined(separator: ", ")
        let described = "\(asked.path) is already shared as \(shared.label) (\(shared.id))"
        guard asked.kind == shared.kind || asked.kind == .sendReceive,
            asked.keepVersions.map({ $0 == shared.keepVersions }) ?? true,
            asked.maxConflicts.map({ $0 == shared.maxConflicts }) ?? true
        else {
            throw ShareFailure(
                .usage,
                "\(described): its type and settings stay as they are (--with alone shares it with more devices; "
                    + "share sync remove, then add, makes it anew)")
        }
        let joining = asked.devices.filter { !shared.devices.contains($0) && $0 != device.id.description }
        guard !joining.isEmpty else { throw ShareFailure(.usage, "\(described) with \(names)") }
        guard shared.devices.count + joining.count < Limits.maxFolderDevices else {
            throw ShareFailure(.usage, "a folder is shared with at most \(Limits.maxFolderDevices - 1) other devices")
        }
        var grown = shared
        grown.devices += joining
        // Shared with them again: what the others say they share it with counts for them again.
        let unshared = shared.unshared.map { $0.filter { !joining.contains($0) } }.flatMap { $0.isEmpty ? nil : $0 }
        grown.unshared = unshared
        try book.change { book in
            guard let index = book.folders.firstIndex(where: { $0.id == shared.id }) else { return }
            book.folders[index].devices += joining
            book.folders[index].unshared = unshared
        }
        folder(shared.id)?.withFolder { state in
            state.settings.devices += joining
            state.settings.unshared = unshared
        }
        refreshLinks()
        return grown
    }

    /// Changes folder `id`'s own settings here (each given one): its type (a receive-only folder's changes kept
    /// here go to the others once it is one no more; a send-only one takes the others' changes once it is one no
    /// more), its label (what this device calls it, and what it offers it as), how many days replaced or removed
    /// files are kept, how many conflict copies of a file.
    package func set(
        _ id: String, kind: SharedFolderSettings.Kind? = nil, label: String?, keepVersions: Int?, maxConflicts: Int?
    ) throws -> SharedFolderSettings {
        guard var settings = book.folder(id) else {
            throw ShareFailure(.usage, "no shared folder \(id) (share sync lists them)")
        }
        guard kind != nil || label != nil || keepVersions != nil || maxConflicts != nil else {
            throw ShareFailure(
                .usage, "name a setting to change: --type, --label, --keep-versions or --max-conflicts")
        }
        let kindBefore = settings.kind
        if let kind {
            guard settings.mirror != true else {
                throw ShareFailure(
                    .usage,
                    "\(settings.label) (\(id)) is a mirror: its type stays (share sync remove, then share sync add, "
                        + "makes a shared folder of it)")
            }
            settings.kind = kind
        }
        if let label {
            guard !label.isEmpty, SharedFolderSettings.label(label) == label else {
                throw ShareFailure(.usage, "a folder's label is 1 to 255 bytes without control characters")
            }
            settings.label = label
        }
        if let keepVersions {
            guard keepVersions >= 0 else {
                throw ShareFailure(.usage, "--keep-versions takes a number of days, 0 or more")
            }
            settings.keepVersions = keepVersions
        }
        if let maxConflicts {
            guard maxConflicts >= -1 else {
                throw ShareFailure(.usage, "--max-conflicts takes a number, 0 or more (or -1: no limit)")
            }
            settings.maxConflicts = maxConflicts
        }
        let changed = settings
        try book.change { book in
            guard let index = book.folders.firstIndex(where: { $0.id == id }) else { return }
            book.folders[index].kind = changed.kind
            book.folders[index].label = changed.label
            book.folders[index].keepVersions = changed.keepVersions
            book.folders[index].maxConflicts = changed.maxConflicts
        }
        let released = folder(id)?.withFolder { state -> Bool in
            state.settings.kind = changed.kind
            state.settings.label = changed.label
            state.settings.keepVersions = changed.keepVersions
            state.settings.maxConflicts = changed.maxConflicts
            state.disk.versionDays = max(0, changed.keepVersions ?? FolderVersions.defaultDays)
            state.sync.maxConflicts = changed.maxConflicts.map { $0 < 0 ? nil : $0 } ?? 10
            guard changed.kind != kindBefore else { return false }
            state.sync.mode = SharedFolder.mode(changed)
            // What the new type applies or sends differently is planned again, whole.
            state.fullWanted = true
            state.summary = nil
            return kindBefore == .receiveOnly && !state.sync.sendLocalChanges().isEmpty
        }
        if let folder = folder(id), released == true { announceOnly(folder, force: true) }
        // A new type or label goes out in the next hello (what a device that has not accepted it yet is offered).
        if kind != nil || label != nil { refreshLinks() }
        return changed
    }

    /// Stops sharing folder `id` with `names` (devices it is shared with, by name or ID) here: its links with them
    /// no longer carry it (each sees it as not shared by this device), what was held of their indexes goes, and
    /// what the others say they share it with does not bring them back; the folder stays synced with the rest.
    package func unshare(_ id: String, from names: [String]) throws -> SharedFolderSettings {
        guard var settings = book.folder(id) else {
            throw ShareFailure(.usage, "no shared folder \(id) (share sync lists them)")
        }
        guard !names.isEmpty else { throw ShareFailure(.usage, "name a device to stop sharing it with: --with DEVICE") }
        var leaving: [String] = []
        for name in names {
            let found = trust.store.find(name)?.id.description ?? (settings.devices.contains(name) ? name : nil)
            guard let found, settings.devices.contains(found) else {
                let with = settings.devices.map { trust.store.find($0)?.name ?? $0 }
                throw ShareFailure(
                    .usage,
                    "\(settings.label) (\(id)) is not shared with '\(name)' here"
                        + (with.isEmpty ? "" : " (it is shared with \(with.joined(separator: ", ")))"))
            }
            if !leaving.contains(found) { leaving.append(found) }
        }
        settings.devices.removeAll { leaving.contains($0) }
        settings.unshared = (settings.unshared ?? []) + leaving.filter { !(settings.unshared ?? []).contains($0) }
        let changed = settings
        try book.change { book in
            guard let index = book.folders.firstIndex(where: { $0.id == id }) else { return }
            book.folders[index].devices = changed.devices
            book.folders[index].unshared = changed.unshared
        }
        folder(id)?.withFolder { state in
            state.settings.devices = changed.devices
            state.settings.unshared = changed.unshared
            for gone in leaving {
                guard let peer = try? DeviceID(parsing: gone) else { continue }
                let short = ShortIDs.of(peer)
                state.store.forget(short)
                state.lastInStep[short] = nil
                state.inStepWritten[short] = nil
            }
            state.fullWanted = true
        }
        // Their links lost a folder: made again, with the new list.
        restartLinks()
        return settings
    }

    /// Accepts a folder another device offered, into `path` (the default place when nil).
    package func accept(
        _ id: String, into path: String?, kind: SharedFolderSettings.Kind? = nil, keepVersions: Int? = nil,
        maxConflicts: Int? = nil
    ) throws -> SharedFolderSettings {
        try acceptOnce(id, into: path, kind: kind, keepVersions: keepVersions, maxConflicts: maxConflicts).settings
    }

    /// Accepts a folder offered; whether this call accepted it (false: it was accepted already).
    func acceptOnce(
        _ id: String, into path: String?, kind: SharedFolderSettings.Kind? = nil, keepVersions: Int? = nil,
        maxConflicts: Int? = nil
    ) throws -> (
        settings: SharedFolderSettings, new: Bool
    ) {
        // One acceptance of a folder at a time (two devices may offer it at once): a later one finds it accepted.
        run.wait(seconds: 30) { !$0.accepting.contains(id) }
        let claimed = run.withLock { $0.accepting.insert(id).inserted }
        guard claimed else { throw ShareFailure(.unavailable, "the folder \(id) is being accepted; try again") }
        defer { run.withLock { _ = $0.accepting.remove(id) } }
        if let accepted = book.folder(id) {
            try book.change { $0.offers.removeAll { $0.id == id } }
            return (accepted, false)
        }
        // A folder declined here may be taken after all (its device still shares it, or shares it again).
        let offer: FolderOffer
        if let offered = book.offers.first(where: { $0.id == id }) {
            offer = offered
        } else if let declined = book.snapshot.declinedOffers.last(where: { $0.id == id }) {
            offer = declined
        } else {
            throw ShareFailure(.usage, "no folder \(id) is offered (share sync lists the offers)")
        }
        let place =
            path.map { URL(fileURLWithPath: $0) }
            ?? defaultPlace(label: offer.label, from: offer.fromName, reuse: offer.kind == "send-only")
        try checkPlace(place.path)
        try Self.makeFolder(place.path)
        try Self.mark(place.path, doing: "sync into")
        // The device that offered it, and the others it shares it with that this device trusts as its owner's (a
        // change then reaches each through any of them).
        let others = (offer.devices ?? []).filter { $0 != device.id.description && sharesFolders($0) }
        var settings = SharedFolderSettings(
            id: offer.id, label: offer.label, path: place.path,
            devices: [offer.from] + others.filter { $0 != offer.from })
        // A send-only folder (a mirror) is kept as its copy: receive-only, what is changed here put back at once.
        settings.kind = offer.kind == "send-only" ? .receiveOnly : kind ?? .sendReceive
        if offer.kind == "send-only" { settings.mirror = true }
        settings.keepVersions = keepVersions
        settings.maxConflicts = maxConflicts
        try book.change { book in
            book.offers.removeAll { $0.id == id }
            book.declinedOffers.removeAll { $0.id == id }
            book.declined.removeAll { FolderBook.split($0).id == id }
            if !book.folders.contains(where: { $0.id == id }) { book.folders.append(settings) }
        }
        open(settings)
        refreshLinks()
        return (settings, true)
    }

    /// Refuses a place a folder cannot take: one shared already, one inside a shared folder or holding one (a
    /// file in both would be two folders' at once: each folder's deletion or conflict copy would be the other's
    /// change), and one that holds this device's settings and keys or its state, or lies in its state (the folder's
    /// own index would be synced, and a device sharing it could write the trust store). Paths are compared as the
    /// system resolves them (links followed).
    func checkPlace(_ path: String) throws {
        let place = PathOperations.resolved(path)
        func holds(_ outer: String, _ inner: String) -> Bool {
            outer == inner || outer == "/" || inner.hasPrefix(outer + "/")
        }
        for folder in book.folders {
            let other = PathOperations.resolved(folder.path)
            if other == place {
                throw ShareFailure(.usage, "\(path) is already shared as \(folder.label) (\(folder.id))")
            }
            if holds(other, place) {
                throw ShareFailure(
                    .usage,
                    "\(path) is inside the shared folder \(folder.label) (\(folder.id), \(folder.path)); a shared folder "
                        + "holds no other: choose a place outside it")
            }
            if holds(place, other) {
                throw ShareFailure(
                    .usage,
                    "\(path) holds the shared folder \(folder.label) (\(folder.id), \(folder.path)); a shared folder "
                        + "holds no other: choose one that does not, or remove that one first (share sync remove)")
            }
        }
        let state = PathOperations.resolved(device.paths.state.path)
        for own in [PathOperations.resolved(device.paths.config.path), state] where holds(place, own) {
            throw ShareFailure(
                .usage, "\(path) holds share's own settings and keys or state (\(own)); choose a folder that does not")
        }
        if holds(state, place) {
            throw ShareFailure(.usage, "\(path) is inside share's own state (\(state)); choose a folder outside it")
        }
    }

    /// Makes the folder at `path` and those it lies in, as missing; one that is there already is taken as it is.
    static func makeFolder(_ path: String) throws {
        var info = stat()
        if stat(path, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFDIR else {
                throw ShareFailure(.cannotCreate, "\(path) is a file, not a folder; give a folder (made when missing)")
            }
            return
        }
        do {
            _ = try Directory.open(path, create: true, mode: 0o755)
        } catch let error as DiskError {
            throw ShareFailure(.cannotCreate, "\(error.message); give a folder that can be made")
        }
    }

    package func decline(_ id: String) throws {
        guard book.offers.contains(where: { $0.id == id }) else {
            throw ShareFailure(.usage, "no folder \(id) is offered (share sync lists the offers)")
        }
        try book.change { book in
            for offer in book.offers where offer.id == id {
                book.declined.append("\(offer.id)|\(offer.from)")
                book.declinedOffers.removeAll { $0.id == offer.id && $0.from == offer.from }
                book.declinedOffers.append(offer)
            }
            book.declinedOffers = Array(book.declinedOffers.suffix(FolderBook.keptRemovals))
            book.offers.removeAll { $0.id == id }
        }
        // The devices that offered it hear that it was declined.
        refreshLinks()
    }

    /// Stops sharing a folder here: its files stay where they are; its index goes.
    package func remove(_ id: String) throws -> SharedFolderSettings {
        guard let settings = book.folder(id) else {
            throw ShareFailure(.usage, "no shared folder \(id) (share sync lists them)")
        }
        try book.change { book in
            book.folders.removeAll { $0.id == id }
            // Each device it was shared with hears that it was removed here (while it still shares it).
            let entries = settings.devices.compactMap { trust.store.find($0)?.id.description }.map { "\(id)|\($0)" }
            book.removed.removeAll { entries.contains($0) }
            book.removed = Array((book.removed + entries).suffix(FolderBook.keptRemovals))
        }
        if let folder = run.withLock({ $0.folders.removeValue(forKey: id) }) {
            folder.withFolder { $0.quitting = true }
            folder.touch(paths: [])
        }
        PathOperations.removeIfPresent(directory.appendingPathComponent("\(id).db").path)
        PathOperations.removeIfPresent(directory.appendingPathComponent("\(id).db-wal").path)
        PathOperations.removeIfPresent(directory.appendingPathComponent("\(id).db-shm").path)
        restartLinks()
        return settings
    }

    /// A mirror job of an earlier version (`share mirror`, an outbox job): the same folder becomes a send-only
    /// shared folder with that device (once); whether it was made.
    package func migrateMirror(folder path: String, to name: String) -> Bool {
        guard let peer = trust.store.find(name), !book.folders.contains(where: { $0.path == path }) else {
            return false
        }
        var settings = SharedFolderSettings(
            id: SharedFolderSettings.newID(), label: URL(fileURLWithPath: path).lastPathComponent, path: path,
            kind: .sendOnly, devices: [peer.id.description])
        settings.mirror = true
        do {
            try book.change { $0.folders.append(settings) }
            Self.log.info(
                "a mirror job is now a send-only shared folder", metadata: ["folder": "\(path)", "to": "\(peer.name)"])
            return true
        } catch {
            return false
        }
    }

    /// The deletions a scan held back (more than half the folder gone at once) go with the next scan, which
    /// starts now.
    /// The versions the folder keeps (of `path`, or beneath it), newest first.
    package func versions(_ id: String, path: String?) throws -> [FolderVersion] {
        guard let folder = folder(id) else {
            throw ShareFailure(.usage, "no shared folder \(id) (share sync lists them)")
        }
        if let path, !SyncNames.isValidPath(path) {
            throw ShareFailure(.usage, "\(path) is not a path inside the folder (a/b.txt, without a leading /)")
        }
        return folder.withFolder { state in
            state.disk.versions.list(path).map {
                FolderVersion(path: $0.path, time: $0.time, size: $0.size, stored: $0.stored)
            }
        }
    }

    /// Puts a kept version of `path` back; the next scan takes it as a change made here, which then spreads.
    package func restore(_ id: String, path: String, at: Date?) throws -> FolderVersion {
        guard let folder = folder(id) else {
            throw ShareFailure(.usage, "no shared folder \(id) (share sync lists them)")
        }
        guard SyncNames.isValidPath(path), !SyncNames.isInternal(path) else {
            throw ShareFailure(.usage, "\(path) is not a path inside the folder (a/b.txt, without a leading /)")
        }
        if let stopped = folder.withFolder({ $0.stopped }) {
            throw ShareFailure(.unavailable, "the folder is stopped: \(stopped)")
        }
        let version = try folder.withFolder { state in
            guard state.settings.kind != .receiveOnly else {
                throw ShareFailure(.usage, "\(state.settings.label) is receive-only: what is put back here stays here")
            }
            return try state.disk.versions.restore(path, at: at)
        }
        folder.rescan(path)
        Self.log.info(
            "version put back",
            metadata: ["folder": "\(folder.settings.label)", "path": "\(path)", "kept": "\(version.stored)"])
        return FolderVersion(path: version.path, time: version.time, size: version.size, stored: version.stored)
    }

    /// Pauses a folder here, or resumes it. Paused, nothing in it is scanned, taken from the others, served to them or
    /// announced (the others see it as not shared here), and its index stays; resumed, a full round catches up with
    /// what changed meanwhile on every side.
    package func pause(_ id: String, _ paused: Bool) throws -> SharedFolderSettings {
        guard var settings = book.folder(id) else {
            throw ShareFailure(.usage, "no shared folder \(id) (share sync lists them)")
        }
        guard (settings.paused == true) != paused else {
            throw ShareFailure(
                .usage,
                paused
                    ? "\(settings.label) (\(id)) is paused already"
                    : "\(settings.label) (\(id)) is not paused: there is nothing to resume")
        }
        settings.paused = paused ? true : nil
        try book.change { book in
            guard let index = book.folders.firstIndex(where: { $0.id == id }) else { return }
            book.folders[index].paused = settings.paused
        }
        folder(id)?.withFolder { state in
            state.settings.paused = settings.paused
            if !paused { state.fullWanted = true }
        }
        // The links say the new list: a paused folder is not among the folders shared on them.
        if paused { restartLinks() } else { refreshLinks() }
        return settings
    }

    package func allowDeletes(_ id: String) throws -> SharedFolderSettings {
        guard let folder = folder(id) else {
            throw ShareFailure(.usage, "no shared folder \(id) (share sync lists them)")
        }
        let letGo = folder.withFolder { $0.sync.allowHeldDeletions() }
        guard !letGo.isEmpty else {
            throw ShareFailure(.usage, "\(folder.settings.label) holds no deletions back")
        }
        folder.rescan(letGo)
        return folder.settings
    }

    /// Receive-only: the others' versions come back over what was changed here.
    package func revert(_ id: String) throws -> SharedFolderSettings {
        guard let folder = folder(id) else {
            throw ShareFailure(.usage, "no shared folder \(id) (share sync lists them)")
        }
        guard folder.settings.kind == .receiveOnly else {
            throw ShareFailure(
                .usage, "\(folder.settings.label) is not receive-only: nothing here is kept back to revert")
        }
        folder.withFolder { _ = $0.sync.revert() }
        folder.touch(paths: nil)
        return folder.settings
    }

    /// Send-only: this device's state is pushed again everywhere.
    package func override(_ id: String) throws -> SharedFolderSettings {
        guard let folder = folder(id) else {
            throw ShareFailure(.usage, "no shared folder \(id) (share sync lists them)")
        }
        guard folder.settings.kind == .sendOnly else {
            throw ShareFailure(.usage, "\(folder.settings.label) is not send-only: its changes already go both ways")
        }
        let recorded = folder.withFolder { $0.sync.override() }
        if !recorded.isEmpty { announce(id) }
        return folder.settings
    }

    /// The default place of a folder `label` from device `from`: agent.json's folder, else the inbox for the
    /// device; a free name there (two folders of the same name are two folders). `reuse`: a folder of that name
    /// no shared folder uses (a mirror's copy from before, or the folder as it was sent) is taken as it is.
    func defaultPlace(label: String, from: String, reuse: Bool = false) -> URL {
        let parent = acceptance.path.map { URL(fileURLWithPath: $0, isDirectory: true) } ?? inbox(from)
        try? FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
        var name = FileNamesOnDisk.sanitize(label, fallback: "folder")
        while name.hasPrefix(".") { name.removeFirst() }
        if name.isEmpty { name = "folder" }
        let used = Set(book.folders.map(\.path))
        if reuse, !used.contains(parent.appendingPathComponent(name).path) {
            var isFolder = false
            if FileManager.default.fileExists(atPath: parent.appendingPathComponent(name).path, isDirectory: &isFolder),
                isFolder
            {
                return parent.appendingPathComponent(name, isDirectory: true)
            }
        }
        let taken = Set((try? FileManager.default.contentsOfDirectory(atPath: parent.path)) ?? [])
        var candidate = name
        var n = 2
        while taken.contains(candidate) {
            candidate = "\(name) (\(n))"
            n += 1
        }
        return parent.appendingPathComponent(candidate, isDirectory: true)
    }
}
