import Foundation
import ShareDisk
import ShareTestSupport
import Testing

@testable import ShareWormhole

/// Hostile magic-wormhole senders against share's receiving side (through a local mailbox server): each gets a
/// refusal, and nothing it sent is left in the receiving folder.
@Suite(.serialized) struct HostileWormholeTests {
    let servers: LocalWormholeServers
    let scratch: URL

    init() throws {
        servers = try LocalWormholeServers()
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("wormhole-hostile-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    var options: WormholeOptions {
        var options = WormholeOptions()
        options.server = servers.mailboxURL
        options.lifetime = 30
        return options
    }

    func transfer() -> WormholeTransferOptions {
        var transfer = WormholeTransferOptions()
        transfer.relays = []
        transfer.addresses = ["127.0.0.1"]
        transfer.connectTimeout = 10
        transfer.stallTimeout = 2
        return transfer
    }

    /// Runs share's receiver against a sender that offers `offer` and then calls `send` on the transit connection.
    func receive(
        offer: [String: Any], send: @escaping @Sendable (TransitConnection) throws -> Void,
        transfer given: WormholeTransferOptions? = nil
    ) throws -> (Result<WormholeTransferReport, WormholeError>, URL) {
        let inbox = scratch.appendingPathComponent("inbox-\(UUID().uuidString.prefix(6))")
        let sender = try WormholeSession.allocate(options: options)
        defer { sender.close(mood: "errory") }
        let code = sender.code
        let options = self.options
        let transfer = given ?? self.transfer()
        let box = ResultBox()
        let thread = Thread {
            box.set(
                Result { () throws(WormholeError) -> WormholeTransferReport in
                    let session = try WormholeSession.join(code, options: options)
                    defer { session.close(mood: "errory") }
                    try session.establish()
                    let folder: Directory
                    do {
                        folder = try Directory.open(inbox.path, create: true)
                    } catch {
                        throw WormholeError(.disk, "\(error)")
                    }
                    return try WormholeReceiver.receive(
                        over: session, into: folder, folderURL: inbox, options: transfer, decide: { _ in .accept })
                })
        }
        thread.start()
        try sender.establish()
        let transit = Transit(role: .sender, relays: [], listen: false)
        try sender.send(["transit": ["abilities-v1": Transit.abilities, "hints-v1": transit.hints]])
        try sender.send(["offer": offer])
        var answered = false
        while !answered {
            // A refusal comes as an `error` message, thrown here: the receiver's result tells the rest.
            guard let message = try? sender.receive() else {
                return (try #require(box.wait(timeout: 30)), inbox)
            }
            if let hints = message["transit"] as? [String: Any] {
                transit.add(theirHints: hints["hints-v1"] as? [Any] ?? [])
            }
            answered = message["answer"] != nil
        }
        let connection = try transit.connect(key: sender.derivedKey(purpose: transitKeyPurpose), timeout: 10)
        try? send(connection)
        let result = try #require(box.wait(timeout: 30))
        connection.close()
        return (result, inbox)
    }

    final class ResultBox: @unchecked Sendable {
        private let condition = NSCondition()
        private var result: Result<WormholeTransferReport, WormholeError>?
        func set(_ value: Result<WormholeTransferReport, WormholeError>) {
            condition.lock()
            result = value
            condition.broadcast()
            condition.unlock()
        }
        func wait(timeout: Double) -> Result<WormholeTransferReport, WormholeError>? {
            let deadline = Date().addingTimeInterval(timeout)
            condition.lock()
            defer { condition.unlock() }
            while result == nil, condition.wait(until: deadline) {}
            return result
        }
    }

    func contents(_ folder: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).sorted()
    }

    /// A zip file made by Python's zipfile module with exactly these entries (names unchecked, as an attacker
    /// writes them); `links` become symbolic links.
    func zip(_ entries: [String: String], links: [String: String] = [:], zeros: Int = 0) throws -> [UInt8] {
        let url = scratch.appendingPathComponent("hostile-\(UUID().uuidString.prefix(6)).zip")
        let script = """
            import sys, json, zipfile, stat
            entries, links, zeros = json.loads(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4])
            with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
                for name, text in entries.items():
                    z.writestr(zipfile.ZipInfo(name), text)
                for name, target in links.items():
                    info = zipfile.ZipInfo(name)
                    info.external_attr = (stat.S_IFLNK | 0o777) << 16
                    z.writestr(info, target)
                if zeros:
                    z.writestr("zeros.bin", b"\\0" * zeros, compress_type=zipfile.ZIP_DEFLATED)
            """
        let entriesJSON = String(decoding: try JSONSerialization.data(withJSONObject: entries), as: UTF8.self)
        let linksJSON = String(decoding: try JSONSerialization.data(withJSONObject: links), as: UTF8.self)
        let (status, output) = try run(
            "/usr/bin/python3", ["-c", script, url.path, entriesJSON, linksJSON, String(zeros)])
        #expect(status == 0, "\(output)")
        return Array(try Data(contentsOf: url))
    }

    func records(_ bytes: [UInt8]) -> @Sendable (TransitConnection) throws -> Void {
        { connection in
            var offset = 0
            while offset < bytes.count {
                let end = min(bytes.count, offset + (64 << 10))
                try connection.send(Array(bytes[offset..<end]))
                offset = end
            }
        }
    }

    @Test(arguments: [
        ["../escaped.txt": "x"], ["/tmp/absolute-\(UInt32.random(in: 0...UInt32.max)).txt": "x"],
        ["ok.txt": "fine", "sub/../../escaped.txt": "x"],
    ])
    func aFolderWhoseNamesClimbOutIsRefused(_ entries: [String: String]) throws {
        let bytes = try zip(entries)
        let offer: [String: Any] = [
            "directory": [
                "mode": "zipfile/deflated", "dirname": "Holiday", "zipsize": bytes.count, "numbytes": 10,
                "numfiles": entries.count,
            ]
        ]
        let (result, inbox) = try receive(offer: offer, send: records(bytes))
        #expect(throws: WormholeError.self) { try result.get() }
        #expect(contents(inbox).isEmpty, "\(contents(inbox))")
        #expect(!FileManager.default.fileExists(atPath: scratch.deletingLastPathComponent().path + "/escaped.txt"))
        for name in entries.keys where name.hasPrefix("/") { #expect(!FileManager.default.fileExists(atPath: name)) }
    }

    @Test func aFolderWithALinkLeavingItIsRefused() throws {
        let bytes = try zip(["a.txt": "a"], links: ["passwd": "/etc/passwd", "up": "../../outside"])
        let offer: [String: Any] = [
            "directory": [
                "mode": "zipfile/deflated", "dirname": "Links", "zipsize": bytes.count, "numbytes": 1, "numfiles": 3,
            ]
        ]
        let (result, inbox) = try receive(offer: offer, send: records(bytes))
        #expect(throws: WormholeError.self) { try result.get() }
        #expect(contents(inbox).isEmpty, "\(contents(inbox))")
    }

    /// A folder offer that says 100 bytes in 2 files and holds a 20 MiB file, or 600 files: refused as the zip is
    /// inspected, on what it holds, before anything lands (both were unpacked whole, "2 files, 10 bytes" printed).
    @Test(arguments: ["bytes", "files"])
    func aFolderOfferThatLiesIsRefusedOnWhatItHolds(_ lie: String) throws {
        var entries: [String: String] = [:]
        if lie == "files" { for index in 0..<600 { entries["f\(index).txt"] = "x" } }
        let bytes = try zip(entries.isEmpty ? ["a.txt": "a"] : entries, zeros: lie == "bytes" ? 20 << 20 : 0)
        let offer: [String: Any] = [
            "directory": [
                "mode": "zipfile/deflated", "dirname": "Small", "zipsize": bytes.count, "numbytes": 100,
                "numfiles": 2,
            ]
        ]
        let (result, inbox) = try receive(offer: offer, send: records(bytes))
        #expect(throws: WormholeError.self) { try result.get() }
        #expect(contents(inbox).isEmpty, "\(contents(inbox))")
    }

    /// The receiver's own limits apply to what a wormhole client offers: its largest item, and the types it takes.
    @Test func theReceiversLimitsApplyToAWormholeOffer() throws {
        var limited = transfer()
        limited.maxSize = 3
        let (tooLarge, inbox) = try receive(
            offer: ["file": ["filename": "six.txt", "filesize": 6]], send: records(Array("sixsix".utf8)),
            transfer: limited)
        #expect(throws: WormholeError.self) { try tooLarge.get() }
        #expect(contents(inbox).isEmpty, "\(contents(inbox))")
        var picky = transfer()
        picky.refuse = { offer in
            if case .file(let name, _) = offer, !name.hasSuffix(".png") { return "this receiver takes only images" }
            return nil
        }
        let (refused, second) = try receive(
            offer: ["file": ["filename": "notes.txt", "filesize": 5]], send: records(Array("notes".utf8)),
            transfer: picky)
        #expect(throws: WormholeError.self) { try refused.get() }
        #expect(contents(second).isEmpty, "\(contents(second))")
    }

    @Test func aZipBombIsRefusedBeforeItsFirstFileLands() throws {
        // 300 MiB of zeros in a few hundred KiB: past the expansion limit (200x, at least 64 MiB).
        let bytes = try zip(["readme.txt": "hi"], zeros: 300 << 20)
        #expect(bytes.count < 2 << 20)
        let offer: [String: Any] = [
            "directory": [
                "mode": "zipfile/deflated", "dirname": "Bomb", "zipsize": bytes.count, "numbytes": 1, "numfiles": 2,
            ]
        ]
        let (result, inbox) = try receive(offer: offer, send: records(bytes))
        #expect(throws: WormholeError.self) { try result.get() }
        #expect(contents(inbox).isEmpty, "\(contents(inbox))")
    }

    @Test func aSizeThatLiesIsRefused() throws {
        let bytes = [UInt8](repeating: 7, count: 3000)
        let (result, inbox) = try receive(
            offer: ["file": ["filename": "small.txt", "filesize": 1000]], send: records(bytes))
        #expect(throws: WormholeError.self) { try result.get() }
        if case .failure(let error) = result { #expect(error.code == .hostile, "\(error)") }
        #expect(contents(inbox).isEmpty, "\(contents(inbox))")
    }

    /// Records that carry nothing never end the transfer and never stall it: they are refused at the first one.
    @Test func emptyRecordsAreRefused() throws {
        let (result, inbox) = try receive(offer: ["file": ["filename": "empty.bin", "filesize": 1 << 20]]) {
            connection in
            for _ in 0..<10_000 { try connection.send([UInt8]()) }
        }
        #expect(throws: WormholeError.self) { try result.get() }
        if case .failure(let error) = result { #expect(error.code == .hostile, "\(error)") }
        #expect(contents(inbox).isEmpty, "\(contents(inbox))")
    }

    @Test func aStalledTransferEndsAndLeavesNothing() throws {
        let (result, inbox) = try receive(offer: ["file": ["filename": "slow.bin", "filesize": 1 << 20]]) {
            connection in
            try connection.send([UInt8](repeating: 1, count: 1000))
            // Then nothing: the receiver's stall timeout (2 s here) ends it.
        }
        #expect(throws: WormholeError.self) { try result.get() }
        #expect(contents(inbox).isEmpty, "\(contents(inbox))")
    }

    @Test func aSendersPathNeverChoosesWhereTheFileLands() throws {
        let bytes = Array("payload".utf8)
        let (result, inbox) = try receive(
            offer: ["file": ["filename": "../../.bashrc", "filesize": bytes.count]], send: records(bytes))
        let report = try result.get()
        let saved = try #require(report.saved)
        #expect(saved.deletingLastPathComponent().standardizedFileURL.path == inbox.standardizedFileURL.path)
        #expect(contents(inbox).count == 1, "\(contents(inbox))")
        #expect(!saved.lastPathComponent.contains("/") && !saved.lastPathComponent.hasPrefix("."), "\(saved)")
    }
}

/// A man in the middle at the mailbox gets one guess per attempt: with a test-only code of one word out of four,
/// an attacker who joins the nameplate before the real receiver succeeds about once in four attempts, and every
/// failure is seen by the honest side as a wrong code (so the user starts again with a new code).
@Suite(.serialized) struct WeakCodeAttackTests {
    @Test func theAttackersSuccessRateIsOneGuessPerAttempt() throws {
        let servers = try LocalWormholeServers()
        defer { servers.stop() }
        var options = WormholeOptions()
        options.server = servers.mailboxURL
        options.lifetime = 20
        let words = ["aardvark", "absurd", "accrue", "acme"]
        let attempts = 120
        var successes = 0
        var honestSawWrongCode = 0
        for attempt in 0..<attempts {
            let nameplate = String(100 + attempt)
            let secret = WormholeCode(nameplate: nameplate, words: [words.randomElement()!])
            let guess = WormholeCode(nameplate: nameplate, words: [words.randomElement()!])
            // Used by the establishing thread, then closed here once its outcome is in.
            nonisolated(unsafe) let honest = try WormholeSession.join(secret, options: options)
            let outcome = Outcome()
            let thread = Thread {
                do {
                    try honest.establish()
                    outcome.set(nil)
                } catch {
                    outcome.set(error)
                }
            }
            thread.start()
            let attacker = try WormholeSession.join(guess, options: options)
            let attackerWon = (try? attacker.establish()) != nil
            let honestError = try #require(outcome.wait(timeout: 20))
            if attackerWon { successes += 1 }
            if case .some(let error) = honestError, error.code == .wrongCode { honestSawWrongCode += 1 }
            #expect(attackerWon == (secret == guess))
            attacker.close(mood: attackerWon ? "happy" : "scary")
            honest.close(mood: "happy")
        }
        // One guess in four per attempt: 30 expected; the bounds are over four standard deviations wide.
        #expect((12...50).contains(successes), "\(successes) of \(attempts)")
        #expect(successes + honestSawWrongCode == attempts)
        print("weak-code attacker: \(successes) of \(attempts) attempts succeeded (1 in 4 expected)")
    }

    final class Outcome: @unchecked Sendable {
        private let condition = NSCondition()
        private var value: WormholeError??
        func set(_ error: Error?) {
            condition.lock()
            value = .some(error.map { $0 as? WormholeError ?? WormholeError(.badMessage, "\($0)") })
            condition.broadcast()
            condition.unlock()
        }
        func wait(timeout: Double) -> WormholeError?? {
            let deadline = Date().addingTimeInterval(timeout)
            condition.lock()
            defer { condition.unlock() }
            while value == nil, condition.wait(until: deadline) {}
            return value
        }
    }
}
