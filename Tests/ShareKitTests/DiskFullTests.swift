import Foundation
import Testing

extension EndToEnd {
    /// A receiving disk that fills up mid-transfer: one clear error, the partial kept, completion after space is
    /// freed. Runs on a small tmpfs this test mounts (it needs root; it says so and skips otherwise).
    @Suite(.serialized) struct DiskFullTests {
        @Test func fullDiskThenFreedSpaceResumes() throws {
            guard getuid() == 0 else {
                print("skipped: mounting a tmpfs needs root")
                return
            }
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let mountPoint = try desk.folder("small-disk")
            let mounted = runTool("/bin/mount", ["-t", "tmpfs", "-o", "size=40m", "tmpfs", mountPoint.path])
            try #require(mounted.status == 0, "\(mounted.output)")
            defer { _ = runTool("/bin/umount", ["-l", mountPoint.path]) }
            let inbox = mountPoint.appendingPathComponent("inbox")
            let file = try laptop.folder("src").appendingPathComponent("video.bin")
            try makeFile(file, size: 24 << 20)

            // Accepted (24 MiB fit in 40), then something else takes the space while the bytes arrive.
            let (receiver, port) = try desk.startReceive(into: inbox)
            let proxy = try TCPProxy(upstreamPort: port)
            proxy.bytesPerSecond = 8 << 20
            let sender = try laptop.background([
                "send", file.path, "--to", "127.0.0.1:\(proxy.port)", "--chunk-size", "256K",
            ])
            #expect(waitUntil(timeout: 30) { ledgerChunkCount(inbox) > 0 })
            let filler = mountPoint.appendingPathComponent("filler")
            _ = runTool("/bin/dd", ["if=/dev/zero", "of=\(filler.path)", "bs=1M", "count=40"])
            let senderStatus = sender.wait(timeout: 60)
            let receiverStatus = receiver.wait(timeout: 60)
            proxy.stop()
            #expect(senderStatus == 74, "\(sender.stderr.text)")
            #expect(sender.stderr.text.contains("disk is full"))
            #expect(failureLines(sender.stderr.text).count == 1, "one line says what went wrong: \(sender.stderr.text)")
            #expect(receiverStatus == 74, "\(receiver.stderr.text)")
            #expect(!FileManager.default.fileExists(atPath: inbox.appendingPathComponent("video.bin").path))
            let held = ledgerChunkCount(inbox)
            #expect(held > 0)

            // Space freed: the same command completes, sending only what was missing.
            try FileManager.default.removeItem(at: filler)
            let (again, port2) = try desk.startReceive(into: inbox)
            defer { again.stop() }
            let result = laptop.run(["send", file.path, "--to", "127.0.0.1:\(port2)", "--chunk-size", "256K", "--json"])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(again.wait(timeout: 60) == 0)
            #expect(summary(result.stdout)?["bytesAlreadyThere"] as? Int == held * (256 << 10))
            #expect(try Data(contentsOf: inbox.appendingPathComponent("video.bin")) == Data(contentsOf: file))
        }

        /// After a full disk, the space the resume needs is what the partial does not hold yet: an item larger than
        /// the free space, most of which already arrived, resumes (it was refused for its whole size).
        @Test func resumeAfterAFullDiskCountsWhatThePartialHolds() throws {
            guard getuid() == 0 else {
                print("skipped: mounting a tmpfs needs root")
                return
            }
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let mountPoint = try desk.folder("small-disk")
            let mounted = runTool("/bin/mount", ["-t", "tmpfs", "-o", "size=48m", "tmpfs", mountPoint.path])
            try #require(mounted.status == 0, "\(mounted.output)")
            defer { _ = runTool("/bin/umount", ["-l", mountPoint.path]) }
            let inbox = mountPoint.appendingPathComponent("inbox")
            let file = try laptop.folder("src").appendingPathComponent("video.bin")
            try makeFile(file, size: 30 << 20)
            let (receiver, port) = try desk.startReceive(into: inbox)
            let proxy = try TCPProxy(upstreamPort: port)
            proxy.bytesPerSecond = 8 << 20
            let sender = try laptop.background([
                "send", file.path, "--to", "127.0.0.1:\(proxy.port)", "--chunk-size", "256K",
            ])
            // At least 12 MiB verified before the disk fills.
            #expect(waitUntil(timeout: 60) { ledgerChunkCount(inbox) >= 48 })
            let filler = mountPoint.appendingPathComponent("filler")
            _ = runTool("/bin/dd", ["if=/dev/zero", "of=\(filler.path)", "bs=1M", "count=48"])
            #expect(sender.wait(timeout: 60) == 74, "\(sender.stderr.text)")
            #expect(receiver.wait(timeout: 60) == 74, "\(receiver.stderr.text)")
            proxy.stop()
            let held = ledgerChunkCount(inbox)
            try #require(held >= 48 && held < 120)

            // Space freed, but less than the whole item: 48 MiB less the partial less 12 MiB kept by something else
            // is under 30 MiB, and still more than the 30 MiB less the partial the resume needs.
            try FileManager.default.removeItem(at: filler)
            _ = runTool("/bin/dd", ["if=/dev/zero", "of=\(filler.path)", "bs=1M", "count=12"])
            let (again, port2) = try desk.startReceive(into: inbox)
            defer { again.stop() }
            let result = laptop.run(["send", file.path, "--to", "127.0.0.1:\(port2)", "--chunk-size", "256K", "--json"])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(again.wait(timeout: 60) == 0)
            #expect(summary(result.stdout)?["bytesAlreadyThere"] as? Int == held * (256 << 10))
            #expect(try Data(contentsOf: inbox.appendingPathComponent("video.bin")) == Data(contentsOf: file))
        }

        @Test func anItemLargerThanTheFreeSpaceIsRefusedUpFront() throws {
            guard getuid() == 0 else { return }
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let mountPoint = try desk.folder("tiny-disk")
            try #require(runTool("/bin/mount", ["-t", "tmpfs", "-o", "size=4m", "tmpfs", mountPoint.path]).status == 0)
            defer { _ = runTool("/bin/umount", ["-l", mountPoint.path]) }
            let file = try laptop.folder("src").appendingPathComponent("big.bin")
            try makeFile(file, size: 8 << 20)
            let (receiver, port) = try desk.startReceive(into: mountPoint)
            defer { receiver.stop() }
            let result = laptop.run(["send", file.path, "--to", "127.0.0.1:\(port)"])
            #expect(result.status == 3)
            #expect(result.stderr.contains("only") && result.stderr.contains("free on the receiver"))
        }
    }
}
