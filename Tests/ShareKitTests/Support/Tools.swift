import Foundation
import Synchronization
import Glibc
import ShareTestSupport

/// Runs an external tool with a time bound; returns status and combined output.
@discardableResult
func runTool(
    _ path: String, _ arguments: [String], stdin: Data? = nil, timeout: Double = 30,
    currentDirectory: URL? = nil
) -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(Patience.environment) { $1 }
    if let currentDirectory { process.currentDirectoryURL = currentDirectory }
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    let collector = OutputCollector(pipe)
    let input = Pipe()
    process.standardInput = stdin == nil ? FileHandle.nullDevice : input
    do { try process.run() } catch { return (-1, "\(error)") }
    if let stdin {
        input.fileHandleForWriting.write(stdin)
        try? input.fileHandleForWriting.close()
    }
    if !process.waitForExit(seconds: Patience.seconds(timeout)) {
        kill(process.processIdentifier, SIGKILL)
        _ = process.waitForExit(seconds: 5)
        collector.waitForClose(timeout: 2)
        return (-9, collector.text)
    }
    collector.waitForClose(timeout: 2)
    return (process.terminationStatus, collector.text)
}

/// A port that was free a moment ago (for tools that cannot pick their own), never one handed out before in this
/// process.
func freePort() -> Int {
    // Below the kernel's ephemeral range (32768–60999 here): a port chosen from that range can be taken by any
    // outgoing connection of the tests running beside this one before the agent binds it (or binds it again after a
    // restart), which failed a run with "Address already in use". A test keeps its agents' ports across restarts,
    // so a port is free to bind while it is still spoken for: each test process takes its ports from its job's slot
    // of the range (scripts/run-suite.py), and never twice (a run failed when two tests picked the same one).
    let environment = ProcessInfo.processInfo.environment
    let slots = max(1, Int(environment["SHARE_TEST_PORT_SLOTS"] ?? "") ?? 1)
    let slot = min(slots - 1, max(0, Int(environment["SHARE_TEST_PORT_SLOT"] ?? "") ?? 0))
    let width = 12_000 / slots
    let range = (20_000 + slot * width)..<(20_000 + (slot + 1) * width)
    for _ in 0..<400 {
        let port = Int.random(in: range)
        let fresh = handedOut.withLock { $0.insert(port).inserted }
        if fresh, canBind(port) { return port }
    }
    return boundPort(0)
}

private let handedOut = Mutex<Set<Int>>([])

private func canBind(_ port: Int) -> Bool { boundPort(port) == port }

/// Binds 127.0.0.1:`port` (0: any) and closes it again; the port it had, or 0 when binding failed.
private func boundPort(_ port: Int) -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0 else { return 0 }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// A raw TCP client for hostile-input tests.
final class RawClient {
    let fd: Int32

    /// Connects to `127.0.0.1:port` from `source` (any 127.x.y.z address is this machine's loopback).
    init?(port: Int, source: String? = nil) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0 else {
                close(fd)
                return nil
            }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let ok = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard ok == 0 else {
            close(fd)
            return nil
        }
        self.fd = fd
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Seconds until the peer closes (EOF or reset), or nil if it stays open for `timeout`.
    func secondsUntilClosed(timeout: Double) -> Double? {
        let start = Date()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Date().timeIntervalSince(start) < timeout {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let remaining = timeout - Date().timeIntervalSince(start)
            guard poll(&pfd, 1, Int32(max(1, remaining * 1000))) > 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return Date().timeIntervalSince(start) }
        }
        return nil
    }
}
