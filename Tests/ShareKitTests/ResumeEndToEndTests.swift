import Foundation
import Testing

extension EndToEnd {
    /// Interrupted transfers: only what the receiver lacks is sent again, and changed sources are never spliced.
    @Suite(.serialized) struct ResumeEndToEndTests {
        static let size = 48 << 20
        static let chunk = 256 << 10
        static var chunks: Int { size / chunk }

        /// Sends `file` through a proxy paced at 16 MB/s (that never passes the last two chunks) until the receiver's
        /// ledger holds `atLeast` chunks, then kills the sender or the receiver with SIGKILL.
        func interrupt(
            _ laptop: TestDevice, _ desk: TestDevice, file: URL, inbox: URL, atLeast: Int, killSender: Bool,
            receiverEnvironment: [String: String] = [:]
        ) throws {
            let (receiver, port) = try desk.startReceive(into: inbox, environment: receiverEnvironment)
            let proxy = try TCPProxy(upstreamPort: port)
            defer { proxy.stop() }
            proxy.bytesPerSecond = 16 << 20
            // The last chunks never pass: however late the kill comes, the transfer cannot have finished.
            proxy.stallAfter = Self.size - 2 * Self.chunk
            let sender = try laptop.background([
                "send", file.path, "--to", "127.0.0.1:\(proxy.port)", "--chunk-size", "256K", "--quiet",
            ])
            let reached = waitUntil(timeout: 60) { ledgerChunkCount(inbox) >= atLeast || !sender.process.isRunning }
            #expect(reached)
            kill(killSender ? sender.pid : receiver.pid, SIGKILL)
            _ = sender.wait(timeout: 30)
            _ = receiver.wait(timeout: 30)
        }

        /// Runs both again; returns the sender's summary.
        func finish(_ laptop: TestDevice, _ desk: TestDevice, file: URL, inbox: URL) throws -> [String: Any] {
            let (receiver, port) = try desk.startReceive(into: inbox)
            defer { receiver.stop() }
            let sent = laptop.run(["send", file.path, "--to", "127.0.0.1:\(port)", "--chunk-size", "256K", "--json"])
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(receiver.wait(timeout: 60) == 0, "\(receiver.stderr.text)")
            return try #require(summary(sent.stdout))
        }

        @Test(arguments: [(0.25, false), (0.5, false), (0.6, true)])
        func resumesAfterAKillSendingOnlyWhatIsMissing(fraction: Double, killSender: Bool) throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let file = try laptop.folder("src").appendingPathComponent("big.bin")
            try makeFile(file, size: Self.size)
            try interrupt(
                laptop, desk, file: file, inbox: inbox, atLeast: Int(Double(Self.chunks) * fraction),
                killSender: killSender)
            #expect(
                !FileManager.default.fileExists(atPath: inbox.appendingPathComponent("big.bin").path),
                "a partial was exposed")
            let held = ledgerChunkCount(inbox)
            #expect(held >= Int(Double(Self.chunks) * fraction) || held == 0)
            let result = try finish(laptop, desk, file: file, inbox: inbox)
            let sent = try #require(result["bytesSent"] as? Int)
            let there = try #require(result["bytesAlreadyThere"] as? Int)
            #expect(there == held * Self.chunk)
            // Bytes resent beyond what the receiver had verified: at most one chunk.
            #expect(sent - (Self.size - held * Self.chunk) <= Self.chunk)
            #expect(try Data(contentsOf: inbox.appendingPathComponent("big.bin")) == Data(contentsOf: file))
        }

        /// A partial recorded with SHA-256 (by a receiver that, like every earlier version, lists no other digest)
        /// resumes once both ends would agree on BLAKE3: the item keeps SHA-256, and nothing verified is sent again.
        @Test func aPartialRecordedWithSHA256ResumesWhenBothEndsHaveBLAKE3() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let file = try laptop.folder("src").appendingPathComponent("big.bin")
            try makeFile(file, size: Self.size)
            try interrupt(
                laptop, desk, file: file, inbox: inbox, atLeast: Self.chunks / 2, killSender: false,
                receiverEnvironment: ["SHARE_TEST_DIGESTS": "sha256"])
            let held = ledgerChunkCount(inbox)
            #expect(held >= Self.chunks / 2)
            let result = try finish(laptop, desk, file: file, inbox: inbox)
            #expect(try #require(result["bytesAlreadyThere"] as? Int) == held * Self.chunk)
            #expect(try #require(result["bytesSent"] as? Int) - (Self.size - held * Self.chunk) <= Self.chunk)
            #expect(try Data(contentsOf: inbox.appendingPathComponent("big.bin")) == Data(contentsOf: file))
        }

        @Test func aSourceChangedBetweenAttemptsIsSentWholeNeverSpliced() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let file = try laptop.folder("src").appendingPathComponent("big.bin")
            try makeFile(file, size: Self.size)
            try interrupt(laptop, desk, file: file, inbox: inbox, atLeast: Self.chunks / 2, killSender: false)
            #expect(ledgerChunkCount(inbox) > 0)
            // Rewrite the first chunk: same size, new content and modification time.
            let handle = try FileHandle(forWritingTo: file)
            try handle.write(contentsOf: Data(repeating: 0xAB, count: Self.chunk))
            try handle.close()
            let result = try finish(laptop, desk, file: file, inbox: inbox)
            #expect(result["bytesAlreadyThere"] as? Int == 0)
            #expect(result["bytesSent"] as? Int == Self.size)
            #expect(try Data(contentsOf: inbox.appendingPathComponent("big.bin")) == Data(contentsOf: file))
        }

        @Test func aSourceChangedDuringTheTransferIsDetected() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let file = try laptop.folder("src").appendingPathComponent("growing.bin")
            try makeFile(file, size: 160 << 20)
            let (receiver, port) = try desk.startReceive(into: inbox)
            defer { receiver.stop() }
            let sender = try laptop.background(["send", file.path, "--to", "127.0.0.1:\(port)", "--chunk-size", "64K"])
            #expect(waitUntil(timeout: 60) { ledgerChunkCount(inbox) > 0 || !sender.process.isRunning })
            let handle = try FileHandle(forWritingTo: file)
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(repeating: 1, count: 10))
            try handle.close()
            let status = sender.wait(timeout: 120)
            if status == 0 {
                // The whole file went before the change landed: then it must be the old contents, complete.
                #expect(try Data(contentsOf: inbox.appendingPathComponent("growing.bin")).count == 160 << 20)
            } else {
                #expect(status == 75, "\(sender.stderr.text)")
                #expect(sender.stderr.text.contains("changed while it was being sent"))
                #expect(!FileManager.default.fileExists(atPath: inbox.appendingPathComponent("growing.bin").path))
            }
            _ = receiver.wait(timeout: 30)
        }

        /// One send of a fresh 48 MiB file through a proxy that `configure` sets up to break it.
        struct Broken {
            let laptop: TestDevice
            let desk: TestDevice
            let inbox: URL
            let file: URL
            let sent: CommandResult
            let receiverStatus: Int32?
        }

        func sendThroughBrokenLink(_ configure: (TCPProxy) -> Void) throws -> Broken {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let file = try laptop.folder("src").appendingPathComponent("big.bin")
            try makeFile(file, size: Self.size)
            let (receiver, port) = try desk.startReceive(into: inbox)
            let proxy = try TCPProxy(upstreamPort: port)
            configure(proxy)
            let sent = laptop.run(["send", file.path, "--to", "127.0.0.1:\(proxy.port)", "--chunk-size", "256K"])
            proxy.stop()
            let status = receiver.wait(timeout: 30)
            return Broken(laptop: laptop, desk: desk, inbox: inbox, file: file, sent: sent, receiverStatus: status)
        }

        @Test(arguments: [3 << 20, 17 << 20, 31 << 20])
        func resumesAfterTheConnectionIsCut(at offset: Int) throws {
            let broken = try sendThroughBrokenLink { $0.cutAfter = offset }
            let (laptop, desk, inbox, file) = (broken.laptop, broken.desk, broken.inbox, broken.file)
            #expect(broken.sent.status == 75, "\(broken.sent.stderr)")
            #expect(broken.receiverStatus == 75)
            #expect(!FileManager.default.fileExists(atPath: inbox.appendingPathComponent("big.bin").path))
            // The receiver flushed its ledger when the connection dropped: every chunk it wrote counts.
            let held = ledgerChunkCount(inbox)
            #expect(held > 0 && held * Self.chunk <= offset)
            #expect(held * Self.chunk >= offset - 2 * Self.chunk - 4096)
            let result = try finish(laptop, desk, file: file, inbox: inbox)
            #expect(result["bytesAlreadyThere"] as? Int == held * Self.chunk)
            #expect((result["bytesSent"] as? Int ?? 0) - (Self.size - held * Self.chunk) <= Self.chunk)
            #expect(try Data(contentsOf: inbox.appendingPathComponent("big.bin")) == Data(contentsOf: file))
        }

        @Test func aByteFlippedInFlightIsRejectedAndTheTransferResumes() throws {
            let broken = try sendThroughBrokenLink { $0.flipAt = 20 << 20 }
            let (laptop, desk, inbox, file) = (broken.laptop, broken.desk, broken.inbox, broken.file)
            // TLS authenticates every record: the flipped byte ends the session, it is never written.
            #expect(broken.sent.status == 75 || broken.sent.status == 76, "\(broken.sent.stderr)")
            #expect(broken.receiverStatus != 0)
            #expect(!FileManager.default.fileExists(atPath: inbox.appendingPathComponent("big.bin").path))
            let held = ledgerChunkCount(inbox)
            #expect(held * Self.chunk <= 20 << 20)
            let result = try finish(laptop, desk, file: file, inbox: inbox)
            #expect(result["bytesAlreadyThere"] as? Int == held * Self.chunk)
            #expect(try Data(contentsOf: inbox.appendingPathComponent("big.bin")) == Data(contentsOf: file))
        }

        @Test func partialsOlderThanTheLimitAreRemoved() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let file = try laptop.folder("src").appendingPathComponent("big.bin")
            try makeFile(file, size: Self.size)
            try interrupt(laptop, desk, file: file, inbox: inbox, atLeast: 4, killSender: false)
            let partials = inbox.appendingPathComponent(".share-partial")
            let old = Date().addingTimeInterval(-3 * 3600)
            for name in try FileManager.default.contentsOfDirectory(atPath: partials.path) {
                try FileManager.default.setAttributes(
                    [.modificationDate: old], ofItemAtPath: partials.appendingPathComponent(name).path)
            }
            let (receiver, port) = try desk.startReceive(["--partial-max-age", "2"], into: inbox)
            defer { receiver.stop() }
            let result = laptop.run(["send", file.path, "--to", "127.0.0.1:\(port)", "--json"])
            #expect(result.status == 0)
            #expect(summary(result.stdout)?["bytesAlreadyThere"] as? Int == 0)
        }
    }
}
