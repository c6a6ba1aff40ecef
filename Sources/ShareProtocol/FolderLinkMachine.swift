/// The index exchange of a folder link, both directions, as a state machine: it takes the peer's hello, its index
/// updates and this device's own changes, and returns what to do (send this device's index from a sequence, store
/// the peer's entries, show a folder the peer offers). The driver does the I/O; the machine holds only where each
/// folder stands. Every update applies only where it continues what is held: a duplicate does nothing, and one after
/// a gap asks for the link to be made again (its hellos say what each side holds).
public struct FolderLinkMachine: Sendable {
    public enum Action: Sendable, Equatable {
        /// Send this device's entries of `folder` recorded after `since` (0: all of them), in order.
        case sendIndex(folder: String, since: UInt64)
        /// Store the peer's entries (`reset`: what was held of its index goes first: a new index of it).
        case apply(IndexUpdate, reset: Bool)
        /// A folder the peer shares with this device, which this device does not have: offered to its person.
        case offered(FolderAnnouncement)
        /// An update that does not continue what is held (a message lost on the way): the link is made again, and
        /// its hellos say where each side stands.
        case gap(folder: String)
    }

    /// This device's folders shared with the peer, as announced in its hello.
    public private(set) var local: [String: FolderAnnouncement]
    /// The peer's announcements of the folders both have.
    public private(set) var peer: [String: FolderAnnouncement] = [:]
    /// The last sequence of this device's index sent on this link, per folder.
    public private(set) var sentUpTo: [String: UInt64] = [:]
    /// The peer's announcements of folders this device does not have (offered): one accepted here shares at once.
    public private(set) var offered: [String: FolderAnnouncement] = [:]
    /// Whether the peer's hello came: until then, a folder it does not share yet may still be in it.
    public private(set) var heard = false
    /// This device's folders the peer shares with it or offered it that this device does not share back, with why.
    public private(set) var withheld: [FolderWithheld]
    /// What the peer's latest hello said of the folders it does not share back, by folder ID.
    public private(set) var peerWithheld: [String: String] = [:]

    public init(local: [FolderAnnouncement], withheld: [FolderWithheld] = []) {
        self.local = Dictionary(local.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        self.withheld = Array(withheld.prefix(Limits.maxFolders))
    }

    /// The hello this side sends first.
    public var hello: FolderHello {
        FolderHello(folders: local.values.sorted { $0.id < $1.id }, withheld: withheld.isEmpty ? nil : withheld)
    }

    /// Whether both sides have `folder` (its entries may cross).
    public func shares(_ folder: String) -> Bool { local[folder] != nil && peer[folder] != nil }

    /// The peer's hello: each folder both have starts sending this device's index from where the peer said it
    /// stands (all of it, when the peer holds another index of ours); folders only the peer has are offered.
    public mutating func received(_ hello: FolderHello) throws(ProtocolError) -> [Action] {
        try hello.validate()
        heard = true
        peerWithheld = Dictionary(
            (hello.withheld ?? []).map { ($0.id, $0.state) }, uniquingKeysWith: { first, _ in first })
        var actions: [Action] = []
        // A hello lists every folder the peer shares with this device: what it offers is what its latest says.
        offered = [:]
        for folder in hello.folders {
            guard let mine = local[folder.id] else {
                offered[folder.id] = folder
                actions.append(.offered(folder))
                continue
            }
            actions.append(share(folder, mine: mine))
        }
        return actions
    }

    /// Both sides have `folder` now: this device's index goes from where the peer said it stands (all of it, when
    /// the peer holds another index of ours). A hello said again on the link may name less than went on it since
    /// (entries on their way, or recorded after this side's own hello): those arrive before anything sent now, and
    /// are not sent again.
    private mutating func share(_ folder: FolderAnnouncement, mine: FolderAnnouncement) -> Action {
        let again = peer[folder.id] != nil
        peer[folder.id] = folder
        var since = folder.heldIndexID == mine.indexID ? min(folder.heldSequence, mine.sequence) : 0
        if again, folder.heldIndexID == mine.indexID, let sent = sentUpTo[folder.id] { since = max(since, sent) }
        sentUpTo[folder.id] = since
        return .sendIndex(folder: folder.id, since: since)
    }

    /// This device's folders shared with the peer are now `folders` (one was added or accepted), and those it does not
    /// share back `withheld`: the hello to send again on this link, and what to send now (the index of a folder the
    /// peer offered, accepted here). Nil when a folder is no longer among them: the link is made again instead.
    public mutating func announce(_ folders: [FolderAnnouncement], withheld: [FolderWithheld] = [])
        -> (hello: FolderHello, actions: [Action])?
    {
        let now = Dictionary(folders.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        guard local.keys.allSatisfy({ now[$0] != nil }) else { return nil }
        self.withheld = Array(withheld.prefix(Limits.maxFolders))
        var actions: [Action] = []
        for (id, mine) in now.sorted(by: { $0.key < $1.key }) where local[id] == nil {
            if let theirs = offered.removeValue(forKey: id) { actions.append(share(theirs, mine: mine)) }
        }
        local = now
        return (hello, actions)
    }

    /// An index update from the peer; `held`: what this device holds of the peer's index of that folder now.
    public func received(_ update: IndexUpdate, held: (indexID: String, have: UInt64)?) throws(ProtocolError)
        -> [Action]
    {
        guard let announced = peer[update.folder] else {
            throw ProtocolError(.badMessage, "an index update for a folder this link does not share")
        }
        guard update.indexID == announced.indexID else {
            throw ProtocolError(.badMessage, "an index update of another index than the peer announced")
        }
        if let held, held.indexID == update.indexID {
            // What is held already (a duplicate) does nothing; an update after a gap asks for the link again.
            if update.to <= held.have { return [] }
            return update.from <= held.have ? [.apply(update, reset: false)] : [.gap(folder: update.folder)]
        }
        // A new index of the peer's: only from its start.
        return update.from == 0 ? [.apply(update, reset: true)] : [.gap(folder: update.folder)]
    }

    /// This device recorded entries in `folder`: send what follows what was sent.
    public func localChanged(_ folder: String) -> [Action] {
        guard shares(folder), let since = sentUpTo[folder] else { return [] }
        return [.sendIndex(folder: folder, since: since)]
    }

    /// This device's entries of `folder` up to `sequence` went out on the link.
    public mutating func sent(_ folder: String, upTo sequence: UInt64) {
        sentUpTo[folder] = max(sentUpTo[folder] ?? 0, sequence)
    }
}
