import CoreTransferable
import Foundation
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

    /// Asks the linked devices that hold each file at its version for it: one pull at a time per folder and device,
    /// batches of at most `pullBatch` files. A file no linked device holds waits (and is listed as waiting).
    func pull(_ fetches: [FileEntry], into folder: SharedFolder) {
        let linked = run.withLock { run in run.links.filter { $0.value.shares(folder.id) }.map(\.key) }
        var byPeer: [DeviceID: [FileEntry]] = [:]
        folder.withFolder { state in
            for entry in fetches {
                let remotes = state.store.remotes(entry.path)
                guard
                    let holder = linked.sorted(by: { $0.description < $1.description }).first(where: { peer in
                        remotes[ShortIDs.of(peer)].map { $0.version == entry.version && !$0.deleted } ?? false
                    })
                else {
                    state.problems[entry.path] = "no device that holds this version is connected"
                    continue
                }
                byPeer[holder, default: []].append(entry)
            }
        }
        let outgoing = run.withLock { run in run.links.mapValues(\.outgoing) }
        for (peer, entries) in byPeer {
            let key = "\(folder.id)|\(peer)"
            let started = run.withLock { run -> Bool in
                guard !run.pulling.contains(key) else { return false }
                run.pulling.insert(key)
                return true
            }
            guard started else { continue }
            let batch = Array(entries.prefix(Self.pullBatch))
            folder.withFolder { state in for entry in batch { state.inFlight[entry.path] = entry.version } }
            spawn("share-folders-pull") { [self] in
                defer {
                    folder.withFolder { state in for entry in batch { state.inFlight[entry.path] = nil } }
                    run.withLock { _ = $0.pulling.remove(key) }
                    folder.touch(paths: Set(batch.map(\.path)))
                }
                do {
                    // The side that opened the link opens the pull's session too (the other may not reach it).
                    if outgoing[peer] == true {
                        try pullSession(batch, into: folder, from: peer)
                    } else {
                        try ask(batch, into: folder, from: peer)
                    }
                } catch {
                    Self.log.info(
                        "a pull ended", metadata: ["folder": "\(folder.settings.label)", "reason": "\(error)"])
                }
            }
        }
    }

    /// What a pull asks for.
    static func request(_ entries: [FileEntry], folder: String) -> FolderPull {
        FolderPull(
            folder: folder,
            items: entries.map {
                FolderPull.Item(ref: Self.ref($0), path: $0.path, digest: $0.digest.hexString, size: $0.size)
            })
    }

    /// Asks `peer` over its link to bring `entries` (it opens the session), and waits (bounded) for them.
    private func ask(_ entries: [FileEntry], into folder: SharedFolder, from peer: DeviceID) throws {
        guard let link = run.withLock({ $0.links[peer] }) else { return }
        let refs = Dictionary(entries.map { (Self.ref($0), $0) }, uniquingKeysWith: { first, _ in first })
        run.withLock { run in
            for (ref, entry) in refs { run.asked["\(folder.id)|\(ref)"] = entry }
        }
        defer { run.withLock { run in for ref in refs.keys { run.asked["\(folder.id)|\(ref)"] = nil } } }
        link.ask(Self.request(entries, folder: folder.id))
        // Done when every file came (or was left out), the link ended, or a minute passed.
        _ = run.wait(seconds: 60) { run in
            run.stopping || run.links[peer] !== link
                || refs.keys.allSatisfy {
                    run.asked["\(folder.id)|\($0)"] == nil || run.answered.contains("\(folder.id)|\($0)")
                }
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
            features: [Delta.feature])
        let session = try Reach.connect(
            from: device, to: target, trust: trust.store, hello: hello,
            timeouts: SessionTimeouts(connect: 5, handshake: 10, idle: 60), settings: reach)
        defer { session.connection.close() }
        var wanted: [String: FileEntry] = [:]
        for entry in entries { wanted[Self.ref(entry)] = entry }
        try session.connection.send(.folderPull, Self.request(entries, folder: folder.id))
        try receive(session, into: folder, wanted: wanted, from: entry.name)
    }

    /// Receives the files of a pull (or a push) into the folder, as a transfer's receiver over `session`.
    private func receive(_ session: Session, into folder: SharedFolder, wanted: [String: FileEntry], from name: String)
        throws
    {
        let sink = try SyncSink(folder: folder, wanted: wanted, owner: device.id, versions: versions) { _, _ in }
        let machine = ReceiverMachine(
            negotiator: Negotiator(accept: ReceiveOptions.everything),
            policy: .init(maxItemSize: nil, freeSpace: folder.root.freeSpace),
            window: ReceiverMachine.window(forVersion: session.peerHello.agreedVersion))
        let driver = ReceiverDriver(
            channel: session.connection.channel, hasher: session.chunkHasher(), codec: ZstdChunkCodec())
        driver.delta = session.peerHello.speaksDelta
        let started = Date()
        let summary = try driver.run(machine: machine, sink: sink, first: nil, decide: nil)
        folder.withFolder { state in
            state.bytesReceived += summary.wireBytes
            state.bytesFromLocal += summary.patchedBytes
            state.recent.append((Date(), summary.wireBytes))
            state.recent.removeAll { $0.0 < Date().addingTimeInterval(-10) }
        }
        Self.log.info(
            "pulled",
            metadata: [
                "folder": "\(folder.settings.label)", "from": "\(name)", "files": "\(summary.delivered.count)",
                "crossed": "\(summary.wireBytes)", "fromLocalCopy": "\(summary.patchedBytes)",
                "seconds": "\(String(format: "%.2f", Date().timeIntervalSince(started)))",
            ])
    }

    /// A session `peer` opened to bring files this device asked for over its link (its `folderPush` first).
    package func receivePush(_ session: Session, first: Frame, peerName: String) throws {
        let push = try MessageCoding.decode(FolderPull.self, from: first)
        try push.validate()
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
        defer { run.withLock { run in run.answered.formUnion(keys) } }
        try receive(session, into: folder, wanted: wanted, from: peerName)
    }

    /// `peer` asked over the link for files (it cannot open a session to this device): a session to it brings the
    /// ones this device holds at that content.
    func push(_ pull: FolderPull, to peer: DeviceID, name: String) {
        spawn("share-folders-push") { [self] in
            do {
                guard let folder = folder(pull.folder),
                    devices(of: folder.settings).contains(where: { $0.id == peer })
                else { return }
                let sources = pull.items.compactMap { SyncFileSource($0, folder: folder) }
                let target = try PeerTarget.resolve(
                    peer.description, device: device, trust: trust.store, beyondLAN: !reach.isEmpty)
                let session = try Reach.connect(
                    from: device, to: target, trust: trust.store, hello: Hello(name: device.name, role: .agent),
                    timeouts: SessionTimeouts(connect: 5, handshake: 10, idle: 60), settings: reach)
                defer { session.connection.close() }
                let offered = FolderPull(
                    folder: pull.folder,
                    items: pull.items.filter { item in sources.contains { $0.offer.id == item.ref } })
                guard !offered.items.isEmpty else { return }
                try session.connection.send(.folderPush, offered)
                try send(sources, over: session)
            } catch {
                Self.log.info("a push ended", metadata: ["to": "\(name)", "reason": "\(error)"])
            }
        }
    }

    /// Answers a pull another device opened (its `FolderPull` was the session's first frame): the files asked for
    /// that this device holds at that content, offered as a transfer's sender; the rest are left out.
    package func servePull(_ session: Session, first: Frame, peerName: String) throws {
        let pull = try MessageCoding.decode(FolderPull.self, from: first)
        try pull.validate()
        guard let folder = folder(pull.folder),
            devices(of: folder.settings).contains(where: { $0.id == session.peerID })
        else { throw ProtocolError(.refused, "no folder \(pull.folder) is shared with this device") }
        guard session.peerHello.accept != nil else {
            throw ProtocolError(.refused, "\(peerName) pulls without an accept list")
        }
        let sources = pull.items.compactMap { SyncFileSource($0, folder: folder) }
        guard !sources.isEmpty else {
            throw ProtocolError(.refused, "none of those files is here at that content now")
        }
        try send(sources, over: session)
    }

    /// Sends files of a folder as a transfer's sender over `session` (whose other end receives them).
    private func send(_ sources: [SyncFileSource], over session: Session) throws {
        guard session.peerHello.accept != nil else {
            throw ProtocolError(.refused, "the device receives without an accept list")
        }
        let decodesZstd = (session.peerHello.compression ?? []).contains("zstd")
        let driver = SenderDriver(
            channel: session.connection.channel, chunkSize: ContentDigest.chunkSize, hasher: session.chunkHasher(),
            codec: decodesZstd ? ZstdChunkCodec() : nil,
            events: { event in
                // Tests slow sends down to cut them half way (SHARE_TEST_SEND_RATE, as for every send).
                if case .progress(let bytes) = event, let rate = ProgressReporter.testSendRate {
                    usleep(UInt32(min(1, Double(bytes) / rate) * 1_000_000))
                }
            })
        driver.delta = session.peerHello.speaksDelta
        _ = try driver.run(sources)
    }
}
