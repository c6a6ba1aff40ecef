import FoundationEssentials
import Glibc
import ShareText
import ShareEngine
import ShareNet
import ShareProtocol
import ShareReach
import ShareSync
import ShareTLS
import ShareTrust

extension FolderService {
    // MARK: Which devices, which links

    /// The devices this device shares at least one folder with.
    var wantedPeers: [TrustedDevice] {
        var seen: Set<DeviceID> = []
        return book.folders.flatMap { devices(of: $0) }.filter { seen.insert($0.id).inserted }
    }

    /// What this device announces to `peer`: every folder shared with it, with where its index stands and what this
    /// device holds of the peer's.
    func announcements(for peer: DeviceID) -> [FolderAnnouncement] {
        folders.compactMap { folder -> FolderAnnouncement? in
            let settings = folder.settings
            guard settings.paused != true, devices(of: settings).contains(where: { $0.id == peer }) else { return nil }
            return folder.withFolder { state in
                let held = state.store.remoteState(ShortIDs.of(peer))
                return FolderAnnouncement(
                    id: settings.id, label: SharedFolderSettings.label(settings.label),
                    type: settings.kind == .sendOnly || settings.mirror == true ? "send-only" : settings.kind.rawValue,
                    devices: Array(([device.id.description] + settings.devices).prefix(Limits.maxFolderDevices)),
                    indexID: String(state.store.indexID, radix: 16),
                    sequence: state.store.sequence, heldIndexID: held.map { String($0.indexID, radix: 16) } ?? "",
                    heldSequence: held?.have ?? 0)
            }
        }
    }

    /// Folders changed (added, accepted, removed): every link is made again, with the new list.
    func restartLinks() {
        for link in linksAfterAChange() { link.stop() }
    }

    /// A folder added or accepted: every link says the new list on itself (a link that cannot, one whose list lost
    /// a folder, is made again), and devices not linked yet are linked at once.
    func refreshLinks() {
        for link in linksAfterAChange() { sayChanges(on: link) }
    }

    /// The folders changed: every device may be tried at once (what held its attempts back is forgotten and the
    /// linker woken); the links open now.
    private func linksAfterAChange() -> [FolderLink] {
        run.withLock { run in
            run.retryAt = [:]
            run.failures = [:]
            run.quickEnds = [:]
            run.linkerWake = true
            return Array(run.links.values)
        }
    }

    /// A folder added, accepted or removed between the making of `link`'s list and its joining the links (where
    /// `refreshLinks` finds it) is said on it now, or the link is made again.
    private func sayChanges(on link: FolderLink) {
        if !link.reannounce(announcements(for: link.peer), withheld: withheld(from: link.peer)) { link.stop() }
    }

    /// The folders `peer` shares with this device, or offered it, that this device does not share back, and why:
    /// offered and not accepted yet, declined, paused here, removed here, or no longer shared with it here (said in
    /// the hello, so that the device that shares it can say which).
    func withheld(from peer: DeviceID) -> [FolderWithheld] {
        let from = peer.description
        var said: [String: String] = [:]
        for folder in folders {
            let settings = folder.settings
            if settings.paused == true, devices(of: settings).contains(where: { $0.id == peer }) {
                said[settings.id] = FolderWithheld.paused
            } else if settings.unshared?.contains(from) == true, !settings.devices.contains(from) {
                said[settings.id] = FolderWithheld.unshared
            }
        }
        let book = book.snapshot
        for offer in book.offers where offer.from == from { said[offer.id] = FolderWithheld.offered }
        // A folder removed here that the device still shares is offered here again: it hears that it was removed.
        for entry in book.removed {
            let (id, device) = FolderBook.split(entry)
            if device == from, book.folders.allSatisfy({ $0.id != id }) { said[id] = FolderWithheld.removed }
        }
        for entry in book.declined {
            let (id, device) = FolderBook.split(entry)
            if device == from { said[id] = FolderWithheld.declined }
        }
        return said.sorted { $0.key < $1.key }.prefix(Limits.maxFolders).map {
            FolderWithheld(id: $0.key, state: $0.value)
        }
    }

    func wakeLinker() { run.withLock { $0.linkerWake = true } }

    /// Keeps a link open to every device a folder is shared with: the device with the lower ID opens it at once,
    /// the other if none came within a second (one side may not reach the other), or at once the first time; a
    /// device that cannot be reached is tried again after 1, 2, 4 … at most 30 seconds, at once when it is heard
    /// from again. A link that ends is opened again at once; one that ends soon after it opened (the other device
    /// closed or refused it) is opened again at once the first time (a folder accepted or removed there makes
    /// every link again), then after 1, 2, 4 … at most 30 seconds: a device that ends every link gets no loop of
    /// handshakes.
    func linker() {
        let started = Date()
        while !stopping {
            _ = run.wait(seconds: 1) { $0.linkerWake || $0.stopping }
            run.withLock { $0.linkerWake = false }
            // Files served a while ago are no longer kept; their memory goes back to the system.
            if served.expire() { Syscalls.releaseFreeMemory() }
            // Files on their way to or from a device that no longer shares folders with this one stop, link or not
            // (a pull under way can outlast the link it was asked on).
            for peer in run.withLock({ Array($0.transfers.keys) }) where !mayLink(peer) { cutTransfers(with: peer) }
            let now = Date()
            for peer in wantedPeers {
                let go = run.withLock { run -> Bool in
                    guard run.links[peer.id] == nil, !run.connecting.contains(peer.id),
                        (run.retryAt[peer.id] ?? .distantPast) <= now
                    else { return false }
                    // The device with the lower ID opens the link; the other waits a second for it, unless it
                    // never had one with it (it may not know yet that a folder is shared with it: an offer).
                    let first = ShortIDs.of(device.id) < ShortIDs.of(peer.id)
                    guard first || now.timeIntervalSince(started) > 1 || !run.everLinked.contains(peer.id) else {
                        return false
                    }
                    run.connecting.insert(peer.id)
                    return true
                }
                guard go else { continue }
                Self.log.debug("linking", metadata: ["peer": "\(peer.name)"])
                spawn("share-folders-link") { [self] in connect(to: peer) }
            }
        }
    }

    /// A device was heard from (an announcement, a session of its own): a link to it is tried at once.
    package func heard(_ id: DeviceID) {
        run.withLock { run in
            // Hearing from a device that ends every link opened to it is no reason to try again sooner.
            guard run.retryAt[id] != nil, run.quickEnds[id, default: 0] < 2 else { return }
            run.retryAt[id] = nil
            run.linkerWake = true
        }
    }

    private func connect(to peer: TrustedDevice) {
        // The linker looks again once this attempt is over (a link that ended is opened again, or its time set).
        defer {
            run.withLock { run in
                run.connecting.remove(peer.id)
                run.linkerWake = true
            }
        }
        do {
            let target = try PeerTarget.resolve(
                peer.id.description, device: device, trust: trust.store, beyondLAN: !reach.isEmpty)
            let session = try Reach.connect(
                from: device, to: target, trust: trust.store,
                hello: Hello(name: device.name, role: .agent, features: [FolderPull.binaryFeature]),
                timeouts: SessionTimeouts(connect: 5, handshake: 10, idle: 0), settings: reach)
            // The last refusal stays said until a link ends without one (a status read while the link is tried
            // again still says why).
            run.withLock { run in
                run.failures[peer.id] = nil
                run.retryAt[peer.id] = nil
            }
            let link = FolderLink(
                session: session, peerName: peer.name, outgoing: true, local: announcements(for: peer.id),
                withheld: withheld(from: peer.id), service: self)
            guard register(link) else {
                Self.log.debug("a folder link opened here gives way", metadata: ["peer": "\(peer.name)"])
                session.connection.close()
                return
            }
            Self.log.debug("a folder link opened", metadata: ["peer": "\(peer.name)"])
            sayChanges(on: link)
            let opened = ContinuousClock.now
            let refusal = link.run(first: nil)
            let steady = ContinuousClock.now - opened >= .seconds(Self.steadyLink)
            run.withLock { run in
                // A link that gave way to the one the device opened (of two, the lower ID's stays) failed nothing:
                // its refusal is said only when no other link to the device is open.
                if run.links[peer.id] === link || run.links[peer.id] == nil { run.linkErrors[peer.id] = refusal }
                // A link replaced by the one the device opened ended here, not there.
                guard run.links[peer.id] === link else { return }
                guard !steady else {
                    run.quickEnds[peer.id] = nil
                    return
                }
                let ends = run.quickEnds[peer.id, default: 0] + 1
                run.quickEnds[peer.id] = ends
                if ends > 1 { run.retryAt[peer.id] = Date().addingTimeInterval(min(30, pow(2.0, Double(ends - 2)))) }
            }
            unregister(link)
        } catch {
            run.withLock { run in
                let failures = (run.failures[peer.id] ?? 0) + 1
                run.failures[peer.id] = failures
                run.retryAt[peer.id] = Date().addingTimeInterval(min(30, pow(2.0, Double(failures - 1))))
                run.linkErrors[peer.id] = (error as? ShareFailure)?.message ?? "\(error)"
            }
            Self.log.debug("no folder link", metadata: ["peer": "\(peer.name)", "reason": "\(error)"])
        }
    }

    /// Serves a folder link the peer opened (its hello was the session's first frame).
    package func serveLink(_ session: Session, first: Frame, peerName: String) {
        let link = FolderLink(
            session: session, peerName: peerName, outgoing: false, local: announcements(for: session.peerID),
            withheld: withheld(from: session.peerID), service: self)
        guard register(link) else {
            // An agent that is stopping takes no link; else the other link between the two devices stays.
            let reason = stopping ? "the agent is stopping" : "a folder link with this device is open already"
            Self.log.debug(
                "a folder link from the other device gives way",
                metadata: ["peer": "\(peerName)", "reason": "\(reason)"])
            session.connection.fail(with: ProtocolError(.refused, reason))
            return
        }
        Self.log.debug("a folder link served", metadata: ["peer": "\(peerName)"])
        sayChanges(on: link)
        let refusal = link.run(first: first)
        // How the device's last link ended is what its status says (not a refusal of an earlier attempt).
        run.withLock { $0.linkErrors[session.peerID] = refusal }
        unregister(link)
    }

    /// Keeps `link` as the one to its device: of two links between the same devices, the one the device with the
    /// lower ID opened stays (both sides decide alike); false when `link` is the one that goes.
    private func register(_ link: FolderLink) -> Bool {
        let (keep, old) = run.withLock { run -> (Bool, FolderLink?) in
            guard !run.stopping else { return (false, nil) }
            if let existing = run.links[link.peer] {
                let lowerOpened = (ShortIDs.of(device.id) < ShortIDs.of(link.peer)) == link.outgoing
                let existingLowerOpened = (ShortIDs.of(device.id) < ShortIDs.of(link.peer)) == existing.outgoing
                if existing.outgoing != link.outgoing, existingLowerOpened, !lowerOpened { return (false, nil) }
                run.links[link.peer] = link
                return (true, existing)
            }
            run.links[link.peer] = link
            run.everLinked.insert(link.peer)
            return (true, nil)
        }
        old?.stop()
        changed()
        return keep
    }

    private func unregister(_ link: FolderLink) {
        // The moment it was last linked: when it was last in step, where it was.
        if run.withLock({ $0.links[link.peer] === link }) {
            for folder in folders where link.shares(folder.id) { noteInStep(folder, ending: link.peer) }
        }
        run.withLock { run in
            if run.links[link.peer] === link { run.links[link.peer] = nil }
            run.linkerWake = true
        }
        changed()
    }

    /// The peer's hello came: the paths of its folders that waited for a device (none connected held what they
    /// need) or failed are planned again (what the peer holds comes in its index, which plans the paths it
    /// changes), and the devices it shares them with that this device trusts as its owner's join them here too.
    func linked(_ link: FolderLink) {
        for folder in folders where link.shares(folder.id) {
            folder.touch(paths: folder.withFolder { $0.unheld.union($0.problems.keys) })
        }
        var grew = false
        for announcement in link.peerAnnouncements {
            guard let settings = book.folder(announcement.id) else { continue }
            let known = Set(settings.devices).union([device.id.description])
            // Not a device this one stopped sharing it with; at most as many as a hello carries.
            let joining = announcement.devices.filter {
                !known.contains($0) && !(settings.unshared ?? []).contains($0) && sharesFolders($0)
            }
            .prefix(max(0, Limits.maxFolderDevices - 1 - settings.devices.count))
            guard !joining.isEmpty else { continue }
            book.note { book in
                guard let index = book.folders.firstIndex(where: { $0.id == settings.id }) else { return }
                book.folders[index].devices += joining
            }
            folder(settings.id)?.withFolder { $0.settings.devices += joining }
            grew = true
        }
        if grew { wakeLinker() }
    }

    /// The links of `folder`'s devices send what it recorded.
    func announce(_ folderID: String) {
        for link in run.withLock({ Array($0.links.values) }) { link.announce(folderID) }
    }

    // MARK: What a link asks

    /// This device's entries of `folder` after `since`, as one update of at most `entriesPerUpdate` entries and the
    /// index limit (nil: none).
    func indexUpdate(_ folderID: String, since: UInt64) -> IndexUpdate? {
        guard let folder = folder(folderID) else { return nil }
        return folder.withFolder { state -> IndexUpdate? in
            var records: [IndexRecord] = []
            var size = 64
            var last = since
            for entry in state.store.localSince(since, limit: Self.entriesPerUpdate) {
                let record = entry.record
                if size + record.wireSize > Limits.maxIndexPayload - 1024, !records.isEmpty { break }
                size += record.wireSize
                records.append(record)
                last = entry.sequence
            }
            guard !records.isEmpty else { return nil }
            return IndexUpdate(
                folder: folderID, indexID: String(state.store.indexID, radix: 16), from: since, to: last,
                records: records)
        }
    }

    /// What this device holds of `peer`'s index of `folder`.
    func held(_ folderID: String, of peer: DeviceID) -> (indexID: String, have: UInt64)? {
        folder(folderID)?.withFolder { state in
            state.store.remoteState(ShortIDs.of(peer)).map { (String($0.indexID, radix: 16), $0.have) }
        }
    }

    /// Stores the peer's entries and has the folder planned again for those paths.
    func apply(_ update: IndexUpdate, reset: Bool, from peer: DeviceID) throws {
        guard let folder = folder(update.folder) else { return }
        // Paths are NFC in every index (a peer's in another form is taken as its NFC form: one name, not two).
        let entries = try update.records.map { record in
            var entry = try FileEntry(record: record)
            let nfc = entry.path.precomposed
            if !nfc.utf8.elementsEqual(entry.path.utf8) { entry.path = nfc }
            return entry
        }
        // Only paths whose plan may change are planned again: an entry at this device's own version (the peer
        // caught up) changes nothing, and one at the version a pull already waits for only names another holder.
        // A new index of the peer's replaces what was held of it: every path the old one named plans again too.
        let changed = folder.withFolder { state -> Set<String> in
            let short = ShortIDs.of(peer)
            var changed = reset ? state.store.paths(of: short) : []
            state.store.applyRemote(
                short, indexID: UInt64(update.indexID, radix: 16) ?? 0, reset: reset, entries: entries,
                have: update.to)
            for entry in entries {
                if state.store.local(entry.path)?.entry.version == entry.version { continue }
                if state.queue[entry.path]?.version == entry.version || state.inFlight[entry.path] == entry.version {
                    state.unheld.remove(entry.path)
                    continue
                }
                changed.insert(entry.path)
            }
            return changed
        }
        folder.touch(paths: changed)
    }

    /// A folder the peer shares with this device, which it does not have: accepted at once where agent.json says
    /// so (or when it is a mirror, a send-only folder, which lands in the inbox for that device), else offered.
    func offered(_ announcement: FolderAnnouncement, by peer: DeviceID, name: String) {
        guard mayLink(peer), book.folder(announcement.id) == nil,
            !book.wasDeclined(announcement.id, from: peer.description)
        else { return }
        var offer = FolderOffer(
            id: announcement.id, label: announcement.label, kind: announcement.type, from: peer.description,
            fromName: name)
        offer.devices = announcement.devices
        book.note { book in
            book.offers.removeAll { $0.id == offer.id && $0.from == offer.from }
            book.offers.append(offer)
        }
        // The device that offers it hears that it waits here, when it does (one taken at once is in the list the
        // acceptance says instead).
        func sayWaiting() { if let link = run.withLock({ $0.links[peer] }) { sayChanges(on: link) } }
        let automatic =
            announcement.type == "send-only"
            || acceptance.autoAccept.contains { trust.store.find($0)?.id == peer }
        if automatic {
            do {
                let (settings, new) = try acceptOnce(announcement.id, into: nil)
                guard new else { return }
                Self.log.info(
                    "accepted a shared folder",
                    metadata: [
                        "folder": "\(settings.label)", "from": "\(name)",
                        "path": "\(settings.path)",
                    ])
            } catch {
                Self.log.warning("cannot accept a shared folder", metadata: ["from": "\(name)", "reason": "\(error)"])
                sayWaiting()
            }
        } else {
            Self.log.info("a folder is offered", metadata: ["folder": "\(announcement.label)", "from": "\(name)"])
            sayWaiting()
        }
    }
}
