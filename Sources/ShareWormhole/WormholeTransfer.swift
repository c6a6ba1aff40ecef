import FoundationEssentials
import ShareText
import Glibc
import ShareArchive
import ShareDisk
import ShareTrust
import ShareTLS

/// What a `wormhole send` offers (its file-transfer protocol): a text, a file, or a folder sent as a zip file.
public enum WormholeOffer: Sendable, Equatable {
    case text(String)
    case file(name: String, size: UInt64)
    case directory(name: String, zipSize: UInt64, bytes: UInt64, files: Int)

    /// Reads the `offer` object; anything else is refused.
    public init(parsing offer: [String: Any]) throws(WormholeError) {
        func number(_ value: Any?) -> UInt64? {
            switch value {
            case let int as Int where int >= 0: return UInt64(int)
            case let double as Double where double >= 0 && double < 1.8e19 && double == double.rounded():
                return UInt64(double)
            default: return nil
            }
        }
        if let message = offer["message"] as? String {
            self = .text(message)
        } else if let file = offer["file"] as? [String: Any], let name = file["filename"] as? String,
            let size = number(file["filesize"])
        {
            self = .file(name: name, size: size)
        } else if let folder = offer["directory"] as? [String: Any], let name = folder["dirname"] as? String,
            let zipSize = number(folder["zipsize"])
        {
            guard folder["mode"] as? String == "zipfile/deflated" else {
                throw WormholeError(
                    .refused, "the other side offers a folder packed as '\(folder["mode"] ?? "?")', not a zip file")
            }
            self = .directory(
                name: name, zipSize: zipSize, bytes: number(folder["numbytes"]) ?? 0,
                files: Int(number(folder["numfiles"]) ?? 0))
        } else {
            throw WormholeError(.badMessage, "the other side's offer is neither a text, a file nor a folder")
        }
    }

    /// The `offer` object.
    public var json: [String: Any] {
        switch self {
        case .text(let text): return ["message": text]
        case .file(let name, let size): return ["file": ["filename": name, "filesize": size]]
        case .directory(let name, let zipSize, let bytes, let files):
            return [
                "directory": [
                    "mode": "zipfile/deflated", "dirname": name, "zipsize": zipSize, "numbytes": bytes,
                    "numfiles": files,
                ]
            ]
        }
    }

    /// One line for a person: "a text (12 bytes)", "holiday.mov (1.2 GB)".
    public var summary: String {
        switch self {
        case .text(let text): return "a text of \(text.utf8.count) bytes"
        case .file(let name, let size): return "the file '\(name)' (\(Self.bytes(size)))"
        case .directory(let name, _, let bytes, let files):
            return "the folder '\(name)' (\(files) files, \(Self.bytes(bytes)))"
        }
    }

    /// The bytes that travel on the transit connection.
    public var transferSize: UInt64 {
        switch self {
        case .text: return 0
        case .file(_, let size): return size
        case .directory(_, let zipSize, _, _): return zipSize
        }
    }

    static func bytes(_ count: UInt64) -> String { Format.bytes(count) }
}

/// How the transfer part of an exchange runs.
public struct WormholeTransferOptions: Sendable {
    /// The transit relay the `wormhole` command uses by default.
    public static let publicRelay = TransitHint(host: "transit.magic-wormhole.io", port: 4001)

    public var relays = [publicRelay]
    /// Accept direct connections (else only the other side's direct hints and the relays are used).
    public var listen = true
    /// The addresses advertised for direct connections (nil: this machine's).
    public var addresses: [String]?
    /// How long the transit race may take.
    public var connectTimeout: Double = 60
    /// How long the transfer may stall.
    public var stallTimeout: Double = 60
    /// Bytes per record sent: 16 KiB, as the reference sends them (any size is read; its receiver gathers a record
    /// in one buffer, so records no larger than a socket read suit it best).
    public var recordSize = 16 << 10
    public var progress: (@Sendable (_ done: UInt64, _ total: UInt64) -> Void)?
    /// Receiving: the largest item taken (a file's size, a folder's bytes, counted again as they are unpacked).
    public var maxSize: UInt64?
    /// Receiving: why an offer is refused before anything moves (the receiver's accept list), nil to take it.
    public var refuse: (@Sendable (WormholeOffer) -> String?)?

    public init() {}
}

/// What an exchange moved.
public struct WormholeTransferReport: Sendable {
    public var offer: WormholeOffer
    /// Where a received file or folder now is.
    public var saved: URL?
    public var bytes: UInt64 = 0
    public var seconds: Double = 0
    /// `direct to HOST:PORT`, `via relay HOST:PORT`, or nil for a text.
    public var route: String?
    /// What was really written: files and their bytes (a folder's, counted as unpacked; not the sender's numbers).
    public var written: (files: Int, bytes: UInt64)?

    /// One line for a person, from what was written when something was.
    public var summary: String {
        guard let written, case .directory(let name, _, _, _) = offer else { return offer.summary }
        return "the folder '\(name)' (\(written.files) files, \(WormholeOffer.bytes(written.bytes)))"
    }
}

/// The transit key's purpose. The reference derives it with this application id whatever `--appid` says (its bug
/// 339), so every client does.
let transitKeyPurpose = "lothar.com/wormhole/text-or-file-xfer/transit-key"

/// The sending side of the file-transfer protocol.
public enum WormholeSender {
    /// What is sent: a text, a file, or a folder (zipped first, as the reference does).
    public enum Item: Sendable {
        case text(String)
        case file(URL)
        case directory(URL)
    }

    /// Offers `item` on an established session and sends it once the other side accepts.
    public static func send(_ item: Item, over session: WormholeSession, options: WormholeTransferOptions)
        throws(WormholeError) -> WormholeTransferReport
    {
        var spooled: URL?
        defer { if let spooled { PathOperations.removeIfPresent(spooled.path) } }
        let offer: WormholeOffer
        var source: URL?
        switch item {
        case .text(let text):
            offer = .text(text)
        case .file(let url):
            var info = stat()
            guard stat(url.path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
                throw WormholeError(.disk, "\(url.path): not a readable file")
            }
            offer = .file(name: url.lastPathComponent, size: UInt64(info.st_size))
            source = url
        case .directory(let url):
            let (zip, files, bytes) = try zipFolder(url)
            spooled = zip
            var info = stat()
            _ = stat(zip.path, &info)
            offer = .directory(name: url.lastPathComponent, zipSize: UInt64(info.st_size), bytes: bytes, files: files)
            source = zip
        }
        var transit: Transit?
        if source != nil {
            let made = Transit(
                role: .sender, relays: options.relays, listen: options.listen, addresses: options.addresses)
            transit = made
            try session.send(["transit": ["abilities-v1": Transit.abilities, "hints-v1": made.hints]])
        }
        try session.send(["offer": offer.json])
        var report = WormholeTransferReport(offer: offer)
        while true {
            let message = try session.receive()
            if let hints = message["transit"] as? [String: Any] {
                transit?.add(theirHints: hints["hints-v1"] as? [Any] ?? [])
            }
            guard let answer = message["answer"] as? [String: Any] else { continue }
            switch offer {
            case .text:
                guard answer["message_ack"] as? String == "ok" else {
                    throw WormholeError(.refused, "the other side did not take the text")
                }
                return report
            case .file, .directory:
                guard answer["file_ack"] as? String == "ok", let transit, let source else {
                    throw WormholeError(.refused, "the other side declined \(offer.summary)")
                }
                let start = ContinuousClock.now
                let connection = try transit.connect(
                    key: session.derivedKey(purpose: transitKeyPurpose), timeout: options.connectTimeout)
                connection.setTimeout(options.stallTimeout)
                report.route = connection.route
                report.bytes = try stream(source, size: offer.transferSize, to: connection, options: options)
                report.seconds = (ContinuousClock.now - start).seconds
                return report
            }
        }
    }

    /// Streams the file in records, then checks the receiver's acknowledgement and digest.
    private static func stream(
        _ url: URL, size: UInt64, to connection: TransitConnection, options: WormholeTransferOptions
    ) throws(WormholeError) -> UInt64 {
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw WormholeError(.disk, "\(url.path): cannot read it") }
        defer { Glibc.close(fd) }
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL)
        let hasher = SHA256Hasher()
        var buffer = [UInt8](repeating: 0, count: options.recordSize)
        var sent: UInt64 = 0
        while sent < size {
            let want = Int(min(UInt64(buffer.count), size - sent))
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, want) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw WormholeError(.disk, "\(url.path) changed while it was sent (it is shorter)") }
            let failure = buffer.withUnsafeBytes { raw -> WormholeError? in
                let part = UnsafeRawBufferPointer(rebasing: raw[0..<n])
                hasher.update(part)
                do {
                    try connection.send(part)
                    return nil
                } catch {
                    return error as? WormholeError ?? WormholeError(.transit, "\(error)")
                }
            }
            if let failure { throw failure }
            sent += UInt64(n)
            options.progress?(sent, size)
        }
        let record = try connection.receive(limit: 64 << 10)
        connection.close()
        guard let ack = JSONText.object(record) else {
            throw WormholeError(.badMessage, "the other side's acknowledgement is not JSON")
        }
        guard ack["ack"] as? String == "ok" else {
            throw WormholeError(.refused, "the other side did not confirm the transfer (\(ack["ack"] ?? "no answer"))")
        }
        if let theirs = ack["sha256"] as? String, theirs != Hex.string(hasher.finalize()) {
            throw WormholeError(.hostile, "the other side received different bytes (SHA-256 differs)")
        }
        return sent
    }

    /// Packs a folder as the reference does: a deflated zip, paths relative to the folder.
    static func zipFolder(_ folder: URL) throws(WormholeError) -> (URL, Int, UInt64) {
        let zip = FileManager.default.temporaryDirectory.appendingPathComponent(
            "share-wormhole-\(Hex.string(Sodium.randomBytes(8))).zip")
        do {
            let plan = try ArchivePlan.folder(folder, measure: false)
            let entries = plan.entries.filter { $0.path != "./" }
            let writer = try ArchiveWriter(file: zip.path, format: .zip)
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
            defer { buffer.deallocate() }
            try ArchivePlan(entries: entries).write(to: writer, buffer: buffer)
            let files = entries.filter { $0.kind == .file }
            _ = chmod(zip.path, 0o600)
            return (zip, files.count, files.reduce(0) { $0 + $1.size })
        } catch {
            PathOperations.removeIfPresent(zip.path)
            throw WormholeError(.disk, "cannot pack \(folder.path): \(error)")
        }
    }
}

/// The receiving side of the file-transfer protocol. Everything lands through the directory-handle layer: the
/// sender's name is made one safe component (its path never chooses where anything lands), an existing name gets
/// "name (2)", the bytes are counted as they arrive against the offer, the free space is checked first, and a
/// folder's zip is inspected (names, links, entry count, expansion) before its first file is written.
public enum WormholeReceiver {
    public enum Decision: Sendable {
        case accept
        case decline(String)
    }

    /// Waits for the offer, asks `decide`, and receives into `folder`. A text is returned in the report's offer.
    public static func receive(
        over session: WormholeSession, into folder: Directory, folderURL: URL, options: WormholeTransferOptions,
        decide: (WormholeOffer) -> Decision
    ) throws(WormholeError) -> WormholeTransferReport {
        var transit: Transit?
        while true {
            let message = try session.receive()
            if let hints = message["transit"] as? [String: Any] {
                if transit == nil {
                    let made = Transit(
                        role: .receiver, relays: options.relays, listen: options.listen, addresses: options.addresses)
                    transit = made
                    try session.send(["transit": ["abilities-v1": Transit.abilities, "hints-v1": made.hints]])
                }
                transit?.add(theirHints: hints["hints-v1"] as? [Any] ?? [])
            }
            guard let offerObject = message["offer"] as? [String: Any] else { continue }
            let offer: WormholeOffer
            do {
                offer = try WormholeOffer(parsing: offerObject)
            } catch {
                try? session.send(["error": error.message])
                throw error
            }
            // The receiver's own rules first, on the sender's description; the bytes are held to them again as
            // they arrive and are unpacked.
            var refusal = options.refuse?(offer)
            if refusal == nil, let max = options.maxSize {
                switch offer {
                case .file(_, let size) where size > max:
                    refusal = "\(offer.summary) is over this receiver's limit of \(WormholeOffer.bytes(max))"
                case .directory(_, _, let bytes, _) where bytes > max:
                    refusal = "\(offer.summary) is over this receiver's limit of \(WormholeOffer.bytes(max))"
                default: break
                }
            }
            if let refusal {
                try? session.send(["error": "transfer rejected: \(refusal)"])
                throw WormholeError(.refused, refusal)
            }
            if case .decline(let reason) = decide(offer) {
                try? session.send(["error": "transfer rejected: \(reason)"])
                throw WormholeError(.refused, "declined \(offer.summary)")
            }
            var report = WormholeTransferReport(offer: offer)
            if case .text = offer {
                try session.send(["answer": ["message_ack": "ok"]])
                return report
            }
            guard let transit else {
                try? session.send(["error": "no transit information"])
                throw WormholeError(.badMessage, "the other side offered a file without a way to send it")
            }
            let size = offer.transferSize
            if let free = folder.freeSpace, free < size &+ (16 << 20) {
                let reason = "not enough space: \(WormholeOffer.bytes(size)) offered, \(WormholeOffer.bytes(free)) free"
                try? session.send(["error": reason])
                throw WormholeError(.disk, "\(reason) in \(folderURL.path); free some space and ask for it again")
            }
            try session.send(["answer": ["file_ack": "ok"]])
            let start = ContinuousClock.now
            let connection = try transit.connect(
                key: session.derivedKey(purpose: transitKeyPurpose), timeout: options.connectTimeout)
            connection.setTimeout(options.stallTimeout)
            report.route = connection.route
            let partial = ".share-wormhole-\(Hex.string(Sodium.randomBytes(6))).partial"
            defer { _ = try? folder.remove(partial) }
            let digest = try spool(connection, size: size, into: folder, name: partial, options: options)
            switch offer {
            case .text:
                break
            case .file(let name, _):
                let safe = FileNamesOnDisk.sanitize(name, fallback: "received")
                let final = folder.freeName(for: safe)
                do {
                    try folder.rename(partial, to: final, in: folder)
                } catch {
                    throw WormholeError(.disk, "cannot save \(final) in \(folderURL.path): \(error)")
                }
                report.saved = folderURL.appendingPathComponent(final)
            case .file:
                report.written = (1, size)
            case .directory(let name, _, let bytes, let files):
                let (saved, written) = try unpack(
                    partial, in: folder, folderURL: folderURL, name: name,
                    limits: (bytes: min(bytes, options.maxSize ?? .max), files: files))
                report.saved = saved
                report.written = written
            }
            try connection.send(
                Array(#"{"ack": "ok", "sha256": "\#(Hex.string(digest))"}"#.utf8))
            connection.close()
            report.bytes = size
            report.seconds = (ContinuousClock.now - start).seconds
            return report
        }
    }

    /// Writes exactly `size` bytes of records into a new private file; more or fewer is the sender lying.
    private static func spool(
        _ connection: TransitConnection, size: UInt64, into folder: Directory, name: String,
        options: WormholeTransferOptions
    ) throws(WormholeError) -> [UInt8] {
        let file: OpenFile
        do {
            file = try folder.openFile(name, .create, mode: 0o600)
        } catch {
            throw WormholeError(.disk, "cannot write in the receiving folder: \(error)")
        }
        defer { file.close() }
        let hasher = SHA256Hasher()
        var received: UInt64 = 0
        while received < size {
            let offset = received
            received += try connection.receive(limit: 16 << 20) { (record) throws(WormholeError) -> UInt64 in
                // An empty record moves nothing: a sender that keeps sending them would hold the receiver forever.
                guard !record.isEmpty else {
                    throw WormholeError(.hostile, "the other side sent an empty record; the transfer was stopped")
                }
                guard UInt64(record.count) <= size - offset else {
                    throw WormholeError(
                        .hostile, "the other side sent more than the \(size) bytes it offered; the transfer was stopped"
                    )
                }
                hasher.update(record)
                do {
                    try file.write(record, at: offset)
                } catch {
                    throw WormholeError(.disk, "cannot write the received bytes: \(error)")
                }
                return UInt64(record.count)
            }
            options.progress?(received, size)
        }
        return hasher.finalize()
    }

    /// Inspects the zip (every rule that needs no disk), then extracts it into a new folder named after the offer.
    /// `limits`: the bytes and files the folder may hold (what its sender offered, within the receiver's limits): a
    /// zip that holds more is a lie about the folder, refused before anything lands.
    private static func unpack(
        _ zip: String, in folder: Directory, folderURL: URL, name: String, limits: (bytes: UInt64, files: Int)
    ) throws(WormholeError) -> (URL, (files: Int, bytes: UInt64)) {
        let zipURL = folderURL.appendingPathComponent(zip)
        var policy = ExtractionPolicy()
        policy.maxTotalBytes = limits.bytes
        if let free = folder.freeSpace {
            policy.maxTotalBytes = min(policy.maxTotalBytes, free > (16 << 20) ? free - (16 << 20) : 0)
        }
        policy.maxEntries = 100_000
        policy.maxFiles = limits.files
        let inventory: (entries: Int, bytes: UInt64, files: Int)
        do {
            inventory = try Extractor.inspect(file: zipURL, policy: policy)
        } catch {
            throw WormholeError(.hostile, "the folder's zip file was refused: \(error)")
        }
        let safe = FileNamesOnDisk.sanitize(name, fallback: "received")
        let final = folder.freeName(for: safe)
        do {
            let root = try folder.directory(final, create: true, mode: 0o755)
            try Extractor(root: root, policy: policy).run(try ArchiveReader(file: zipURL.path))
        } catch {
            _ = try? folder.removeTree(final)
            throw WormholeError(.hostile, "the folder's zip file was refused: \(error)")
        }
        return (folderURL.appendingPathComponent(final), (inventory.files, inventory.bytes))
    }
}
