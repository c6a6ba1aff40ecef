import CoreTransferable
import FoundationEssentials
import ShareText
import ShareDisk
import ShareEngine
import ShareNet
import ShareProtocol
import ShareReach
import ShareSync
import ShareTLS
import ShareTrust

extension FolderService {
    /// A pulled item's id: stable for the same path and content, so a pull cut short resumes (from any device).
    static func ref(_ entry: FileEntry) -> String {
        String(SHA256Hasher.hash(Array("\(entry.path)\u{0}\(entry.digest.hexString)".utf8)).hexString.prefix(32))
    }

    /// Starts pulls of the folder's queued files: each linked device gets batches of at most `pullBatch` files it
    /// holds at the version wanted, up to `pullsPerDevice` pulls of this folder under way from it (the next is asked
    /// for while one is still arriving). A file no connected device holds waits (listed as waiting) until the next
    /// plan or link. A path with a pull under way (of an earlier version) waits for it to end: two pulls of one
    /// path at once may ask for the same content (one ref), and the first to end would take the other's ask with
    /// it (its push refused, its asker waiting a minute). Looks at a bounded part of the queue each time, and stops
    /// after `busyLook` paths in a row that only busy devices hold (what follows is looked at when one is free).
    func schedulePulls(_ folder: SharedFolder) {
        let (peers, outgoing, running) = run.withLock { run -> ([DeviceID], [DeviceID: Bool], [DeviceID: Int]) in
            let linked = run.links.filter { $0.value.shares(folder.id) }
            let peers = linked.keys.sorted { $0.description < $1.description }
            return (
                peers, linked.mapValues(\.outgoing),
                Dictionary(uniqueKeysWithValues: peers.map { ($0, run.pulling["\(folder.id)|\($0)", default: 0]) })
            )
        }
        // How many more batches each device may be asked for now.
        var room = running.mapValues { Self.pullsPerDevice - $0 }.filter { $0.value > 0 }
        var open: [DeviceID: [FileEntry]] = [:]
        var batches: [(DeviceID, [FileEntry])] = []
        folder.withFolder { state in
            guard !state.queue.isEmpty, !room.isEmpty else { return }
            var examined = 0
            // Paths in a row whose holders are all busy: in a first sync every path after them is held by the
            // same busy device, so the look ends instead of asking the index about thousands of them each time.
            var busyInARow = 0
            let (unheld, inFlight, store) = (state.unheld, state.inFlight, state.store)
            var noHolder: [String] = []
            state.queue.look { path, entry in
                if unheld.contains(path) || inFlight[path] != nil { return true }
                if room.isEmpty || examined > 4 * Self.pullBatch * Self.pullsPerDevice
                    || busyInARow >= Self.busyLook
                {
                    return false
                }
                examined += 1
                let remotes = store.remotes(path)
                let holders = peers.filter { peer in
                    remotes[ShortIDs.of(peer)].map { $0.version == entry.version && !$0.deleted } ?? false
                }
                guard !holders.isEmpty else {
                    noHolder.append(path)
                    return true
                }
                guard let peer = holders.first(where: { room[$0] != nil }) else {
                    busyInARow += 1
                    return true
                }
                busyInARow = 0
                open[peer, default: []].append(entry)
                if open[peer]!.count >= Self.pullBatch {
                    batches.append((peer, open.removeValue(forKey: peer)!))
                    room[peer]! -= 1
                    if room[peer]! <= 0 { room[peer] = nil }
                }
                return true
            }
            for path in noHolder {
                state.unheld.insert(path)
                state.problems[path] = "no device that holds this version is connected"
            }
            batches += open.map { ($0.key, $0.value) }
            for (_, entries) in batches {
                for entry in entries {
                    state.queue[entry.path] = nil
                    state.inFlight[entry.path] = entry.version
                    state.inFlightBytes = state.inFlightBytes.heldAdding(entry.size)
                    state.problems[entry.path] = nil
                }
            }
            state.countNeeded()
        }
        for (peer, batch) in batches {
            let key = "\(folder.id)|\(peer)"
            run.withLock { $0.pulling[key, default: 0] += 1 }
            spawn("share-folders-pull") { [self] in
                // Why the pull failed, when it did (each file's own reason, when it has one, is kept before).
                var failure: String?
                defer {
                    // What came is recorded at its version; the rest is planned again (and queued again).
                    let missed = folder.withFolder { state -> Set<String> in
                        var missed: Set<String> = []
                        for entry in batch where state.inFlight[entry.path] == entry.version {
                            state.inFlight[entry.path] = nil
                            state.inFlightBytes -= min(state.inFlightBytes, entry.size)
                            if state.store.local(entry.path)?.entry.version != entry.version {
                                missed.insert(entry.path)
                                if let failure, state.failedPulls[entry.path] == nil {
                                    state.failedPulls[entry.path] = failure
                                }
                            } else {
                                state.failedPulls[entry.path] = nil
                            }
                        }
                        state.countNeeded()
                        return missed
                    }
                    // The last batch of a sync: what the pulls took is given back to the system.
                    if folder.withFolder({ $0.queue.isEmpty && $0.inFlight.isEmpty }) { Syscalls.releaseFreeMemory() }
                    // A pull that brought none of its files is asked again after a while, longer each time
                    // (1 s, doubled up to a minute): a full disk or a folder that cannot be written to is not asked
                    // about in a loop. One that brought any is followed at once by the next.
                    let wait = run.withLock { run -> Double in
                        run.pulling[key, default: 1] -= 1
                        if run.pulling[key] == 0 { run.pulling[key] = nil }
                        guard !missed.isEmpty, missed.count == batch.count else {
                            run.pullFailures[key] = nil
                            return 0
                        }
                        let failures = run.pullFailures[key, default: 0] + 1
                        run.pullFailures[key] = failures
                        return min(60, pow(2, Double(min(failures, 7) - 1)))
                    }
                    if wait > 0 {
                        _ = run.wait(seconds: wait) { $0.stopping }
                    }
                    folder.touch(paths: missed)
                }
                do {
                    // The side that opened the link opens the pull's session too (the other may not reach it).
                    if outgoing[peer] == true {
                        try pullSession(batch, into: folder, from: peer)
                    } else {
                        try ask(batch, into: folder, from: peer)
                    }
                } catch {
                    failure = "from \(trust.store.device(peer)?.name ?? peer.description): \(error)"
                    Self.log.info(
                        "a pull ended", metadata: ["folder": "\(folder.settings.label)", "reason": "\(error)"])
                }
            }
        }
    }

    /// What a pull asks for: each file by path, content and size, and for a small file this device holds an
    /// earlier version of, that version's block signature (what changed crosses, not the whole file).
    func request(_ entries: [FileEntry], refs: [String], in folder: SharedFolder) -> FolderPull {
        // What the index holds of every path, in one look (a first sync holds none: nothing more is read).
        let (whole, locals) = folder.withFolder { state in
            (state.wholeNext, entries.map { state.store.local($0.path) })
        }
        return FolderPull(
            folder: folder.id,
            items: zip(zip(entries, refs), locals).map { named, local in
                let (entry, ref) = named
                var basis: String?
                if entry.size <= UInt64(FolderFiles.largest), !whole.contains(entry.path), let local,
                    let bytes = localVersion(entry.path, recorded: local, in: folder), !bytes.isEmpty
                {
                    basis = bytes.withUnsafeBytes { Data(SmallDelta.Signature(of: $0).encoded()).base64EncodedString() }
                }
                return FolderPull.Item(
                    ref: ref, path: entry.path, digest: entry.digest.hexString, size: entry.size,
                    basis: basis)
            })
    }

    /// The bytes of this device's version of a small file, when the disk still holds what the index recorded.
    func localVersion(_ path: String, in folder: SharedFolder) -> [UInt8]? {
        guard let local = folder.withFolder({ $0.store.local(path) }) else { return nil }
        return localVersion(path, recorded: local, in: folder)
    }

    /// As above, with what the index recorded of the path already looked up.
    func localVersion(_ path: String, recorded local: LocalEntry, in folder: SharedFolder) -> [UInt8]? {
        guard !local.entry.deleted, local.entry.kind == .file,
            local.entry.size <= UInt64(FolderFiles.largest), let recorded = local.stamp
        else { return nil }
        let parts = path.split(separator: "/").map(String.init)
        guard let leaf = parts.last, let directory = try? folder.root.directory(components: Array(parts.dropLast())),
            let info = directory.info(leaf), let stamp = DiskFolder.stamp(info), stamp.same(as: recorded)
        else { return nil }
        return SyncFileSource.read(leaf, in: directory, stamp: stamp)
    }

    /// Asks `peer` over its link to bring `entries` (it opens the session), and waits (bounded) for them.
    private func ask(_ entries: [FileEntry], into folder: SharedFolder, from peer: DeviceID) throws {
        guard let link = run.withLock({ $0.links[peer] }) else { return }
        let named = entries.map(Self.ref)
        let refs = Dictionary(zip(named, entries), uniquingKeysWith: { first, _ in first })
        run.withLock { run in
            for (ref, entry) in refs { run.asked["\(folder.id)|\(ref)"] = entry }
        }
        defer { run.withLock { run in for ref in refs.keys { run.asked["\(folder.id)|\(ref)"] = nil } } }
        link.ask(request(entries, refs: named, in: folder))
        // Done when every file came or was said not to come, or the link ended; given up after a minute in which
        // no push brought any of them.
        let keys = refs.keys.map { "\(folder.id)|\($0)" }
        // The keys before `answeredUpTo` are answered (an answer is never taken back while this ask waits): each
        // wake of the service's state looks on from there, not at all of them again.
        var answeredUpTo = 0
        while true {
            let over = run.wait(seconds: 60) { run in
                while answeredUpTo < keys.count, run.answered.contains(keys[answeredUpTo]) { answeredUpTo += 1 }
                return run.stopping || run.links[peer] !== link || answeredUpTo == keys.count
            }
            if over || !run.withLock({ run in keys.contains { run.arriving.contains($0) } }) { break }
        }
        run.withLock { run in for ref in refs.keys { run.answered.remove("\(folder.id)|\(ref)") } }
    }

    /// One pull session: asks `peer` for `entries` and receives them into the folder.
    private func pullSession(_ entries: [FileEntry], into folder: SharedFolder, from peer: DeviceID) throws {
        guard let entry = trust.store.device(peer) else { return }
        let target = try PeerTarget.resolve(
            peer.description, device: device, trust: trust.store, beyondLAN: !reach.isEmpty)
        let hello = Hello(
            name: device.name, role: .agent, accept: ReceiveOptions.everything, compression: ["zstd"],
            features: [Delta.feature, FolderPull.binaryFeature])
        let session = try Reach.connect(
            from: device, to: target, trust: trust.store, hello: hello,
            timeouts: SessionTimeouts(connect: 5, handshake: 10, idle: 60), settings: reach)
        defer { session.connection.close() }
        let refs = entries.map(Self.ref)
        var wanted: [String: FileEntry] = [:]
        for (ref, entry) in zip(refs, entries) { wanted[ref] = entry }
        try session.connection.send(
            request(entries, refs: refs, in: folder).frame(.folderPull, binary: session.peerHello.readsBinaryPulls))
        try receive(session, into: folder, wanted: wanted, from: entry.name)
    }

    /// Receives the files of a pull (or a push) into the folder over `session`: first the small ones, whole, several
    /// to a frame; then, when the holder says so, the larger ones as a transfer's receiver.
    private func receive(_ session: Session, into folder: SharedFolder, wanted: [String: FileEntry], from name: String)
        throws
    {
        try carrying(session) { try receiveFiles(session, into: folder, wanted: wanted, from: name) }
    }

    /// Runs `body` with `session` among the transfers with its device: a device that no longer shares folders with
    /// this one (its link ends for that) has every one of them cut at once, and none begins after.
    func carrying(_ session: Session, _ body: () throws -> Void) throws {
        let key = ObjectIdentifier(session.connection)
        run.withLock { $0.transfers[session.peerID, default: [:]][key] = session.connection }
        defer {
            run.withLock { run in
                run.transfers[session.peerID]?[key] = nil
                if run.transfers[session.peerID]?.isEmpty == true { run.transfers[session.peerID] = nil }
            }
        }
        // Looked at once the session is listed: a cut made in between is not missed.
        guard mayLink(session.peerID) else {
            throw ProtocolError(.refused, "\(device.name) no longer shares folders with this device")
        }
        try body()
    }

    /// `peer` no longer shares folders with this device: every session carrying files to or from it ends now.
    func cutTransfers(with peer: DeviceID) {
        for connection in run.withLock({ Array(($0.transfers[peer] ?? [:]).values) }) { connection.interrupt() }
    }

    private func receiveFiles(
        _ session: Session, into folder: SharedFolder, wanted: [String: FileEntry], from name: String
    ) throws {
        let started = Date()
        let channel = session.connection.channel
        let before = channel.bytesIn
        let codec = ZstdChunkCodec()
        var small = 0
        var more = false
        // A large file's bytes are counted as they arrive, a quarter second's at a time: what is to come, the rate
        // and what crossed move during a long file, not only once its pull ends.
        var counted: UInt64 = 0
        var uncounted: UInt64 = 0
        var lastCount = ContinuousClock.now
        func count(final: Bool) {
            let now = ContinuousClock.now
            guard final || (uncounted > 0 && now - lastCount >= .milliseconds(250)) else { return }
            // What crossed is the link's count once the pull ends (compressed, with its framing): the progress
            // counted meanwhile is taken back then.
            let crossed = channel.bytesIn - before
            let step = uncounted
            folder.withFolder { state in
                if final {
                    let rest = crossed > counted ? crossed - counted : 0
                    state.bytesReceived = state.bytesReceived - min(state.bytesReceived, counted) + crossed
                    state.recent.append((Date(), rest))
                    state.arriving -= min(state.arriving, counted)
                } else {
                    state.bytesReceived += step
                    state.recent.append((Date(), step))
                    state.arriving += step
                }
                state.recent.removeAll { $0.0 < Date().addingTimeInterval(-10) }
                state.countNeeded()
            }
            counted += step
            uncounted = 0
            lastCount = now
        }
        defer { count(final: true) }
        reading: while true {
            let frame = try session.connection.receive()
            switch frame.type {
            case .folderFiles:
                small += try placeSmall(FolderFiles.decode(frame.payload, codec: codec), wanted: wanted, into: folder)
            case .folderFilesEnd:
                more = try MessageCoding.decode(FolderFilesEnd.self, from: frame).more
                break reading
            case .error:
                throw MessageCoding.peerError(from: frame)
            default:
                throw ProtocolError(.badMessage, "\(frame.type) among a pull's files")
            }
        }
        var summary = TransferSummary()
        if more {
            let large = wanted.filter { $0.value.size > UInt64(FolderFiles.largest) }
            let sink = try SyncSink(folder: folder, wanted: large, owner: device.id, versions: versions) { _, _ in }
            let machine = ReceiverMachine(
                negotiator: Negotiator(accept: ReceiveOptions.everything),
                policy: .init(maxItemSize: nil, freeSpace: folder.root.freeSpace),
                window: ReceiverMachine.window(forVersion: session.peerHello.agreedVersion))
            let driver = ReceiverDriver(channel: channel, hasher: session.chunkHasher(), codec: codec) { event in
                guard case .progress(let bytes) = event else { return }
                uncounted += UInt64(bytes)
                count(final: false)
            }
            driver.delta = session.peerHello.speaksDelta
            summary = try driver.run(machine: machine, sink: sink, first: nil, decide: nil)
            folder.withFolder { state in
                state.bytesFromLocal += summary.patchedBytes
                state.placed(files: summary.delivered.count)
                // Only for what was asked (a holder names its items; one it made up is not listed here).
                let asked = Set(large.values.map(\.path))
                for (path, reason) in summary.refused where asked.contains(path) { state.failedPulls[path] = reason }
            }
        } else {
            try? session.connection.send(.bye, Bye())
        }
        let pulled = FolderStatus.Pull(
            at: Date(), from: name, files: small + summary.delivered.count, crossed: channel.bytesIn - before,
            fromLocal: summary.patchedBytes)
        if pulled.files > 0 {
            folder.withFolder { state in
                state.pulls.append(pulled)
                if state.pulls.count > 20 { state.pulls.removeFirst(state.pulls.count - 20) }
            }
        }
        Self.log.info(
            "pulled",
            metadata: [
                "folder": "\(folder.settings.label)", "from": "\(name)",
                "files": "\(small + summary.delivered.count)", "crossed": "\(channel.bytesIn - before)",
                "fromLocalCopy": "\(summary.patchedBytes)",
                "seconds": "\(Format.c("%.2f", Date().timeIntervalSince(started)))",
            ])
    }

    /// The content digest (`ContentDigest`) of a small file's bytes: the digest of its one chunk's digest.
    static func contentDigest(ofSmall bytes: [UInt8], _ hasher: ChunkHasher) -> [UInt8] {
        bytes.withUnsafeBytes { hasher.digest(hasher.digest($0)) }
    }

    /// Small files that came whole: each checked against the content digest its index entry names, then put in
    /// place in one transaction of the folder's index (a path changed here meanwhile is scanned instead); how many
    /// were placed.
    private func placeSmall(_ frame: FolderFiles, wanted: [String: FileEntry], into folder: SharedFolder) throws -> Int
    {
        let hasher = chunkHasher(.blake3)
        var verified: [(FileEntry, [UInt8])] = []
        var failedPatches: [String] = []
        for file in frame.files {
            guard let entry = wanted[file.ref], entry.size <= UInt64(FolderFiles.largest), file.size == entry.size
            else {
                throw ProtocolError(.badMessage, "the holder sent a file that was not asked for")
            }
            var bytes = file.bytes
            if file.patch {
                // Made from this device's version; a version changed meanwhile, or a patch that does not give the
                // content, is asked for whole next time.
                guard let made = applyPatch(file, to: entry, in: folder),
                    Self.contentDigest(ofSmall: made, hasher) == entry.digest
                else {
                    failedPatches.append(entry.path)
                    continue
                }
                bytes = made
            } else {
                let digest = Self.contentDigest(ofSmall: bytes, hasher)
                guard bytes.count == entry.size, digest == entry.digest else {
                    throw ProtocolError(.digestMismatch, "\(entry.path) does not hold the content its index names")
                }
            }
            verified.append((entry, bytes))
        }
        if !failedPatches.isEmpty { folder.withFolder { $0.wholeNext.formUnion(failedPatches) } }
        var recorded: [FileEntry] = []
        var placed = 0
        var rescans: [String] = []
        // The names the kernel gives the files made without a name until they are linked (`#` and the inode): the
        // watch reports them, and the folder need not look at them (put before the watch's next look can come: it
        // waits for the folder's lock).
        var unnamed: [String] = []
        folder.withFolder { state in
            defer {
                state.madeUnnamed(unnamed)
                state.placed(files: placed)
            }
            state.store.batch {
                state.sync.placing {
                    var folders = OpenFolders()
                    // Each file is made in the folder's own partials (not watched), then renamed into place: the
                    // watch sees one change per file, at its name.
                    let staging = try? folder.root.directory(components: [SyncNames.partials], create: true)
                    for (entry, bytes) in verified {
                        let parts = entry.path.split(separator: "/").map(String.init)
                        let parent = parts.dropLast().joined(separator: "/")
                        let mode = mode_t(entry.mode & 0o777)
                        do {
                            let outcome = try state.sync.place(entry, exclusive: true) { free in
                                let directory = try folders.folder(parent) {
                                    try folder.root.directory(components: Array(parts.dropLast()))
                                }
                                // A new file is made without a name and then named (nothing to rename, nothing
                                // replaced: a file made there meanwhile is looked at instead).
                                if free {
                                    do {
                                        if let made = try directory.writeNew(
                                            parts.last!, bytes, mode: mode, modifiedNanoseconds: entry.modified)
                                        {
                                            unnamed.append((parent.isEmpty ? "" : parent + "/") + "#\(made.inode)")
                                            return DiskFolder.stamp(made)
                                        }
                                    } catch let error as DiskError where error.kind == .exists {
                                        throw SyncFolder.PathTaken()
                                    }
                                    // No unnamed files here: the name is looked at before a file replaces it.
                                    if directory.info(parts.last!) != nil { throw SyncFolder.PathTaken() }
                                }
                                try directory.writeAtomically(
                                    parts.last!, bytes, mode: mode, modifiedNanoseconds: entry.modified,
                                    staging: staging)
                                return nil
                            }
                            switch outcome {
                            case .placed(let entries):
                                recorded += entries
                                placed += 1
                                state.wholeNext.remove(entry.path)
                            case .changedHere: rescans.append(entry.path)
                            case .notWanted: break
                            }
                        } catch {
                            state.failedPulls[entry.path] = "\(error)"
                        }
                    }
                }
            }
        }
        folder.recorded(recorded)
        for path in rescans { folder.rescan(path) }
        return verified.count - rescans.count
    }

    /// A small file made from this device's version of it and the holder's patch; nil when that version is no
    /// longer here as the index recorded it, or the patch does not fit it.
    private func applyPatch(_ file: FolderFiles.File, to entry: FileEntry, in folder: SharedFolder) -> [UInt8]? {
        guard let basis = localVersion(entry.path, in: folder) else { return nil }
        var made = [UInt8](repeating: 0, count: file.size)
        do {
            let result = try file.bytes.withUnsafeBytes { patch in
                try made.withUnsafeMutableBytes { output in
                    try Patch.apply(patch, basisSize: UInt64(basis.count), length: file.size, into: output) {
                        buffer, offset in
                        let start = Int(offset)
                        let count = min(buffer.count, basis.count - start)
                        guard count > 0 else { return 0 }
                        basis.withUnsafeBytes {
                            buffer.baseAddress!.copyMemory(from: $0.baseAddress! + start, byteCount: count)
                        }
                        return count
                    }
                }
            }
            _ = result
        } catch {
            return nil
        }
        return made
    }

    /// A session `peer` opened to bring files this device asked for over its link (its `folderPush` first).
    package func receivePush(_ session: Session, first: Frame, peerName: String) throws {
        let push = try FolderPull.decode(first)
        guard let folder = folder(push.folder),
            devices(of: folder.settings).contains(where: { $0.id == session.peerID })
        else { throw ProtocolError(.refused, "no folder \(push.folder) is shared with this device") }
        let keys = push.items.map { "\(push.folder)|\($0.ref)" }
        let wanted = run.withLock { run in
            Dictionary(
                push.items.compactMap { item in run.asked["\(push.folder)|\(item.ref)"].map { (item.ref, $0) } },
                uniquingKeysWith: { first, _ in first })
        }
        guard !wanted.isEmpty else { throw ProtocolError(.refused, "none of those files was asked for") }
        run.withLock { $0.arriving.formUnion(keys) }
        defer {
            run.withLock { run in
                run.arriving.subtract(keys)
                run.answered.formUnion(keys)
            }
        }
        do {
            try receive(session, into: folder, wanted: wanted, from: peerName)
        } catch {
            // Why the files it brought did not land (the asking side only learns that the push ended), listed
            // until they do.
            folder.withFolder { state in
                for entry in wanted.values where state.store.local(entry.path)?.entry.version != entry.version {
                    state.failedPulls[entry.path] = "from \(peerName): \(error)"
                }
            }
            throw error
        }
    }

    /// `peer` asked over the link for files (it cannot open a session to this device): a session to it brings the
    /// ones this device holds at that content.
    /// What will not come of an ask is said on the link (`folderPush` there): the asker stops waiting for it.
    func push(_ pull: FolderPull, to peer: DeviceID, name: String, link: FolderLink) {
        spawn("share-folders-push") { [self] in
            var coming: Set<String> = []
            defer {
                let missing = pull.items.filter { !coming.contains($0.ref) }
                if !missing.isEmpty { link.notComing(FolderPull(folder: pull.folder, items: missing)) }
            }
            do {
                guard let folder = folder(pull.folder), folder.settings.paused != true,
                    devices(of: folder.settings).contains(where: { $0.id == peer })
                else { return }
                let sources = SyncFileSource.sources(pull.items, folder: folder)
                // What it brings, by ref (the asker's signatures stay here: they only serve the patches).
                let held = Set(sources.map(\.offer.id))
                let offered = FolderPull(
                    folder: pull.folder,
                    items: pull.items.filter { held.contains($0.ref) }.map { item in
                        var item = item
                        item.basis = nil
                        return item
                    })
                guard !offered.items.isEmpty else { return }
                let target = try PeerTarget.resolve(
                    peer.description, device: device, trust: trust.store, beyondLAN: !reach.isEmpty)
                let session = try Reach.connect(
                    from: device, to: target, trust: trust.store,
                    hello: Hello(name: device.name, role: .agent, features: [Delta.feature, FolderPull.binaryFeature]),
                    timeouts: SessionTimeouts(connect: 5, handshake: 10, idle: 60), settings: reach)
                defer { session.connection.close() }
                try session.connection.send(offered.frame(.folderPush, binary: session.peerHello.readsBinaryPulls))
                // Once the session carries them, the asker counts them by the session's end.
                coming = Set(offered.items.map(\.ref))
                try send(sources, of: folder, over: session)
            } catch {
                Self.log.info("a push ended", metadata: ["to": "\(name)", "reason": "\(error)"])
            }
        }
    }

    /// `peer` said files asked of it will not come (it does not hold them at that content, or could not push).
    func notComing(_ pull: FolderPull, from peer: DeviceID) {
        run.withLock { run in
            for item in pull.items where run.asked["\(pull.folder)|\(item.ref)"] != nil {
                run.answered.insert("\(pull.folder)|\(item.ref)")
            }
        }
    }

    /// Answers a pull another device opened (its `FolderPull` was the session's first frame): the files asked for
    /// that this device holds at that content, offered as a transfer's sender; the rest are left out.
    package func servePull(_ session: Session, first: Frame, peerName: String) throws {
        let pull = try FolderPull.decode(first)
        guard let folder = folder(pull.folder),
            devices(of: folder.settings).contains(where: { $0.id == session.peerID })
        else { throw ProtocolError(.refused, "no folder \(pull.folder) is shared with this device") }
        guard folder.settings.paused != true else {
            throw ProtocolError(.refused, "\(folder.settings.label) is paused on \(device.name)")
        }
        guard session.peerHello.accept != nil else {
            throw ProtocolError(.refused, "\(peerName) pulls without an accept list")
        }
        let sources = SyncFileSource.sources(pull.items, folder: folder)
        guard !sources.isEmpty else {
            throw ProtocolError(.refused, "none of those files is here at that content now")
        }
        try send(sources, of: folder, over: session)
    }

    /// Sends files of a folder over `session` to the device that pulls them: the small ones whole, several to a
    /// frame, then the others as a transfer's sender.
    private func send(_ sources: [SyncFileSource], of folder: SharedFolder, over session: Session) throws {
        try carrying(session) { try sendFiles(sources, of: folder, over: session) }
    }

    private func sendFiles(_ sources: [SyncFileSource], of folder: SharedFolder, over session: Session) throws {
        guard session.peerHello.accept != nil else {
            throw ProtocolError(.refused, "the device receives without an accept list")
        }
        let decodesZstd = (session.peerHello.compression ?? []).contains("zstd")
        let codec = decodesZstd ? ZstdChunkCodec() : nil
        let small = sources.filter { $0.stamp.size <= UInt64(FolderFiles.largest) }
        let large = sources.filter { $0.stamp.size > UInt64(FolderFiles.largest) }
        var files: [FolderFiles.File] = []
        var bytes = 0
        func flush() throws {
            guard !files.isEmpty else { return }
            var frame = FolderFiles(files: files).built(codec: codec)
            // Tests slow sends down to cut them half way (SHARE_TEST_SEND_RATE, as for every send).
            if let rate = ProgressReporter.testSendRate {
                usleep(UInt32(min(1, Double(frame.count) / rate) * 1_000_000))
            }
            try session.connection.channel.send(.folderFiles, built: &frame)
            files = []
            bytes = 0
        }
        // Files whose content is not what the index names although their stamps say unchanged: left out, and
        // read again by the folder's next round (the puller asks again once this device recorded what they hold).
        let hasher = chunkHasher(.blake3)
        var distrusted: [String] = []
        defer {
            if !distrusted.isEmpty {
                Self.log.notice(
                    "files changed here without their size, time or inode changing are read again",
                    metadata: ["folder": "\(folder.settings.label)", "files": "\(distrusted.count)"])
                folder.withFolder { $0.sync.distrust(distrusted) }
                folder.rescan(Set(distrusted))
            }
        }
        var fromKept = 0
        defer {
            Self.log.debug(
                "served",
                metadata: ["folder": "\(folder.settings.label)", "small": "\(small.count)", "kept": "\(fromKept)"])
        }
        for source in small {
            let contents: [UInt8]
            if let kept = served.contents(source.digest, in: folder.id) {
                // Read and checked moments ago for another device.
                contents = kept
                fromKept += 1
            } else {
                // A file changed since the pull was planned is left out (the device pulls it again once it knows).
                guard let read = source.wholeContents() else { continue }
                guard Self.contentDigest(ofSmall: read, hasher) == source.digest else {
                    distrusted.append(source.offer.label)
                    continue
                }
                served.keep(read, digest: source.digest, in: folder.id)
                contents = read
            }
            var file = FolderFiles.File(ref: source.offer.id, bytes: contents)
            // Against the puller's version when it described one: the patch when it saves a quarter or more.
            if let basis = source.basis, let data = Data(base64Encoded: basis),
                let signature = try? SmallDelta.Signature.decode(Array(data))
            {
                let patch = contents.withUnsafeBytes { SmallDelta.patch($0, against: signature) }
                if patch.count * 4 < contents.count * 3 {
                    file = FolderFiles.File(ref: source.offer.id, size: contents.count, patch: patch)
                }
            }
            files.append(file)
            bytes += file.bytes.count + source.offer.id.utf8.count + 10
            if bytes >= FolderFiles.frameBytes { try flush() }
        }
        try flush()
        try session.connection.send(.folderFilesEnd, FolderFilesEnd(more: !large.isEmpty))
        guard !large.isEmpty else {
            // The puller says bye when it has read everything.
            _ = try? session.connection.receive()
            return
        }
        let driver = SenderDriver(
            channel: session.connection.channel, chunkSize: ContentDigest.chunkSize, hasher: session.chunkHasher(),
            codec: codec,
            events: { event in
                if case .progress(let bytes) = event, let rate = ProgressReporter.testSendRate {
                    usleep(UInt32(min(1, Double(bytes) / rate) * 1_000_000))
                }
            })
        driver.delta = session.peerHello.speaksDelta
        _ = try driver.run(large)
    }
}
