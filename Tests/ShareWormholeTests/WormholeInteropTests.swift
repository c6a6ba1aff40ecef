import Foundation
import ShareDisk
import ShareTLS
import ShareTestSupport
import Testing

@testable import ShareWormhole

/// share's side of magic-wormhole against the real `wormhole` command (Debian's magic-wormhole 0.12) in both
/// directions, through a local mailbox server and transit relay: a text, a file (directly and through the relay) and
/// a folder with odd names.
@Suite(.serialized) struct WormholeInteropTests {
    let servers: LocalWormholeServers
    let scratch: URL

    init() throws {
        servers = try LocalWormholeServers()
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("wormhole-interop-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    var options: WormholeOptions {
        var options = WormholeOptions()
        options.server = servers.mailboxURL
        options.lifetime = 60
        return options
    }

    func transfer(listen: Bool = true) -> WormholeTransferOptions {
        var transfer = WormholeTransferOptions()
        transfer.relays = [TransitHint(host: "127.0.0.1", port: servers.relayPort)]
        transfer.listen = listen
        transfer.addresses = ["127.0.0.1"]
        transfer.connectTimeout = 30
        return transfer
    }

    /// `wormhole ARGS…` with the local servers; the test waits for it and stops it.
    func wormhole(_ arguments: [String], in directory: URL? = nil) throws -> Spawned {
        try Spawned(
            "/usr/bin/wormhole", servers.wormholeArguments + arguments, directory: directory ?? scratch,
            environment: ["LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"])
    }

    func code(of sender: Spawned) throws -> WormholeCode {
        let line = try #require(sender.waitForLine(containing: "Wormhole code is: "), "\(sender.output)")
        let text = line.components(separatedBy: "Wormhole code is: ").last ?? ""
        return try WormholeCode(parsing: text.trimmingCharacters(in: .whitespaces))
    }

    func receiveFromWormhole(_ code: WormholeCode, into folder: URL, listen: Bool = true) throws
        -> WormholeTransferReport
    {
        let session = try WormholeSession.join(code, options: options)
        defer { session.close(mood: "happy") }
        try session.establish()
        return try WormholeReceiver.receive(
            over: session, into: try Directory.open(folder.path, create: true), folderURL: folder,
            options: transfer(listen: listen), decide: { _ in .accept })
    }

    func randomFile(_ url: URL, size: Int) throws {
        var bytes = [UInt8](repeating: 0, count: size)
        for i in stride(from: 0, to: size, by: 8) {
            var value = UInt64.random(in: 0...UInt64.max)
            withUnsafeBytes(of: &value) { raw in
                for j in 0..<min(8, size - i) { bytes[i + j] = raw[j] }
            }
        }
        try Data(bytes).write(to: url)
    }

    func digest(_ url: URL) throws -> String {
        SHA256Hasher.hash(try Data(contentsOf: url)).map { String(format: "%02x", $0) }.joined()
    }

    /// A folder whose names a careless receiver would mangle: spaces, non-ASCII, a leading dash, nesting.
    func oddFolder() throws -> URL {
        let root = scratch.appendingPathComponent("Odd names")
        for (path, size) in [
            ("a b.txt", 10), ("ünïcødé/çödé ✓.bin", 70_000), ("sub/dir/-dash", 1), ("sub/empty.txt", 0),
            ("big.bin", 1 << 20),
        ] {
            let url = root.appendingPathComponent(path)
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try randomFile(url, size: size)
        }
        return root
    }

    func files(_ root: URL) throws -> [String: String] {
        var found: [String: String] = [:]
        let enumerator = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isRegularFileKey])
        while let url = enumerator?.nextObject() as? URL {
            guard (try url.resourceValues(forKeys: [.isRegularFileKey])).isRegularFile == true else { continue }
            let relative = String(url.standardizedFileURL.path.dropFirst(root.standardizedFileURL.path.count + 1))
            found[relative] = try digest(url)
        }
        return found
    }

    @Test func aTextFromWormholeIsReceived() throws {
        let sender = try wormhole(["send", "--text", "Dinner at eight? ✓"])
        defer { sender.stop() }
        let report = try receiveFromWormhole(try code(of: sender), into: scratch.appendingPathComponent("in"))
        #expect(report.offer == .text("Dinner at eight? ✓"))
        #expect(sender.wait(timeout: 30) == 0, "\(sender.output)")
    }

    @Test func aTextFromShareIsReceivedByWormhole() throws {
        let session = try WormholeSession.allocate(options: options)
        defer { session.close(mood: "happy") }
        let receiver = try wormhole(["receive", "--only-text", session.code.description])
        defer { receiver.stop() }
        try session.establish()
        _ = try WormholeSender.send(.text("hello from share ✓"), over: session, options: transfer())
        #expect(receiver.wait(timeout: 30) == 0, "\(receiver.output)")
        #expect(receiver.output.contains("hello from share ✓"), "\(receiver.output)")
    }

    @Test(arguments: [true, false]) func aFileFromWormholeIsReceived(direct: Bool) throws {
        let file = scratch.appendingPathComponent("report.bin")
        try randomFile(file, size: 5 << 20 + 123)
        let sender = try wormhole(["send", "--hide-progress", "--no-listen", file.path])
        defer { sender.stop() }
        let inbox = scratch.appendingPathComponent("in")
        let report = try receiveFromWormhole(try code(of: sender), into: inbox, listen: direct)
        #expect(report.offer == .file(name: "report.bin", size: 5 << 20 + 123))
        #expect(report.route?.hasPrefix(direct ? "direct" : "via relay") == true, "\(report.route ?? "-")")
        #expect(try digest(inbox.appendingPathComponent("report.bin")) == digest(file))
        #expect(sender.wait(timeout: 60) == 0, "\(sender.output)")
    }

    @Test(arguments: [true, false]) func aFileFromShareIsReceivedByWormhole(direct: Bool) throws {
        let file = scratch.appendingPathComponent("holiday.mov")
        try randomFile(file, size: 3 << 20 + 7)
        let out = scratch.appendingPathComponent("out")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        let session = try WormholeSession.allocate(options: options)
        defer { session.close(mood: "happy") }
        let receiver = try wormhole(
            ["receive", "--accept-file", "--hide-progress", "--no-listen", session.code.description], in: out)
        defer { receiver.stop() }
        try session.establish()
        let report: WormholeTransferReport
        do {
            report = try WormholeSender.send(.file(file), over: session, options: transfer(listen: direct))
        } catch {
            _ = receiver.wait(timeout: 10)
            Issue.record("\(error); the wormhole command said: \(receiver.output)")
            return
        }
        #expect(report.route?.hasPrefix(direct ? "direct" : "via relay") == true, "\(report.route ?? "-")")
        #expect(receiver.wait(timeout: 60) == 0, "\(receiver.output)")
        #expect(try digest(out.appendingPathComponent("holiday.mov")) == digest(file))
    }

    @Test func aFolderWithOddNamesGoesBothWays() throws {
        let folder = try oddFolder()
        let expected = try files(folder)
        // wormhole → share
        let sender = try wormhole(["send", "--hide-progress", "--no-listen", folder.path])
        defer { sender.stop() }
        let inbox = scratch.appendingPathComponent("in")
        let report = try receiveFromWormhole(try code(of: sender), into: inbox)
        #expect(sender.wait(timeout: 60) == 0, "\(sender.output)")
        let saved = try #require(report.saved)
        #expect(saved.lastPathComponent == "Odd names")
        #expect(try files(saved) == expected)
        // share → wormhole
        let out = scratch.appendingPathComponent("out")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        let session = try WormholeSession.allocate(options: options)
        defer { session.close(mood: "happy") }
        let receiver = try wormhole(
            ["receive", "--accept-file", "--hide-progress", "--no-listen", session.code.description], in: out)
        defer { receiver.stop() }
        try session.establish()
        do {
            _ = try WormholeSender.send(.directory(folder), over: session, options: transfer())
        } catch {
            _ = receiver.wait(timeout: 10)
            Issue.record("\(error); the wormhole command said: \(receiver.output)")
            return
        }
        #expect(receiver.wait(timeout: 60) == 0, "\(receiver.output)")
        #expect(try files(out.appendingPathComponent("Odd names")) == expected)
    }

    @Test func aWrongCodeFailsOnBothSides() throws {
        let sender = try wormhole(["send", "--text", "secret"])
        defer { sender.stop() }
        let right = try code(of: sender)
        let wrong = WormholeCode(nameplate: right.nameplate, words: right.words.reversed() + ["extra"])
        let session = try WormholeSession.join(wrong, options: options)
        defer { session.close(mood: "scary") }
        #expect(throws: WormholeError.self) { try session.establish() }
        #expect(sender.wait(timeout: 30) != 0)
        #expect(
            sender.output.lowercased().contains("wrong") || sender.output.contains("WrongPassword"), "\(sender.output)")
    }
}
