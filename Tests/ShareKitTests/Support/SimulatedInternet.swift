import Foundation
import Testing

/// A small internet in network namespaces the test makes itself: two homes behind NAT and an "internet" between
/// them that hosts the servers. Every address on the public side is from the documentation ranges, and no veth end
/// is in the root namespace, so no packet a test sends can leave the test's own namespaces.
///
///     laptop 10.1.0.2 ── 10.1.0.1 [home1 NAT] 198.51.100.2 ── 198.51.100.1 ┐
///                                                                          [internet] 203.0.113.10 (servers)
///     desk   10.2.0.2 ── 10.2.0.1 [home2 NAT] 192.0.2.2    ── 192.0.2.1    ┘
///
/// Each home router masquerades what leaves it (nftables); `forward(port:)` opens the desk's port on its router
/// (DNAT), as a user forwarding a port would.
final class SimulatedInternet: @unchecked Sendable {  // used by one test at a time
    static let ip = "/usr/sbin/ip"
    static let nft = "/usr/sbin/nft"

    let tag: String
    let internet: String
    let home1: String
    let laptop: String
    let home2: String
    let desk: String
    let serverAddress = "203.0.113.10"
    let laptopAddress = "10.1.0.2"
    let deskAddress = "10.2.0.2"
    let home1Public = "198.51.100.2"
    let home2Public = "192.0.2.2"
    private var made: [String] = []

    /// The namespaces, or nil with the reason printed when namespaces cannot be made here (not root, no `ip`, no
    /// `nft`, `ip netns add` refused). Once they can be made, a failure to wire them up is the test's failure.
    static func make() throws -> SimulatedInternet? {
        guard geteuid() == 0 else {
            print("simulated internet: skipped (network namespaces need root)")
            return nil
        }
        for tool in [ip, nft] where !FileManager.default.isExecutableFile(atPath: tool) {
            print("simulated internet: skipped (\(tool) is not installed; scripts/setup.sh installs it)")
            return nil
        }
        let net = SimulatedInternet(tag: String(UUID().uuidString.prefix(5)).lowercased())
        let probe = runTool(ip, ["netns", "add", net.internet])
        guard probe.status == 0 else {
            print(
                "simulated internet: skipped (ip netns add: \(probe.output.trimmingCharacters(in: .whitespacesAndNewlines)))"
            )
            return nil
        }
        net.made.append(net.internet)
        try net.build()
        return net
    }

    private init(tag: String) {
        self.tag = tag
        internet = "shi-\(tag)"
        home1 = "shr1-\(tag)"
        laptop = "shl-\(tag)"
        home2 = "shr2-\(tag)"
        desk = "shd-\(tag)"
    }

    deinit {
        for namespace in made.reversed() { _ = runTool(Self.ip, ["netns", "del", namespace]) }
    }

    /// Runs `tool` inside `namespace`; status and output.
    @discardableResult
    func run(_ namespace: String, _ tool: String, _ arguments: [String], stdin: String? = nil, timeout: Double = 30)
        -> (status: Int32, output: String)
    {
        runTool(
            Self.ip, ["netns", "exec", namespace, tool] + arguments, stdin: stdin.map { Data($0.utf8) },
            timeout: timeout)
    }

    /// `ip netns exec NAMESPACE`: the wrapper that runs a process inside `namespace`.
    func wrapper(_ namespace: String) -> [String] { [Self.ip, "netns", "exec", namespace] }

    private func ip(_ arguments: [String]) throws {
        let result = runTool(Self.ip, arguments)
        guard result.status == 0 else {
            throw TestFailure("ip \(arguments.joined(separator: " ")): \(result.output)")
        }
    }

    private func nft(_ namespace: String, _ rules: String) throws {
        let result = run(namespace, Self.nft, ["-f", "-"], stdin: rules)
        guard result.status == 0 else { throw TestFailure("nft in \(namespace): \(result.output)") }
    }

    /// A veth pair between two namespaces, addressed and up.
    private func link(
        _ a: String, _ aName: String, _ aAddress: String, _ b: String, _ bName: String, _ bAddress: String
    )
        throws
    {
        try ip(["link", "add", aName, "type", "veth", "peer", "name", bName])
        try ip(["link", "set", aName, "netns", a])
        try ip(["link", "set", bName, "netns", b])
        try ip(["-n", a, "addr", "add", aAddress, "dev", aName])
        try ip(["-n", b, "addr", "add", bAddress, "dev", bName])
        try ip(["-n", a, "link", "set", aName, "up"])
        try ip(["-n", b, "link", "set", bName, "up"])
    }

    private func build() throws {
        for namespace in [home1, laptop, home2, desk] {
            try ip(["netns", "add", namespace])
            made.append(namespace)
        }
        for namespace in made { try ip(["-n", namespace, "link", "set", "lo", "up"]) }
        try link(laptop, "l1-\(tag)", "10.1.0.2/24", home1, "h1l-\(tag)", "10.1.0.1/24")
        try link(home1, "h1w-\(tag)", "198.51.100.2/24", internet, "i1-\(tag)", "198.51.100.1/24")
        try link(desk, "d2-\(tag)", "10.2.0.2/24", home2, "h2l-\(tag)", "10.2.0.1/24")
        try link(home2, "h2w-\(tag)", "192.0.2.2/24", internet, "i2-\(tag)", "192.0.2.1/24")
        // The servers' address, on the internet namespace's loopback interface (the routers route to it).
        try ip(["-n", internet, "addr", "add", "\(serverAddress)/32", "dev", "lo"])
        try ip(["-n", laptop, "route", "add", "default", "via", "10.1.0.1"])
        try ip(["-n", desk, "route", "add", "default", "via", "10.2.0.1"])
        try ip(["-n", home1, "route", "add", "default", "via", "198.51.100.1"])
        try ip(["-n", home2, "route", "add", "default", "via", "192.0.2.1"])
        for router in [home1, home2, internet] {
            let result = run(router, "/usr/sbin/sysctl", ["-qw", "net.ipv4.ip_forward=1"])
            guard result.status == 0 else { throw TestFailure("sysctl in \(router): \(result.output)") }
        }
        try nft(
            home1,
            """
            table ip nat {
              chain post { type nat hook postrouting priority 100; oifname "h1w-\(tag)" masquerade; }
            }
            """)
        try nft(
            home2,
            """
            table ip nat {
              chain post { type nat hook postrouting priority 100; oifname "h2w-\(tag)" masquerade; }
              chain pre { type nat hook prerouting priority -100; }
            }
            """)
    }

    /// Opens `port` on the desk's router: TCP to 192.0.2.2:`port` goes to the desk.
    func forward(port: Int) throws {
        try nft(home2, "add rule ip nat pre iifname \"h2w-\(tag)\" tcp dport \(port) dnat to \(deskAddress):\(port)")
    }

    /// Makes the desk's router drop what arrives for `port` without answering, as most NATs do for a port nobody
    /// forwarded (a connection attempt then waits for its timeout instead of being refused at once).
    func dropSilently(port: Int) throws {
        try nft(
            home2,
            """
            table ip quiet {
              chain input { type filter hook input priority 0; tcp dport \(port) drop; }
            }
            """)
    }

    /// Closes every forwarded port again.
    func closeForwards() throws {
        try nft(home2, "flush chain ip nat pre")
    }
}

/// A server (or any tool) running in a namespace; stopped when released.
final class NamespaceProcess: @unchecked Sendable {
    let process = Process()
    let output: OutputCollector

    init(_ net: SimulatedInternet, _ namespace: String, _ tool: String, _ arguments: [String], in directory: URL) throws
    {
        process.executableURL = URL(fileURLWithPath: SimulatedInternet.ip)
        process.arguments = ["netns", "exec", namespace, tool] + arguments
        process.currentDirectoryURL = directory
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        output = OutputCollector(pipe)
        try process.run()
    }

    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGTERM)
        let done = DispatchSemaphore(value: 0)
        let process = self.process
        DispatchQueue.global().async {
            process.waitForExit()
            done.signal()
        }
        if done.wait(timeout: .now() + 5) == .timedOut {
            kill(process.processIdentifier, SIGKILL)
            _ = done.wait(timeout: .now() + 5)
        }
    }

    deinit { stop() }
}

/// Syncthing's two servers from Debian, running in the simulated internet.
final class SyncthingServers: @unchecked Sendable {
    static let discoveryBinary = "/usr/bin/stdiscosrv"
    static let relayBinary = "/usr/bin/strelaysrv"

    let net: SimulatedInternet
    let folder: URL
    private(set) var discovery: NamespaceProcess?
    private(set) var relay: NamespaceProcess?
    private(set) var discoveryURL = ""
    private(set) var relayURL = ""
    let discoveryPort = 8443
    let relayPort = 22067

    /// Whether both servers are installed; prints why not.
    static var available: Bool {
        for tool in [discoveryBinary, relayBinary] where !FileManager.default.isExecutableFile(atPath: tool) {
            print(
                "skipped: \(tool) is not installed (scripts/setup.sh installs syncthing-discosrv and syncthing-relaysrv)"
            )
            return false
        }
        return true
    }

    init(net: SimulatedInternet, folder: URL) {
        self.net = net
        self.folder = folder
    }

    func startDiscovery() throws {
        let work = folder.appendingPathComponent("discovery", isDirectory: true)
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        let server = try NamespaceProcess(
            net, net.internet, Self.discoveryBinary,
            [
                "-listen", "\(net.serverAddress):\(discoveryPort)", "-replication-listen", "", "-db-dir",
                work.appendingPathComponent("db").path, "-cert", work.appendingPathComponent("cert.pem").path,
                "-key", work.appendingPathComponent("key.pem").path,
            ], in: work)
        guard let line = server.output.waitForLine(containing: "Server device ID is", timeout: 30) else {
            throw TestFailure("stdiscosrv did not start: \(server.output.text)")
        }
        let id = line.components(separatedBy: "Server device ID is ").last!.trimmingCharacters(in: .whitespaces)
        discovery = server
        discoveryURL = "https://\(net.serverAddress):\(discoveryPort)/?id=\(id)"
        // The server answers once its listener is up.
        _ = waitUntil(timeout: 10) {
            net.run(net.internet, "/usr/bin/python3", ["-c", Self.probe, net.serverAddress, "\(discoveryPort)"]).status
                == 0
        }
    }

    /// Starts (or restarts, with the same key and port) the relay; `rate` limits each session in bytes per second.
    func startRelay(rate: Int? = nil) throws {
        let work = folder.appendingPathComponent("relay", isDirectory: true)
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        var arguments = [
            "-keys", work.path, "-listen", "\(net.serverAddress):\(relayPort)", "-pools=", "-nat=false",
            "-status-srv=", "-ping-interval", "10s",
        ]
        if let rate { arguments += ["-per-session-rate", "\(rate)"] }
        let server = try NamespaceProcess(net, net.internet, Self.relayBinary, arguments, in: work)
        guard let line = server.output.waitForLine(containing: "URI: relay://", timeout: 30),
            let range = line.range(of: "id=")
        else { throw TestFailure("strelaysrv did not start: \(server.output.text)") }
        let id = line[range.upperBound...].prefix { $0 != "&" }
        relay = server
        relayURL = "relay://\(net.serverAddress):\(relayPort)/?id=\(id)"
        _ = waitUntil(timeout: 10) {
            net.run(net.internet, "/usr/bin/python3", ["-c", Self.probe, net.serverAddress, "\(relayPort)"]).status == 0
        }
    }

    func stopRelay() {
        relay?.stop()
        relay = nil
    }

    /// Exits 0 once a TCP port accepts connections.
    static let probe = "import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 1).close()"
}
