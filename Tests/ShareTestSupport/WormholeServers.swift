import Foundation

/// A process the test started and stops: its standard error and output are read by a thread, and a test waits for
/// a line (bounded) instead of sleeping.
public final class Spawned: @unchecked Sendable {  // `lines` guarded by `condition`
    public let process = Process()
    private let condition = NSCondition()
    private var lines: [String] = []
    private var ended = false
    private var exited = false

    public init(
        _ executable: String, _ arguments: [String], directory: URL? = nil, environment: [String: String]? = nil
    )
        throws
    {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        process.environment = ProcessInfo.processInfo.environment.merging(Patience.environment) { $1 }
            .merging(environment ?? [:]) { $1 }
        let pipe = Pipe()
        // Only this child gets the pipe's write end (a process started later must not hold it open: the end of
        // file is how the test learns that this one has ended).
        _ = fcntl(pipe.fileHandleForReading.fileDescriptor, F_SETFD, FD_CLOEXEC)
        _ = fcntl(pipe.fileHandleForWriting.fileDescriptor, F_SETFD, FD_CLOEXEC)
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        process.terminationHandler = { [condition] _ in
            condition.lock()
            self.exited = true
            condition.broadcast()
            condition.unlock()
        }
        try process.run()
        let handle = pipe.fileHandleForReading
        Thread.detachNewThread { [self] in
            var pending = Data()
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                pending.append(data)
                // Progress bars end their updates with a carriage return: those count as lines too.
                while let end = pending.firstIndex(where: { $0 == 0x0A || $0 == 0x0D }) {
                    let line = String(decoding: pending[pending.startIndex..<end], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...end)
                    condition.lock()
                    lines.append(line)
                    condition.broadcast()
                    condition.unlock()
                }
            }
            condition.lock()
            if !pending.isEmpty { lines.append(String(decoding: pending, as: UTF8.self)) }
            ended = true
            condition.broadcast()
            condition.unlock()
        }
    }

    /// The first line containing `text` (nil if the process ends or `timeout` passes first).
    public func waitForLine(containing text: String, timeout: Double = 30) -> String? {
        let deadline = Date().addingTimeInterval(Patience.seconds(timeout))
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let line = lines.first(where: { $0.contains(text) }) { return line }
            if ended || exited || !condition.wait(until: deadline) {
                return lines.first(where: { $0.contains(text) })
            }
        }
    }

    /// Waits for the process to end (bounded); nil if it did not.
    public func wait(timeout: Double = 120) -> Int32? {
        let deadline = Date().addingTimeInterval(Patience.seconds(timeout))
        // The end of its output (or the exit, when something else holds the output open).
        condition.lock()
        while !ended, !exited, condition.wait(until: deadline) {}
        let done = ended || exited
        condition.unlock()
        guard done else { return nil }
        process.waitForExit()
        return process.terminationStatus
    }

    public var output: String {
        condition.lock()
        defer { condition.unlock() }
        return lines.joined(separator: "\n")
    }

    /// Ends it at once (SIGKILL: a child of the test process may inherit SIGTERM blocked) and reaps it.
    public func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitForExit()
    }

    deinit { stop() }
}

/// magic-wormhole's servers, started for real on loopback: the mailbox (rendezvous) server from PyPI's
/// `magic-wormhole-mailbox-server` (installed by scripts/setup.sh) and Debian's transit relay.
public final class LocalWormholeServers: @unchecked Sendable {
    /// Where scripts/setup.sh installs the mailbox server (a Python virtual environment).
    public static let mailboxTwistd =
        ProcessInfo.processInfo.environment["SHARE_WORMHOLE_MAILBOX_TWISTD"]
        ?? "/opt/share-tools/wormhole-mailbox/bin/twistd"

    public let mailbox: Spawned
    public let relay: Spawned
    public let mailboxURL: String
    public let relayPort: Int
    public let scratch: URL

    public init() throws {
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("wormhole-servers-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        mailbox = try Spawned(
            Self.mailboxTwistd,
            [
                "-n", "--pidfile=", "wormhole-mailbox", "--port=tcp:0:interface=127.0.0.1",
                "--channel-db=\(scratch.path)/channel.sqlite", "--usage-db=\(scratch.path)/usage.sqlite",
            ], directory: scratch, environment: ["PYTHONUNBUFFERED": "1"])
        relay = try Spawned(
            "/usr/bin/twistd3", ["-n", "--pidfile=", "transitrelay", "--port=tcp:0:interface=127.0.0.1"],
            directory: scratch, environment: ["PYTHONUNBUFFERED": "1"])
        guard let line = mailbox.waitForLine(containing: "starting on "),
            let port = Int(line.split(separator: " ").last ?? "")
        else {
            throw ServerFailure(message: "the mailbox server did not start: \(mailbox.output)")
        }
        mailboxURL = "ws://127.0.0.1:\(port)/v1"
        guard let relayLine = relay.waitForLine(containing: "Transit starting on "),
            let relayPort = Int(relayLine.split(separator: " ").last ?? "")
        else {
            throw ServerFailure(message: "the transit relay did not start: \(relay.output)")
        }
        self.relayPort = relayPort
    }

    public struct ServerFailure: Error, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    /// The `wormhole` command's arguments for these servers.
    public var wormholeArguments: [String] {
        ["--relay-url", mailboxURL, "--transit-helper", "tcp:127.0.0.1:\(relayPort)"]
    }

    public func stop() {
        mailbox.stop()
        relay.stop()
        try? FileManager.default.removeItem(at: scratch)
    }

    deinit { stop() }
}
