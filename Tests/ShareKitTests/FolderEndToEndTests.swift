import CoreTransferable
import Foundation
import ShareArchive
import ShareKit
import ShareProtocol
import ShareTestSupport
import Testing
import ShareTrust
import ShareReach
import ShareEngine
import ShareAgent

extension EndToEnd {
    /// Folders over loopback between two devices: extracted as they arrive, identical on arrival, resumable, and
    /// safe against a hostile sender.
    @Suite(.serialized) struct FolderEndToEndTests {
        @Test func aFolderArrivesIdentical() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let source = try sampleFolder(at: laptop.directory.appendingPathComponent("Holiday"))
            let (receiver, port) = try desk.startReceive(into: inbox)
            defer { receiver.stop() }
            let sent = laptop.run(["send", source.path, "--to", "127.0.0.1:\(port)"])
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(sent.stderr.contains("left out \(source.path)/outside"), "\(sent.stderr)")
            #expect(receiver.wait(timeout: 60) == 0, "\(receiver.stderr.text)")
            var expected = tree(source)
            expected["outside"] = nil
            #expect(tree(inbox.appendingPathComponent("Holiday")) == expected)
            // Only the folder is in the inbox: an emptied partial store is removed.
            let names = try FileManager.default.contentsOfDirectory(atPath: inbox.path).sorted()
            #expect(names == ["Holiday"])
        }

        @Test func compressibleContentTravelsSmallerAndArrivesIdentical() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let source = try laptop.folder("Logs")
            let line = "2026-11-22 07:00:00 INFO request served in 12 ms from 127.0.0.1\n"
            for index in 0..<4 {
                try Data(String(repeating: line, count: 60_000).utf8).write(
                    to: source.appendingPathComponent("app\(index).log"))
            }
            try makeFile(source.appendingPathComponent("random.bin"), size: 4 << 20)
            // The second send is whole (the receiver holds the first, which would make it a delta).
            for flags in [[String](), ["--no-compress", "--whole-file"]] {
                let (receiver, port) = try desk.startReceive(into: inbox)
                defer { receiver.stop() }
                let sent = laptop.run(["send", source.path, "--to", "127.0.0.1:\(port)", "--json"] + flags)
                #expect(sent.status == 0, "\(sent.stderr)")
                #expect(receiver.wait(timeout: 60) == 0)
                let report = try #require(summary(sent.stdout))
                let payload = try #require(report["bytesSent"] as? Int)
                let wire = try #require(report["wireBytes"] as? Int)
                if flags.isEmpty {
                    #expect(wire < payload / 2, "logs compress: \(wire) of \(payload)")
                    #expect(wire > 4 << 20, "random bytes do not")
                } else {
                    #expect(wire == payload)
                }
                let arrived = inbox.appendingPathComponent(flags.isEmpty ? "Logs" : "Logs (2)")
                #expect(tree(arrived) == tree(source))
            }
        }

        @Test func aTextOnlyReceiverGetsTheListing() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let source = try sampleFolder(at: laptop.directory.appendingPathComponent("Notes"), bigFile: 1000)
            let (receiver, port) = try desk.startReceive(["--accept", "public.plain-text"], into: inbox)
            defer { receiver.stop() }
            let sent = laptop.run(["send", source.path, "--to", "127.0.0.1:\(port)"])
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(receiver.wait(timeout: 60) == 0)
            let printed = receiver.stdout.text
            #expect(
                printed.contains("a.txt\t6") && printed.contains("bin/link -> ../a.txt") && printed.contains("empty/"))
            #expect(!FileManager.default.fileExists(atPath: inbox.appendingPathComponent("Notes").path))
        }

        @Test func aFolderTransferKilledHalfWayResumes() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let source = try sampleFolder(at: laptop.directory.appendingPathComponent("Big"), bigFile: 1000)
            for index in 0..<3 { try makeFile(source.appendingPathComponent("part\(index).bin"), size: 16 << 20) }
            let chunk = 256 << 10
            let (receiver, port) = try desk.startReceive(into: inbox)
            let proxy = try TCPProxy(upstreamPort: port)
            defer { proxy.stop() }
            proxy.bytesPerSecond = 16 << 20
            let sender = try laptop.background([
                "send", source.path, "--to", "127.0.0.1:\(proxy.port)", "--chunk-size", "256K", "--quiet",
            ])
            let half = (48 << 20) / chunk / 2
            #expect(waitUntil(timeout: 60) { ledgerChunkCount(inbox) >= half || !sender.process.isRunning })
            kill(receiver.pid, SIGKILL)
            _ = sender.wait(timeout: 30)
            _ = receiver.wait(timeout: 30)
            let held = ledgerChunkCount(inbox)
            #expect(held >= half)
            #expect(!FileManager.default.fileExists(atPath: inbox.appendingPathComponent("Big").path))
            let (again, port2) = try desk.startReceive(into: inbox)
            defer { again.stop() }
            let result = laptop.run([
                "send", source.path, "--to", "127.0.0.1:\(port2)", "--chunk-size", "256K", "--json",
            ])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(again.wait(timeout: 60) == 0, "\(again.stderr.text)")
            let report = try #require(summary(result.stdout))
            let sent = try #require(report["bytesSent"] as? Int)
            let there = try #require(report["bytesAlreadyThere"] as? Int)
            #expect(there == held * chunk)
            let plan = try ArchivePlan.folder(source)
            #expect(
                sent - (Int(plan.streamSize) - held * chunk) <= chunk,
                "resent at most one chunk beyond what was verified")
            var expected = tree(source)
            expected["outside"] = nil
            #expect(tree(inbox.appendingPathComponent("Big")) == expected)
        }

        /// A sender that crafts its own archive stream: the receiver refuses the entry, exits with 65, and nothing
        /// lands outside (or inside) the inbox.
        @Test(arguments: [
            (
                "dotdot",
                [
                    ArchivePlan.Entry(
                        path: "../evil.txt", kind: .file, size: 5, mode: 0o644, modified: 0,
                        source: .bytes(Data("evil\n".utf8)))
                ], "../evil.txt"
            ),
            (
                "link-through",
                [
                    ArchivePlan.Entry(path: "l", kind: .symlink("/tmp"), mode: 0o777, modified: 0),
                    ArchivePlan.Entry(
                        path: "l/evil.txt", kind: .file, size: 5, mode: 0o644, modified: 0,
                        source: .bytes(Data("evil\n".utf8))),
                ], "'l'"
            ),
            (
                "hardlink", [ArchivePlan.Entry(path: "pw", kind: .hardlink("/etc/passwd"), mode: 0o644, modified: 0)],
                "pw"
            ),
        ])
        func aHostileArchiveFromASenderIsRefused(_ name: String, _ entries: [ArchivePlan.Entry], _ needle: String)
            throws
        {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let (receiver, port) = try desk.startReceive(into: inbox)
            defer { receiver.stop() }
            let device = try LocalDevice.loadOrCreate(paths: DevicePaths.resolve(configOverride: laptop.config.path))
            let trust = try TrustStore.load(device.paths.trustFile)
            let plan = try ArchivePlan(entries: entries)
            let item = OutgoingItem(
                id: "hostile-\(name)", label: name,
                representations: [
                    OutgoingRepresentation(
                        offered: OfferedRepresentation(
                            contentType: UTType.tarArchive.identifier, kind: .archive, size: plan.streamSize,
                            suggestedFileName: name)
                    ) { .archive(plan) }
                ])
            let session = SendSession(device: device, progress: ProgressReporter())
            let target = try PeerTarget.resolve("127.0.0.1:\(port)", trust: trust)
            #expect(throws: ShareFailure.self) { try session.run(to: target, trust: trust) { _ in [item] } }
            #expect(receiver.wait(timeout: 30) == 65, "\(receiver.stderr.text)")
            #expect(receiver.stderr.text.contains(needle), "\(receiver.stderr.text)")
            #expect(!FileManager.default.fileExists(atPath: desk.directory.appendingPathComponent("evil.txt").path))
            #expect(!FileManager.default.fileExists(atPath: "/tmp/evil.txt"))
            // Nothing is left: not the partial, nor the emptied partial store.
            #expect(try FileManager.default.contentsOfDirectory(atPath: inbox.path).isEmpty)
        }
    }
}
