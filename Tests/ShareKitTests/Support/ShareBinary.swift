import Foundation
import ShareTestSupport
import Testing

/// The built `share` executable and a scratch folder per test device.
enum ShareBinary {
    static let url: URL = {
        let fm = FileManager.default
        var candidates: [URL] = []
        if let argv0 = CommandLine.arguments.first {
            candidates.append(URL(fileURLWithPath: argv0).deletingLastPathComponent().appendingPathComponent("share"))
        }
        candidates.append(Bundle.main.bundleURL.appendingPathComponent("share"))
        candidates.append(Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("share"))
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        candidates.append(root.appendingPathComponent(".build/debug/share"))
        return candidates.first { fm.isExecutableFile(atPath: $0.path) } ?? candidates.last!
    }()
}

/// The outcome of a finished command.
struct CommandResult {
    let status: Int32
    let stdout: String
    let stderr: String
}

/// Collects a pipe's output and lets a test wait for a line, woken by each arrival (no polling).
///
/// A thread of its own reads the pipe to its end with blocking reads. Not `readabilityHandler`: Foundation tears
/// its dispatch read source down asynchronously, and on Linux a pipe closed while that is under way leaves epoll a
/// dangling registration that crashes the test process in `_dispatch_event_loop_drain` (seen once beside other work).
final class OutputCollector: @unchecked Sendable {  // guarded by `condition`
    private let condition = NSCondition()
    private var data = Data()
    private var closed = false

    init(_ pipe: Pipe) {
        let handle = pipe.fileHandleForReading
        let reader = Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            while true {
                let count = read(handle.fileDescriptor, &buffer, buffer.count)
                if count < 0 && errno == EINTR { continue }
                condition.lock()
                if count > 0 { data.append(contentsOf: buffer[0..<count]) } else { closed = true }
                condition.broadcast()
                condition.unlock()
                if count <= 0 { break }
            }
            // Closed here, at the end of the stream: the pipe object lives on with the process object, which the
            // runtime keeps, and a test process that ran thousands of commands would hold a descriptor for each.
            try? handle.close()
        }
        reader.name = "test-output"
        reader.start()
    }

    var text: String {
        condition.lock()
        defer { condition.unlock() }
        return String(decoding: data, as: UTF8.self)
    }

    /// Waits until the output holds a line containing `needle`, the stream closes, or `timeout` passes.
    func waitForLine(containing needle: String, timeout: Double) -> String? {
        let deadline = Date().addingTimeInterval(Patience.seconds(timeout))
        condition.lock()
        defer { condition.unlock() }
        while true {
            let text = String(decoding: data, as: UTF8.self)
            if let line = text.split(separator: "\n").first(where: { $0.contains(needle) }) { return String(line) }
            if closed || !condition.wait(until: deadline) { return nil }
        }
    }

    func waitForClose(timeout: Double) {
        let deadline = Date().addingTimeInterval(Patience.seconds(timeout))
        condition.lock()
        defer { condition.unlock() }
        while !closed && condition.wait(until: deadline) {}
    }
}

/// A `share` process running in the background; stopped (SIGTERM, then SIGKILL) by `stop()` or when released.
final class BackgroundShare: @unchecked Sendable {
    let process = Process()
    let stdout: OutputCollector
    let stderr: OutputCollector

    /// Standard input, when the process was started `interactive`: the test answers its questions.
    private var input: FileHandle?

    /// `wrapper`: a command that runs `share` (e.g. `ip netns exec NAME`). `interactive`: standard input stays open
    /// for `answer`.
    init(
        _ arguments: [String], environment: [String: String] = [:], stdin: String? = nil, wrapper: [String] = [],
        interactive: Bool = false, executable: URL? = nil
    ) throws {
        if let executable {
            process.executableURL = executable
            process.arguments = arguments
        } else if let tool = wrapper.first {
            process.executableURL = URL(fileURLWithPath: tool)
            process.arguments = Array(wrapper.dropFirst()) + [ShareBinary.url.path] + arguments
        } else {
            process.executableURL = ShareBinary.url
            process.arguments = arguments
        }
        var env = ProcessInfo.processInfo.environment
        // scripts/sanitizers.sh checks the share processes for leaks, not the test runner (XCTest and the test
        // helpers' own allocations are not the product's).
        if let options = env["SHARE_CHILD_ASAN_OPTIONS"] { env["ASAN_OPTIONS"] = options }
        env.merge(Patience.environment) { $1 }
        env.merge(environment) { $1 }
        process.environment = env
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        stdout = OutputCollector(out)
        stderr = OutputCollector(err)
        if interactive {
            let input = Pipe()
            process.standardInput = input
            try process.run()
            self.input = input.fileHandleForWriting
        } else if let stdin {
            let input = Pipe()
            process.standardInput = input
            try process.run()
            input.fileHandleForWriting.write(Data(stdin.utf8))
            try? input.fileHandleForWriting.close()
        } else {
            process.standardInput = FileHandle.nullDevice
            try process.run()
        }
    }

    var pid: Int32 { process.processIdentifier }

    /// Writes a line to the process's standard input (started `interactive`).
    func answer(_ line: String) {
        input?.write(Data((line + "\n").utf8))
    }

    /// Waits for the process to exit within `timeout`; kills it if it does not.
    @discardableResult
    func wait(timeout: Double) -> Int32? {
        if !process.waitForExit(seconds: Patience.seconds(timeout)) {
            kill(process.processIdentifier, SIGKILL)
            _ = process.waitForExit(seconds: 5)
            return nil
        }
        stdout.waitForClose(timeout: 2)
        stderr.waitForClose(timeout: 2)
        // A sanitizer's report from any share process goes to the test log whatever the test then checks.
        if stderr.text.contains("Sanitizer") {
            print("share \(process.arguments ?? []) exited \(process.terminationStatus):\n\(stderr.text)")
        }
        keepLog()
        return process.terminationStatus
    }

    /// What an agent or a watch said, kept in SHARE_TEST_PROCESS_LOGS (a folder scripts/run-suite.py gives each job)
    /// so that a failed job shows what its long-running processes logged.
    private func keepLog() {
        guard let folder = ProcessInfo.processInfo.environment["SHARE_TEST_PROCESS_LOGS"],
            let arguments = process.arguments, let command = arguments.first(where: { $0 == "agent" || $0 == "watch" }),
            !stderr.text.isEmpty
        else { return }
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let header = "share \(arguments.joined(separator: " ")) exited \(process.terminationStatus)\n"
        let file = URL(fileURLWithPath: folder).appendingPathComponent("\(command)-\(process.processIdentifier).log")
        try? Data((header + stderr.text).utf8).write(to: file)
    }

    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGTERM)
        if wait(timeout: 10) == nil { kill(process.processIdentifier, SIGKILL) }
    }

    deinit { stop() }
}

/// One device: a private config folder, removed at the end.
final class TestDevice: @unchecked Sendable {
    let directory: URL
    let name: String
    let config: URL
    /// Whether the folder is this object's to remove.
    private let owned: Bool
    /// Whether this device's agent runs its transfers at the lower CPU priority a user's agent has by default. Off in
    /// tests: the suite runs several jobs on two cores, where a thread 9 nice steps down gets an eighth of a busy
    /// one's share and a test's deadline would measure the scheduler; the tests of the priority itself turn it on.
    var lowPriorityTransfers = false

    init(_ name: String) throws {
        self.name = name
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "share-test-\(name)-\(UUID().uuidString.prefix(8))")
        config = directory.appendingPathComponent("config")
        owned = true
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let result = run(["id", "--name", name])
        precondition(result.status == 0, "share id failed: \(result.stderr)")
    }

    /// A device whose config folder `configName` inside `directory` exists already; left in place at the end.
    init(directory: URL, configName: String, name: String) {
        self.directory = directory
        self.name = name
        config = directory.appendingPathComponent(configName)
        owned = false
    }

    deinit { if owned { try? FileManager.default.removeItem(at: directory) } }

    var id: String { run(["id"]).stdout.split(separator: "\n").last.map(String.init) ?? "" }

    /// Runs `share` with this device's config; bounded by `timeout`.
    @discardableResult
    func run(_ arguments: [String], stdin: String? = nil, timeout: Double = 60) -> CommandResult {
        do {
            let process = try BackgroundShare(withConfig(arguments), stdin: stdin)
            let status = process.wait(timeout: timeout) ?? -9
            return CommandResult(status: status, stdout: process.stdout.text, stderr: process.stderr.text)
        } catch {
            return CommandResult(status: -1, stdout: "", stderr: "\(error)")
        }
    }

    func background(
        _ arguments: [String], stdin: String? = nil, environment: [String: String] = [:], interactive: Bool = false
    ) throws -> BackgroundShare {
        try BackgroundShare(withConfig(arguments), environment: environment, stdin: stdin, interactive: interactive)
    }

    func withConfig(_ arguments: [String]) -> [String] {
        guard let first = arguments.first else { return arguments }
        // Options go after the (sub)command path: `share trust add --config DIR …`.
        var path = [first]
        var rest = Array(arguments.dropFirst())
        if ["trust", "profile", "inbox", "servers", "sync"].contains(first), let sub = rest.first, !sub.hasPrefix("-") {
            path.append(sub)
            rest.removeFirst()
        }
        if first == "agent" && !lowPriorityTransfers { rest.append("--normal-priority") }
        return path + ["--config", config.path] + rest
    }

    /// Starts this device's agent on a free port and returns it with the port.
    func startAgent(_ extra: [String] = [], environment: [String: String] = [:]) throws -> (BackgroundShare, Int) {
        let agent = try background(["agent", "--port", "0", "--listen", "127.0.0.1"] + extra, environment: environment)
        guard let line = agent.stderr.waitForLine(containing: "listening on port", timeout: 30),
            let port = Self.port(in: line)
        else {
            agent.stop()
            throw TestFailure("agent did not start: \(agent.stderr.text)")
        }
        return (agent, port)
    }

    /// Starts this device's agent with LocalSend on a free port (multicast off); returns it, its LocalSend port and
    /// its own port.
    func startLocalSendAgent(environment: [String: String] = [:]) throws -> (BackgroundShare, Int, Int) {
        let agent = try background(
            [
                "agent", "--port", "0", "--listen", "127.0.0.1", "--no-discovery", "--localsend", "--localsend-port",
                "0", "--localsend-multicast-port", "0",
            ], environment: environment)
        guard let line = agent.stderr.waitForLine(containing: "LocalSend on port", timeout: 30),
            let port = line.components(separatedBy: "LocalSend on port ").last?.split(separator: ",").first
                .flatMap({ Int($0) })
        else {
            agent.stop()
            throw TestFailure("no LocalSend port: \(agent.stderr.text)")
        }
        let own = agent.stderr.waitForLine(containing: "listening on port", timeout: 30).flatMap { Self.port(in: $0) }
        return (agent, port, own ?? 0)
    }

    /// Trusts `other` under its name, optionally with an address and a relation flag. Its offers go straight in
    /// unless `asks` (the product's default for a device that is not the owner's is to ask: `AskFirstEndToEndTests`).
    func trust(_ other: TestDevice, address: String? = nil, flags: [String] = [], asks: Bool = false) {
        var args = ["trust", "add", other.id, "--name", other.name]
        if let address { args += ["--address", address] }
        if !asks && !flags.contains("--team") { args.append("--no-ask") }
        let result = run(args + flags)
        precondition(result.status == 0, "trust add failed: \(result.stderr)")
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Resident memory of a process in KiB (from /proc).
func residentKiB(_ pid: Int32) -> Int? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "")
    }
    return nil
}

extension TestDevice {
    /// Starts `share receive` with `extra` options; returns it and its port.
    func startReceive(_ extra: [String] = [], into: URL, environment: [String: String] = [:]) throws -> (
        BackgroundShare, Int
    ) {
        let receiver = try background(
            ["receive", "--port", "0", "--listen", "127.0.0.1", "--into", into.path] + extra, environment: environment)
        // With --json the announcement is an event on standard output; otherwise a line on standard error.
        let said = extra.contains("--json") ? receiver.stdout : receiver.stderr
        guard let line = said.waitForLine(containing: "waiting on port", timeout: 30),
            let port = Self.port(in: line)
        else {
            receiver.stop()
            throw TestFailure("receive did not start: \(receiver.stderr.text)")
        }
        return (receiver, port)
    }

    /// The number after the last "port" in a line (plain text or a JSON event).
    static func port(in line: String) -> Int? {
        guard let range = line.range(of: "port", options: .backwards) else { return nil }
        let digits = line[range.upperBound...].drop { !$0.isNumber }.prefix { $0.isNumber }
        return Int(digits)
    }

    /// Two devices that trust each other as the same owner's.
    static func pair(_ a: String, _ b: String) throws -> (TestDevice, TestDevice) {
        let first = try TestDevice(a)
        let second = try TestDevice(b)
        first.trust(second, flags: ["--team"])
        second.trust(first, flags: ["--team"])
        return (first, second)
    }

    /// A scratch folder inside this device's directory.
    func folder(_ name: String) throws -> URL {
        let url = directory.appendingPathComponent(name, isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

/// Random bytes in a file.
/// `count` bytes from the kernel's generator.
func randomData(_ count: Int) throws -> Data {
    let random = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/dev/urandom"))
    defer { try? random.close() }
    guard let data = try random.read(upToCount: count), data.count == count else {
        throw CocoaError(.fileReadUnknown)
    }
    return data
}

func makeFile(_ url: URL, size: Int) throws {
    // The kernel's generator, 1 MiB at a time: fast in a debug build and flat in memory for a 1 GiB file.
    let random = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/dev/urandom"))
    defer { try? random.close() }
    _ = FileManager.default.createFile(atPath: url.path, contents: nil)
    let out = try FileHandle(forWritingTo: url)
    defer { try? out.close() }
    var left = size
    while left > 0 {
        guard let block = try random.read(upToCount: min(left, 1 << 20)), !block.isEmpty else {
            throw CocoaError(.fileReadUnknown)
        }
        try out.write(contentsOf: block)
        left -= block.count
    }
}

/// Chunks recorded for the (single) partial in `inbox`: its ledger's, plus those its journal recorded since.
func ledgerChunkCount(_ inbox: URL) -> Int {
    let partials = inbox.appendingPathComponent(".share-partial")
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: partials.path),
        let ledger = names.first(where: { $0.hasSuffix(".json") }),
        let data = FileManager.default.contents(atPath: partials.appendingPathComponent(ledger).path),
        let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
        let chunks = object["chunks"] as? [String: Any]
    else { return 0 }
    var held = Set(chunks.keys)
    let journal = partials.appendingPathComponent(String(ledger.dropLast(4)) + "log")
    if let lines = FileManager.default.contents(atPath: journal.path) {
        for line in lines.split(separator: UInt8(ascii: "\n")) {
            guard let record = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any],
                let index = record["c"] as? Int
            else { break }
            held.insert(String(index))
        }
    }
    return held.count
}

/// Waits (bounded) until `condition` holds, checking each time a process prints something or every 20 ms.
func waitUntil(timeout: Double, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(Patience.seconds(timeout))
    // Nothing signals ledger writes; a short bounded poll is the only way to watch a file fill up. The pause grows
    // to a fifth of a second: many conditions start a share process, and a long wait polled every 20 ms spent more
    // CPU than the work it waited for.
    var pause = 0.02
    while Date() < deadline {
        if condition() { return true }
        Thread.sleep(forTimeInterval: pause)
        pause = min(0.2, pause * 1.5)
    }
    return condition()
}

/// The `summary` event of `share send --json`.
func summary(_ output: String) -> [String: Any]? {
    for line in output.split(separator: "\n") where line.contains("\"summary\"") {
        if let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] { return object }
    }
    return nil
}

/// The lines of standard error that report a failure (`share: …`), beside the narrative of what happened.
func failureLines(_ stderr: String) -> [Substring] {
    stderr.split(separator: "\n").filter { $0.hasPrefix("share: ") }
}
