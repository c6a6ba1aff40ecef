import Foundation
import ShareNet
import ShareProtocol
import ShareReach
import ShareTestSupport
import ShareTrust
import Synchronization
import Testing

/// One of the owner's devices (trusted as team) that speaks the folder protocol by hand, to break its rules: a real
/// agent shares a folder with it, and it opens the folder link itself (the agent has no address of it, so the agent
/// asks over the link and it brings files in sessions of its own, as a device behind NAT does).
final class HandFolderPeer: Sendable {
    let device: LocalDevice
    let trust: TrustStore
    let target: PeerTarget
    /// The short ID its versions carry.
    static let counter: UInt64 = 0x4854_4f53_5449_4c45

    init(_ test: TestDevice, port: Int) throws {
        device = try LocalDevice.loadOrCreate(paths: DevicePaths.resolve(configOverride: test.config.path))
        trust = try TrustStore.load(device.paths.trustFile)
        target = try PeerTarget.resolve("127.0.0.1:\(port)", trust: trust)
    }

    func session() throws -> Session {
        try Reach.connect(
            from: device, to: target, trust: trust,
            hello: Hello(name: device.name, role: .agent, features: [FolderPull.binaryFeature]),
            timeouts: SessionTimeouts(connect: 5, handshake: 10, idle: Patience.seconds(30)), settings: ReachSettings())
    }

    /// A folder link announcing `folder` with an index of `sequence` entries; the agent's hello has come back.
    func link(_ folder: String, devices: [String], sequence: UInt64) throws -> Session {
        let session = try session()
        let announcement = FolderAnnouncement(
            id: folder, label: "docs", type: "send-receive", devices: devices, indexID: "ba5e", sequence: sequence,
            heldIndexID: "", heldSequence: 0)
        try session.connection.send(MessageCoding.frame(.folderHello, FolderHello(folders: [announcement])))
        _ = try next(on: session) { $0 == .folderHello }
        return session
    }

    /// The next frame of `types` on `session`, answering pings and passing over the agent's index updates; an error
    /// frame is thrown.
    func next(on session: Session, _ wanted: (FrameType) -> Bool) throws -> Frame {
        // Bounded: each receive by the session's idle timeout, and at most this many frames passed over.
        for _ in 0..<10_000 {
            let frame = try session.connection.receive()
            if wanted(frame.type) { return frame }
            switch frame.type {
            case .ping: try session.connection.send(Frame(type: .pong, payload: frame.payload))
            case .error: throw MessageCoding.peerError(from: frame)
            default: continue
            }
        }
        throw ProtocolError(.badMessage, "no such frame came")
    }

    /// Sends entries of this device's index, as the first update of it.
    func announce(_ records: [IndexRecord], of folder: String, on link: Session) throws {
        let update = IndexUpdate(
            folder: folder, indexID: "ba5e", from: 0, to: UInt64(records.count), records: records)
        try link.connection.send(Frame(type: .indexUpdate, payload: Packed.pack(update.encoded(), codec: nil)))
    }

    static func record(_ path: String, _ content: String, sequence: UInt64 = 1) -> IndexRecord {
        let bytes = Array(content.utf8)
        let hasher = chunkHasher(.blake3)
        let digest = bytes.withUnsafeBytes { hasher.digest(hasher.digest($0)) }
        return IndexRecord(
            path: path, kind: 0, deleted: false, size: UInt64(bytes.count), modified: 1_700_000_000_000_000_000,
            mode: 0o644, digest: digest, target: "", sequence: sequence, modifiedBy: counter,
            version: [(counter, 1)])
    }

    /// Brings `files` (ref → bytes) in a session of its own, naming `items` in its push; what the agent answered
    /// (nil: it took them and said goodbye).
    func push(_ folder: String, items: [FolderPull.Item], files: [(String, [UInt8])]) throws -> ProtocolError? {
        let session = try session()
        defer { session.connection.close() }
        try session.connection.send(
            FolderPull(folder: folder, items: items).frame(
                .folderPush, binary: session.peerHello.readsBinaryPulls))
        do {
            let frame = FolderFiles(files: files.map { FolderFiles.File(ref: $0.0, bytes: $0.1) })
            try session.connection.send(Frame(type: .folderFiles, payload: frame.encoded(codec: nil)))
            try session.connection.send(.folderFilesEnd, FolderFilesEnd(more: false))
            let answer = try session.connection.receive()
            return answer.type == .error ? MessageCoding.peerError(from: answer) : nil
        } catch let error as ProtocolError {
            return error
        }
    }
}

extension EndToEndAgents {
    /// A team device that breaks the folder protocol's rules: what it says of its index, and what it brings when
    /// asked for files. Nothing lands outside the folder, nothing it was not asked for lands, no content other than
    /// its index named lands, the person is told, and the agent keeps serving.
    @Suite(.serialized) struct HostileFolderPeerTests {
        /// The desk's agent sharing `docs` (holding keep.txt) with a hand-driven device; the folder's ID.
        func deskSharing() throws -> (TestDevice, BackgroundShare, HandFolderPeer, URL, String, [String]) {
            let desk = try TestDevice("desk")
            let hostile = try TestDevice("hostile")
            desk.trust(hostile, flags: ["--team"])
            let docs = try desk.folder("docs")
            try Data("kept\n".utf8).write(to: docs.appendingPathComponent("keep.txt"))
            let (agent, port) = try desk.startAgent(["--no-discovery"])
            hostile.trust(desk, address: "127.0.0.1:\(port)", flags: ["--team"])
            let added = desk.run(["sync", "add", docs.path, "--with", "hostile"])
            #expect(added.status == 0, "\(added.stderr)")
            let line = try #require(added.stderr.split(separator: "\n").first { $0.contains("sharing") })
            let id = String(try #require(line.split(separator: "(").dropFirst().first?.split(separator: ")").first))
            return (desk, agent, try HandFolderPeer(hostile, port: port), docs, id, [desk.id, hostile.id])
        }

        /// Whether the desk's folder is up to date: nothing needed, nothing listed.
        func settled(_ desk: TestDevice) -> Bool {
            let result = desk.run(["sync", "--json"])
            let object = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            guard let folder = (object?["folders"] as? [[String: Any]])?.first else { return false }
            return folder["state"] as? String == "up to date" && (folder["neededFiles"] as? Int) == 0
                && ((folder["problems"] as? [Any]) ?? []).isEmpty
        }

        func problems(_ desk: TestDevice) -> [String: String] {
            let result = desk.run(["sync", "--json"])
            let object = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            let folder = (object?["folders"] as? [[String: Any]])?.first
            var found: [String: String] = [:]
            for problem in (folder?["problems"] as? [[String: Any]]) ?? [] {
                found[problem["path"] as? String ?? "?"] = problem["reason"] as? String
            }
            return found
        }

        /// The desk's agent sharing `docs` with the hand-driven device, which has announced a.txt ("good\n") on its
        /// link and been asked for it.
        func askedForAFile() throws -> (
            desk: TestDevice, agent: BackgroundShare, hostile: HandFolderPeer, docs: URL, id: String, link: Session,
            item: FolderPull.Item
        ) {
            let (desk, agent, hostile, docs, id, devices) = try deskSharing()
            let link = try hostile.link(id, devices: devices, sequence: 1)
            try hostile.announce([HandFolderPeer.record("a.txt", "good\n")], of: id, on: link)
            let ask = try FolderPull.decode(try hostile.next(on: link) { $0 == .folderAsk })
            let item = try #require(ask.items.first { $0.path == "a.txt" })
            return (desk, agent, hostile, docs, id, link, item)
        }

        /// Index entries that name a place outside the folder, or one the folder keeps for itself: the link is
        /// refused with the rule, nothing is made anywhere, and the agent serves the device's next link.
        @Test(arguments: ["../escape.txt", "/tmp/escape.txt", ".share-versions/escape.txt", "a/../../escape.txt"])
        func anIndexEntryOutsideTheFolderEndsTheLink(_ path: String) throws {
            let (desk, agent, hostile, docs, id, devices) = try deskSharing()
            defer { agent.stop() }
            let link = try hostile.link(id, devices: devices, sequence: 1)
            try hostile.announce([HandFolderPeer.record(path, "evil\n")], of: id, on: link)
            #expect(throws: ProtocolError.self) { _ = try hostile.next(on: link) { _ in false } }
            link.connection.close()
            #expect(!FileManager.default.fileExists(atPath: "/tmp/escape.txt") || path != "/tmp/escape.txt")
            #expect(!FileManager.default.fileExists(atPath: desk.directory.appendingPathComponent("escape.txt").path))
            #expect(!FileManager.default.fileExists(atPath: docs.appendingPathComponent("escape.txt").path))
            #expect(
                !FileManager.default.fileExists(atPath: docs.appendingPathComponent(".share-versions/escape.txt").path))
            try servesAFairLinkNext(agent, hostile, id, devices)
        }

        /// The same device's next link, fair this time, is served: its file is asked for.
        func servesAFairLinkNext(_ agent: BackgroundShare, _ hostile: HandFolderPeer, _ id: String, _ devices: [String])
            throws
        {
            let again = try hostile.link(id, devices: devices, sequence: 1)
            defer { again.connection.close() }
            try hostile.announce([HandFolderPeer.record("fair.txt", "fair\n")], of: id, on: again)
            let ask = try FolderPull.decode(try hostile.next(on: again) { $0 == .folderAsk })
            #expect(ask.items.map(\.path) == ["fair.txt"])
            #expect(agent.process.isRunning)
        }

        /// A version whose counter no device could reach (counters follow the clock's seconds), here claimed for
        /// the desk itself over its own file: the link is refused with the rule before anything is asked for, the
        /// file stays, and the agent serves the device's next link (a counter at the top of its range would stop
        /// the agent the next time it raised it).
        @Test func aVersionCounterNoDeviceReachesEndsTheLink() throws {
            let (desk, agent, hostile, docs, id, devices) = try deskSharing()
            defer { agent.stop() }
            let deskDevice = try LocalDevice.loadOrCreate(paths: DevicePaths.resolve(configOverride: desk.config.path))
            let deskShort = deskDevice.id.bytes.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            var record = HandFolderPeer.record("keep.txt", "evil\n")
            record.version = [(deskShort, UInt64.max), (HandFolderPeer.counter, 1)]
            let link = try hostile.link(id, devices: devices, sequence: 1)
            try hostile.announce([record], of: id, on: link)
            #expect(throws: ProtocolError.self) { _ = try hostile.next(on: link) { $0 == .folderAsk } }
            link.connection.close()
            #expect((try? String(contentsOf: docs.appendingPathComponent("keep.txt"), encoding: .utf8)) == "kept\n")
            try servesAFairLinkNext(agent, hostile, id, devices)
        }

        /// An index of more bytes than 64 bits count: 16,400 files of a pebibyte each (the largest item there is).
        /// The desk lists them as needed and keeps serving (its count of bytes needed once went past its range and
        /// stopped the agent).
        @Test func moreBytesThanSixtyFourBitsCountStopNothing() throws {
            let (desk, agent, hostile, _, id, devices) = try deskSharing()
            defer { agent.stop() }
            let link = try hostile.link(id, devices: devices, sequence: 16_400)
            defer { link.connection.close() }
            let records = (0..<16_400).map { n -> IndexRecord in
                var record = HandFolderPeer.record("big/f\(n).bin", "\(n)", sequence: UInt64(n + 1))
                record.size = 1 << 50
                return record
            }
            try hostile.announce(records, of: id, on: link)
            func needed() -> Int? {
                let result = desk.run(["sync", "--json"])
                let object = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
                return (object?["folders"] as? [[String: Any]])?.first?["neededFiles"] as? Int
            }
            #expect(
                waitUntil(timeout: 30) { !agent.process.isRunning || (needed() ?? 0) >= 16_400 },
                "\(String(describing: needed()))")
            #expect(agent.process.isRunning, "\(agent.stderr.text.suffix(2000))")
        }

        /// A holder that brings other content than its index named (a lie, or a disk that rotted): nothing of it
        /// lands, the folder lists the file with why, the holder is asked again, and the right content lands.
        @Test func contentOtherThanTheIndexNamedNeverLandsAndIsListed() throws {
            let (desk, agent, hostile, docs, id, link, item) = try askedForAFile()
            defer { agent.stop() }
            defer { link.connection.close() }
            let refused = try hostile.push(id, items: [item], files: [(item.ref, Array("evil\n".utf8))])
            #expect(refused?.code == .digestMismatch, "\(String(describing: refused))")
            #expect(!FileManager.default.fileExists(atPath: docs.appendingPathComponent("a.txt").path))
            #expect(
                waitUntil(timeout: 10) { problems(desk)["a.txt"]?.contains("hostile") == true },
                "\(problems(desk))\n\(agent.stderr.text)")
            // Asked again (after a moment: a holder that brought nothing waits longer each time), and the content its
            // index names lands.
            let again = try FolderPull.decode(try hostile.next(on: link) { $0 == .folderAsk })
            let second = try #require(again.items.first { $0.path == "a.txt" })
            #expect(try hostile.push(id, items: [second], files: [(second.ref, Array("good\n".utf8))]) == nil)
            #expect(
                waitUntil(timeout: 10) {
                    (try? String(contentsOf: docs.appendingPathComponent("a.txt"), encoding: .utf8)) == "good\n"
                        && problems(desk)["a.txt"] == nil
                }, "\(problems(desk))")
        }

        /// Two sessions of the device racing to bring the same file, one with the content its index named and one
        /// with other bytes: only the named content ever lands, and the folder settles with nothing listed.
        @Test func twoPushesRacingForOneFileLandOnlyTheNamedContent() throws {
            let (desk, agent, hostile, docs, id, link, item) = try askedForAFile()
            defer { agent.stop() }
            defer { link.connection.close() }
            let answers = Mutex<[String: ProtocolError?]>([:])
            let racers = ["good\n", "evil\n"].map { content in
                Thread {
                    let answer = try? hostile.push(id, items: [item], files: [(item.ref, Array(content.utf8))])
                    answers.withLock { $0[content] = answer ?? nil }
                }
            }
            for racer in racers { racer.start() }
            #expect(waitUntil(timeout: 30) { answers.withLock { $0.count } == 2 }, "the pushes did not end")
            let read = { try? String(contentsOf: docs.appendingPathComponent("a.txt"), encoding: .utf8) }
            #expect(read() != "evil\n")
            // The good one lands, or, when the bad one ended the ask first, it was not asked for any more: the file
            // is asked for again, and the named content lands then.
            if answers.withLock({ $0["good\n"] }) != .some(nil) {
                #expect(read() == nil)
                let again = try FolderPull.decode(try hostile.next(on: link) { $0 == .folderAsk })
                let second = try #require(again.items.first { $0.path == "a.txt" })
                #expect(try hostile.push(id, items: [second], files: [(second.ref, Array("good\n".utf8))]) == nil)
            }
            #expect(waitUntil(timeout: 30) { read() == "good\n" && problems(desk).isEmpty }, "\(problems(desk))")
        }

        /// What the agent did not ask for: a file under a ref it never gave (beside one it asked for), a file of
        /// another size than asked, a push with nothing asked at all, a push into a folder not shared with the
        /// device. Each session is refused, and nothing of it lands.
        @Test func filesNotAskedForAreRefused() throws {
            let (desk, agent, hostile, docs, id, link, item) = try askedForAFile()
            defer { agent.stop() }
            defer { link.connection.close() }
            let made = FolderPull.Item(ref: "made-up", path: "b.txt", digest: item.digest, size: 5)
            let before = treeOf(docs)

            let unasked = try hostile.push(
                id, items: [item, made], files: [(item.ref, Array("good\n".utf8)), ("made-up", Array("evil\n".utf8))])
            #expect(unasked?.code == .badMessage, "\(String(describing: unasked))")
            let nothingAsked = try hostile.push(id, items: [made], files: [("made-up", Array("evil\n".utf8))])
            #expect(nothingAsked?.code == .refused, "\(String(describing: nothingAsked))")
            let elsewhere = try hostile.push("not-shared", items: [item], files: [(item.ref, Array("good\n".utf8))])
            #expect(elsewhere?.code == .refused, "\(String(describing: elsewhere))")
            // Asked again: a file longer than asked for.
            let again = try FolderPull.decode(try hostile.next(on: link) { $0 == .folderAsk })
            let second = try #require(again.items.first { $0.path == "a.txt" })
            let longer = try hostile.push(id, items: [second], files: [(second.ref, Array("good\nand more\n".utf8))])
            #expect(longer?.code == .badMessage, "\(String(describing: longer))")
            #expect(!FileManager.default.fileExists(atPath: docs.appendingPathComponent("b.txt").path))
            let after = treeOf(docs)
            #expect(after["a.txt"] == nil && after == before, "\(after)")
            #expect(agent.process.isRunning)
            _ = desk
        }

        /// A symbolic link in the index that leads outside the folder (links cross as they are), and a file the
        /// index names beneath it: in one update, the link after the file was asked for, and the file after the link
        /// was made. Nothing is written through the link, the folder settles, and the agent keeps serving.
        @Test(arguments: ["together", "link after the ask", "file after the link"])
        func aFileBeneathALinkOutsideIsNeverWrittenThroughIt(order: String) throws {
            let (desk, agent, hostile, docs, id, devices) = try deskSharing()
            defer { agent.stop() }
            let outside = try desk.folder("outside")
            let link = try hostile.link(id, devices: devices, sequence: 2)
            let linkFirst = order != "link after the ask"
            let symlink = IndexRecord(
                path: "out", kind: 2, deleted: false, size: 0, modified: 1_700_000_000_000_000_000, mode: 0o777,
                digest: [], target: outside.path, sequence: linkFirst ? 1 : 2, modifiedBy: HandFolderPeer.counter,
                version: [(HandFolderPeer.counter, 1)])
            let file = HandFolderPeer.record("out/evil.txt", "evil\n", sequence: linkFirst ? 2 : 1)
            var held: FolderPull.Item?
            switch order {
            case "together":
                try hostile.announce([symlink, file], of: id, on: link)
            case "link after the ask":
                try hostile.announce([file], of: id, on: link)
                let ask = try FolderPull.decode(try hostile.next(on: link) { $0 == .folderAsk })
                held = try #require(ask.items.first { $0.path == "out/evil.txt" })
                try hostile.announce([file, symlink], of: id, on: link)
            default:
                try hostile.announce([symlink], of: id, on: link)
                #expect(
                    waitUntil(timeout: 10) {
                        (try? FileManager.default.destinationOfSymbolicLink(
                            atPath: docs.appendingPathComponent("out").path)) == outside.path
                    }, "\(treeOf(docs))")
                try hostile.announce([symlink, file], of: id, on: link)
            }
            // Every ask is answered with the file, the one held back first (once the link is there), until the link
            // is closed.
            let answered = Mutex(0)
            let first = held
            let server = Thread {
                var next = first
                while true {
                    if let item = next {
                        _ = try? hostile.push(id, items: [item], files: [(item.ref, Array("evil\n".utf8))])
                        answered.withLock { $0 += 1 }
                    }
                    guard let frame = try? hostile.next(on: link, { $0 == .folderAsk }),
                        let ask = try? FolderPull.decode(frame)
                    else { return }
                    next = ask.items.first { $0.path == "out/evil.txt" }
                }
            }
            server.start()
            defer { link.connection.close() }
            // Settled: the file brought, and nothing more needed or listed (a conflict between the link and the
            // folder its file needs is kept as a copy, as any).
            #expect(
                waitUntil(timeout: 20) {
                    answered.withLock { $0 } > 0 && settled(desk)
                }, "\(treeOf(docs)) answered \(answered.withLock { $0 })\n\(agent.stderr.text)")
            #expect(!FileManager.default.fileExists(atPath: outside.appendingPathComponent("evil.txt").path))
            #expect(treeOf(outside).isEmpty, "\(treeOf(outside))")
            // What landed is inside the folder: `out` is a folder of its own there, not the link.
            let out = docs.appendingPathComponent("out")
            #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: out.path)) == nil)
            #expect(agent.process.isRunning)
        }
    }
}
