import Foundation
import Glibc
import ShareTrust
import ShareTestSupport
import ShareNet

/// A network namespace of the test's own, with loopback up and multicast routed on it: LocalSend's discovery
/// (multicast on 224.0.0.167) runs there without touching any real network. Removed when released.
final class TestNamespace: @unchecked Sendable {
    static let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    let name: String

    /// nil without root or `ip`.
    init?() {
        guard geteuid() == 0, let ip = Self.ip else { return nil }
        name = "share-ls-\(UUID().uuidString.prefix(8).lowercased())"
        guard Self.run([ip, "netns", "add", name]) else { return nil }
        guard Self.run([ip, "netns", "exec", name, ip, "link", "set", "lo", "up"]),
            Self.run([ip, "netns", "exec", name, ip, "link", "set", "lo", "multicast", "on"]),
            Self.run([ip, "netns", "exec", name, ip, "route", "add", "224.0.0.0/4", "dev", "lo"])
        else {
            _ = Self.run([ip, "netns", "del", name])
            return nil
        }
    }

    /// Whatever still runs inside is stopped (SIGKILL) before the namespace goes.
    deinit {
        guard let ip = Self.ip else { return }
        let list = Process()
        list.executableURL = URL(fileURLWithPath: ip)
        list.arguments = ["netns", "pids", name]
        let pipe = Pipe()
        list.standardOutput = pipe
        list.standardError = FileHandle.nullDevice
        if (try? list.run()) != nil {
            let output = pipe.fileHandleForReading.readDataToEndOfFile()
            list.waitForExit()
            for pid in String(decoding: output, as: UTF8.self).split(separator: "\n").compactMap({ Int32($0) }) {
                kill(pid, SIGKILL)
            }
        }
        _ = Self.run([ip, "netns", "del", name])
    }

    /// The command prefix that runs a program inside.
    var wrapper: [String] { [Self.ip!, "netns", "exec", name] }

    @discardableResult
    static func run(_ command: [String]) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitForExit()
        return process.terminationStatus == 0
    }
}

/// The phone: localsendd, a LocalSend implementation from PyPI that nobody here wrote (installed by
/// scripts/setup.sh), run in a namespace and driven over its control socket as its own `localsendctl` does.
final class LocalSendPhone: @unchecked Sendable {
    static let daemon =
        (ProcessInfo.processInfo.environment["SHARE_TOOLS"] ?? "/opt/share-tools") + "/localsend/bin/localsendd"
    let directory: URL
    let downloads: URL
    let socket: String
    private(set) var process: Spawned
    private let command: [String]
    private let environment: [String: String]
    private(set) var fingerprint: String
    let alias: String

    /// `unattended`: uploads go straight in; otherwise the test answers them (it stays attached while it waits).
    init(in namespace: TestNamespace, alias: String, port: Int = 53317, pin: String? = nil, unattended: Bool = true)
        throws
    {
        self.alias = alias
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "share-phone-\(UUID().uuidString.prefix(8))")
        downloads = directory.appendingPathComponent("downloads")
        try FileManager.default.createDirectory(at: downloads, withIntermediateDirectories: true)
        socket = "/tmp/share-phone-\(UUID().uuidString.prefix(8)).sock"
        var arguments = [
            Self.daemon, "--alias", alias, "--port", "\(port)", "--download-dir", downloads.path, "--socket", socket,
            "--no-log-time", unattended ? "--unattended" : "--no-unattended",
        ]
        if let pin { arguments += ["--pin", pin] }
        command = namespace.wrapper + arguments
        environment = [
            "HOME": directory.path, "XDG_STATE_HOME": directory.appendingPathComponent("state").path,
            "XDG_CONFIG_HOME": directory.appendingPathComponent("config").path, "PYTHONUNBUFFERED": "1",
        ]
        (process, fingerprint) = try Self.spawn(command, environment)
    }

    private static func spawn(_ command: [String], _ environment: [String: String]) throws -> (Spawned, String) {
        let process = try Spawned(command[0], Array(command.dropFirst()), environment: environment)
        guard let line = process.waitForLine(containing: "fingerprint=", timeout: 30),
            let range = line.range(of: "fingerprint=")
        else {
            process.stop()
            throw TestFailure("localsendd did not start: \(process.output)")
        }
        return (process, String(line[range.upperBound...].prefix(64)))
    }

    /// The phone switched off, and on again (the same certificate: its fingerprint stays).
    func switchOff() { process.stop() }

    func switchOn() throws {
        unlink(socket)
        (process, fingerprint) = try Self.spawn(command, environment)
    }

    deinit {
        process.stop()
        try? FileManager.default.removeItem(at: directory)
        unlink(socket)
    }

    /// A connection to the control socket; while one is open the daemon asks instead of declining.
    final class Control: @unchecked Sendable {
        let fd: Int32
        var next = 0
        init(_ path: String) throws {
            fd = try Syscalls.unixConnect(path)
            Syscalls.setTimeouts(fd, seconds: 30)
        }
        deinit { Syscalls.close(fd) }

        /// Calls `method`; the result, or the error's code and message as a failure.
        func call(_ method: String, _ params: [String: Any] = [:]) throws -> [String: Any] {
            next += 1
            let id = next
            let request = try JSONSerialization.data(withJSONObject: ["id": id, "method": method, "params": params])
            try Syscalls.writeAll(fd, Array(request) + [0x0A])
            while true {
                let frame = try self.frame(deadline: Date().addingTimeInterval(30))
                guard (frame["id"] as? Int) == id else { continue }
                if frame["ok"] as? Bool == true { return frame["result"] as? [String: Any] ?? [:] }
                let error = frame["error"] as? [String: Any] ?? [:]
                throw TestFailure("localsendd \(method): \(error["code"] ?? "?"): \(error["message"] ?? "")")
            }
        }

        /// The next frame (a reply or a state event).
        func frame(deadline: Date) throws -> [String: Any] {
            while true {
                guard Syscalls.waitReadable([fd], timeout: max(0, deadline.timeIntervalSinceNow)) else {
                    throw TestFailure("localsendd said nothing in time")
                }
                guard let line = try Syscalls.readLine(fd) else { throw TestFailure("localsendd closed its socket") }
                if let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] { return object }
            }
        }

        /// Reads state events until `condition` holds for a state (its `get_state` first), within `timeout`.
        func waitForState(timeout: Double, _ condition: ([String: Any]) -> Bool) throws -> [String: Any] {
            // The state is asked for again after each event: an event may be older than the last request.
            let deadline = Date().addingTimeInterval(timeout)
            while true {
                let state = try call("get_state")
                if condition(state) { return state }
                _ = try self.frame(deadline: deadline)
            }
        }
    }

    func control() throws -> Control { try Control(socket) }

    /// The devices it has seen (aliases).
    func devices() throws -> [[String: Any]] {
        (try control().call("list_devices")["devices"] as? [[String: Any]]) ?? []
    }

    /// Sends `files` to the device named `to` and waits for the outcome: the result's `kind` (`sent`, `declined`,
    /// `pin_required`, …) and its detail.
    func send(_ files: [URL], to: String, pin: String? = nil, timeout: Double = 300) throws -> (
        kind: String, detail: String
    ) {
        let control = try self.control()
        _ = try? control.call("dismiss_result")
        var params: [String: Any] = ["to": to, "files": files.map(\.path)]
        if let pin { params["pin"] = pin }
        let started = try control.call("send", params)
        let transfer = started["transferId"] as? String ?? ""
        let state = try control.waitForState(timeout: timeout) { state in
            (state["active"] as? [String: Any]) == nil && (state["result"] as? [String: Any]) != nil
                && !transfer.isEmpty
        }
        let result = state["result"] as? [String: Any] ?? [:]
        return (result["kind"] as? String ?? "?", result["detail"] as? String ?? "")
    }
}
