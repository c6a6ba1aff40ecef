import CoreTransferable
import FoundationEssentials
import ShareText
import Logging
import ShareDisk
import ShareProtocol
import ShareTLS
import ShareNet
import ShareTrust
import UniformTypeIdentifiers

/// Offers waiting for this device's user to accept or decline (`share pending`, `share accept`, `share decline`),
/// kept in `STATE/pending/offers.json` (0600, changed under its lock) with each preview image beside it. A pending
/// offer holds no session open: the sender offers again later and learns the answer then, so neither the idle
/// timeout nor an agent restart loses it. Entries are forgotten a day after they were made, or once used.
package struct PendingOffers: Codable, Sendable {
    package enum Answer: String, Codable, Sendable { case accepted, declined }

    package struct Item: Codable, Sendable, Equatable {
        package var title: String
        package var label: String
        /// The first representation's type, as a person reads it ("MPEG-4 movie").
        package var kind: String
        package var size: UInt64?
        /// The preview image, saved beside the book.
        package var image: String?

        package init(title: String, label: String, kind: String, size: UInt64?, image: String?) {
            self.title = title
            self.label = label
            self.kind = kind
            self.size = size
            self.image = image
        }
    }

    package struct Entry: Codable, Sendable {
        package var id: String
        /// The sending device's ID and name.
        package var from: String
        package var fromName: String
        /// Which offer this is: the sender's device, its items' ids and versions.
        package var key: String
        package var items: [Item]
        package var created: Date
        package var answer: Answer?
        package var reason: String?
        /// When the sender last offered it (held again): a share device offers again every few seconds, its agent
        /// at least every half minute, a LocalSend device keeps its request open.
        package var lastOffered: Date?
        /// The address the offer came from, and whether its sender is a device the user trusts (a friend) rather
        /// than a stranger met on the network: the bounds on waiting offers are kept per address, and strangers
        /// together cannot take the room of trusted devices.
        package var address: String?
        package var trusted: Bool?
        /// Items beyond the ones described (`items` lists at most `maxItemsListed`).
        package var more: Int?

        /// How many items the offer has.
        package var itemCount: Int { items.count + (more ?? 0) }

        /// Waiting for an answer from a sender still offering it: what the bounds count.
        func isLive(now: Date) -> Bool { answer == nil && !senderGone(now: now) }

        /// Whether the sender stopped offering it: an answer given now reaches nobody until it sends again.
        package func senderGone(now: Date = Date()) -> Bool {
            now.timeIntervalSince(lastOffered ?? created) > PendingOffers.staleAfter
        }
    }

    /// Seconds without an offer after which its sender counts as gone: three times the interval at which a sender
    /// offers a held offer again (`share send` and an agent's queued job both offer again after the 5 s the
    /// receiver asks for). `SHARE_TEST_PENDING_STALE_SECONDS` changes it for tests.
    package static let staleAfter: TimeInterval =
        ProcessInfo.processInfo.environment["SHARE_TEST_PENDING_STALE_SECONDS"].flatMap(Double.init) ?? 15

    package var entries: [Entry] = []

    static let maxAge: TimeInterval = 86_400
    static let maxEntries = 256
    /// Live offers at once: per sending device, per address, and for trusted devices and strangers each.
    static let maxPerSender = 16
    static let maxPerAddress = 16
    static let maxPerGroup = 128
    /// Items described per offer (the rest are counted), and characters per description: the book stays small
    /// whatever an offer holds (12 offers of 3,999 items once pushed it past what it reads back).
    static let maxItemsListed = 50
    static let maxText = 256
    static let log = Log.logger("share.pending")

    package static func folder(_ paths: DevicePaths) -> URL { paths.state.appendingPathComponent("pending") }

    static func file(_ paths: DevicePaths) -> URL { folder(paths).appendingPathComponent("offers.json") }

    /// The newest book that could not be read and was kept aside (`offers.json.unreadable-…`), if any.
    package static func keptAside(_ paths: DevicePaths) -> URL? {
        let folder = folder(paths)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.filter { $0.hasPrefix("offers.json.unreadable-") }.sorted().last.map {
            folder.appendingPathComponent($0)
        }
    }

    package static func load(_ paths: DevicePaths) -> PendingOffers {
        LockedJSONFile.read(file(paths), or: PendingOffers())
    }

    /// Loads, changes and saves the book under its lock (the agent and `share accept` both write it).
    @discardableResult
    package static func update<T>(_ paths: DevicePaths, _ change: (inout PendingOffers, Directory) throws -> T) throws
        -> T
    {
        try LockedJSONFile.update(file(paths), empty: PendingOffers()) { book, directory in
            book.expire(in: directory)
            return try change(&book, directory)
        }
    }

    /// The key of an offer from `sender`: the same items at the same versions are the same offer.
    package static func key(of offer: Offer, from sender: DeviceID) -> String {
        let parts = offer.items.map { "\($0.id)@\($0.version ?? "")" }.sorted()
        return Hex.string(SHA256Hasher().digest(Array(([sender.description] + parts).joined(separator: "\n").utf8)))
    }

    private mutating func expire(in directory: Directory) {
        let cutoff = Date().addingTimeInterval(-Self.maxAge)
        for entry in entries where entry.created < cutoff { Self.removeImages(of: entry, in: directory) }
        entries.removeAll { $0.created < cutoff }
    }

    static func removeImages(of entry: Entry, in directory: Directory) {
        for item in entry.items { if let image = item.image { _ = try? directory.remove(image) } }
    }

    /// What to do with an offer from a device whose offers wait for the user: go on (accepted), refuse every item
    /// (declined), or hold it (a new offer is recorded and announced; one still waiting is held again).
    package enum Decision: Sendable {
        case proceed
        case decline(String)
        case hold(OfferHeld)
    }

    /// Looks `offer` up and decides; a new offer is added, with its preview images, and `announce` is called once.
    package static func decide(
        _ offer: Offer, from sender: DeviceID, name: String, paths: DevicePaths, localName: String,
        address: String? = nil, announce: (Entry, DevicePaths) -> Void
    ) throws -> Decision {
        try decide(
            key: Self.key(of: offer, from: sender), from: sender.description, name: name, paths: paths,
            localName: localName, address: address, trusted: true, count: offer.items.count, announce: announce
        ) { id, directory in
            var items: [Item] = []
            for (number, item) in offer.items.prefix(maxItemsListed).enumerated() {
                let first = item.representations[0]
                var image: String?
                if let bytes = item.preview?.imageBytes, !bytes.isEmpty {
                    let ext =
                        item.preview?.imageType.flatMap { UTType($0)?.preferredFilenameExtension } ?? "img"
                    let name = "\(id)-\(number).\(ext.filter { $0.isLetter || $0.isNumber })"
                    try directory.writeAtomically(name, bytes, mode: 0o600, durable: false)
                    image = name
                }
                items.append(
                    Item(
                        title: item.preview?.title ?? item.label, label: item.label,
                        kind: Self.kind(of: first.contentType, label: item.label), size: first.size, image: image))
            }
            return items
        }
    }

    /// The same for an offer of another protocol's (LocalSend's): `key` names the offer, `sender` the device (as
    /// `Entry.from`), and `items` describes it when it is new (given the entry's id and the book's folder).
    /// `address`: where it came from; `trusted`: the sender is a device the user trusts (else a stranger); `count`:
    /// how many items the offer has (`describe` gives at most `maxItemsListed`).
    package static func decide(
        key: String, from sender: String, name: String, paths: DevicePaths, localName: String, address: String?,
        trusted: Bool, count: Int, announce: (Entry, DevicePaths) -> Void,
        items describe: (String, Directory) throws -> [Item]
    ) throws -> Decision {
        var created: Entry?
        let decision: Decision = try update(paths) { book, directory in
            if let index = book.entries.firstIndex(where: { $0.key == key }) {
                let entry = book.entries[index]
                switch entry.answer {
                case .accepted:
                    Self.removeImages(of: entry, in: directory)
                    book.entries.remove(at: index)
                    return .proceed
                case .declined:
                    Self.removeImages(of: entry, in: directory)
                    book.entries.remove(at: index)
                    return .decline(
                        "declined on \(localName)" + (entry.reason.map { ": \($0)" } ?? ""))
                case nil:
                    book.entries[index].lastOffered = Date()
                    return .hold(Self.held(entry, localName: localName))
                }
            }
            // Only offers still waiting from senders still offering them count: an answer given or a sender gone
            // frees the room at once. Strangers are bounded per address and together, apart from trusted devices.
            let now = Date()
            let live = book.entries.filter { $0.isLive(now: now) }
            guard live.filter({ $0.from == sender }).count < Self.maxPerSender,
                address == nil || live.filter({ $0.address == address }).count < Self.maxPerAddress,
                live.filter({ ($0.trusted ?? true) == trusted }).count < Self.maxPerGroup
            else {
                return .decline("\(localName) already holds too many offers waiting for an answer; try later")
            }
            // The book's own bound: what no longer counts goes first.
            while book.entries.count >= Self.maxEntries,
                let index = book.entries.firstIndex(where: { !$0.isLive(now: now) })
            {
                Self.removeImages(of: book.entries[index], in: directory)
                book.entries.remove(at: index)
            }
            guard book.entries.count < Self.maxEntries else {
                return .decline("\(localName) already holds too many offers waiting for an answer; try later")
            }
            let id = String(UUID().uuidString.replacing("-", with: "").prefix(8)).lowercased()
            let items = try describe(id, directory).prefix(Self.maxItemsListed).map { item in
                var item = item
                item.title = String(item.title.prefix(Self.maxText))
                item.label = String(item.label.prefix(Self.maxText))
                item.kind = String(item.kind.prefix(Self.maxText))
                return item
            }
            var entry = Entry(
                id: id, from: sender, fromName: String(name.prefix(Self.maxText)), key: key, items: items,
                created: now, lastOffered: now)
            entry.address = address
            entry.trusted = trusted
            entry.more = count > items.count ? count - items.count : nil
            book.entries.append(entry)
            created = entry
            return .hold(Self.held(entry, localName: localName))
        }
        if let created { announce(created, paths) }
        return decision
    }

    static func held(_ entry: Entry, localName: String) -> OfferHeld {
        OfferHeld(
            id: entry.id,
            message:
                "waiting for \(localName) to accept (there: share accept \(entry.id), or share decline \(entry.id))",
            retryAfter: 5)
    }

    /// Removes the unanswered offer `key` (its sender went away: no answer can reach it).
    package static func forget(key: String, paths: DevicePaths) {
        _ = try? update(paths) { book, directory in
            for entry in book.entries where entry.key == key && entry.answer == nil {
                Self.removeImages(of: entry, in: directory)
            }
            book.entries.removeAll { $0.key == key && $0.answer == nil }
        }
    }

    /// Removes the unanswered offers of `device` (no longer trusted: it cannot come back for an answer); how many.
    @discardableResult
    package static func forget(from device: DeviceID, paths: DevicePaths) -> Int {
        (try? update(paths) { book, directory -> Int in
            let gone = book.entries.filter { $0.from == device.description && $0.answer == nil }
            for entry in gone { Self.removeImages(of: entry, in: directory) }
            book.entries.removeAll { $0.from == device.description && $0.answer == nil }
            return gone.count
        }) ?? 0
    }

    /// Records the user's answer; returns the entry, nil when there is no such pending offer.
    package static func answer(_ id: String, _ answer: Answer, reason: String? = nil, paths: DevicePaths) throws
        -> Entry?
    {
        try update(paths) { book, _ in
            guard let index = book.entries.firstIndex(where: { $0.id == id.lowercased() }) else { return nil }
            book.entries[index].answer = answer
            book.entries[index].reason = reason
            return book.entries[index]
        }
    }

    /// A type as a person reads it: its description ("MPEG-4 movie"), or for a type this device does not know, the
    /// file's extension ("GPX file").
    package static func kind(of contentType: String, label: String) -> String {
        if let type = UTType(contentType), !type.isDynamic, let description = type.localizedDescription {
            return description
        }
        let ext = PathText.pathExtension(label)
        return ext.isEmpty || ext.count > 16 ? "a file of an unknown type" : "\(ext.uppercased()) file"
    }

    /// One line per item: `holiday.mov — MPEG-4 movie, 1.2 GiB`.
    package static func describe(_ item: Item) -> String {
        let size = item.size.map { ", " + ProgressReporter.bytes($0) } ?? ""
        return "\(item.title) — \(item.kind)\(size)"
    }
}
