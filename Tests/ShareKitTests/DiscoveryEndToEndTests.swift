import Foundation
import Testing

extension EndToEnd {
    /// Agents announce themselves on the local network (UDP multicast and broadcast, looped back on this machine):
    /// a trusted device becomes reachable by name without a recorded address; an untrusted one is listed as such
    /// and never sent to.
    @Suite(.serialized) struct DiscoveryEndToEndTests {
        @Test func agentsFindEachOtherAndOnlyTrustedOnesAreUsed() throws {
            // Loopback multicast, on this machine only (not across network namespaces).
            let port = String(freeUDPPort())
            let laptop = try TestDevice("laptop")
            let desk = try TestDevice("desk")
            let stranger = try TestDevice("stranger")
            laptop.trust(desk, flags: ["--team"])  // no address: it must be discovered
            desk.trust(laptop, flags: ["--team"])
            let flags = ["--discovery-port", port, "--announce-interval", "0.2", "--discovery-interface", "127.0.0.1"]
            let (deskAgent, deskPort) = try desk.startAgent(flags)
            defer { deskAgent.stop() }
            let (strangerAgent, _) = try stranger.startAgent(flags)
            defer { strangerAgent.stop() }
            let (laptopAgent, _) = try laptop.startAgent(flags)
            defer { laptopAgent.stop() }
            var peers = ""
            let heard = waitUntil(timeout: 30) {
                peers = laptop.run(["peers"]).stdout
                let desk = peers.split(separator: "\n").first { $0.hasPrefix("desk") } ?? ""
                return desk.contains("(discovered)") && desk.contains("reachable") && peers.contains("stranger")
            }
            #expect(heard, "\(peers)")
            let deskLine = try #require(peers.split(separator: "\n").first { $0.hasPrefix("desk") })
            #expect(deskLine.contains("trusted") && deskLine.contains(":\(deskPort) (discovered)"))
            #expect(deskLine.contains("reachable"))
            let strangerLine = try #require(peers.split(separator: "\n").first { $0.hasPrefix("stranger") })
            #expect(strangerLine.contains("not trusted"))
            // Reached by name at the discovered address.
            let ping = laptop.run(["ping", "desk"])
            #expect(ping.status == 0, "\(ping.stderr) \(peers)")
            #expect(ping.stdout.contains(":\(deskPort)"))
            // The stranger was heard but is not a send target.
            let refused = laptop.run(["send", "--direct", "--text", "hi", "--to", "stranger"])
            #expect(refused.status == 64, "\(refused.stderr)")
        }
    }
}

/// A UDP port nothing on this machine is bound to now.
func freeUDPPort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            _ = bind(fd, $0, length)
            return getsockname(fd, $0, &length)
        }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

extension EndToEnd.DiscoveryEndToEndTests {
    /// Two network namespaces joined by a veth pair, one agent in each: discovery crosses a real (virtual) link.
    /// Needs root and `ip netns`; without them the test says so and checks nothing further (the loopback test above
    /// still runs).
    @Test func agentsInTwoNetworkNamespacesFindEachOther() throws {
        let tag = String(UUID().uuidString.prefix(6)).lowercased()
        let (a, b) = ("sharea-\(tag)", "shareb-\(tag)")
        let ip = "/usr/sbin/ip"
        func sh(_ arguments: [String]) -> Bool { runTool(ip, arguments).status == 0 }
        guard geteuid() == 0, FileManager.default.isExecutableFile(atPath: ip), sh(["netns", "add", a]) else {
            print("discovery across namespaces: skipped (needs root and ip netns); loopback multicast was used instead")
            return
        }
        defer {
            _ = sh(["netns", "del", a])
            _ = sh(["netns", "del", b])
        }
        let setUp =
            sh(["netns", "add", b])
            && sh(["link", "add", "va-\(tag)", "type", "veth", "peer", "name", "vb-\(tag)"])
            && sh(["link", "set", "va-\(tag)", "netns", a]) && sh(["link", "set", "vb-\(tag)", "netns", b])
            && sh(["-n", a, "addr", "add", "10.231.0.1/24", "dev", "va-\(tag)"])
            && sh(["-n", b, "addr", "add", "10.231.0.2/24", "dev", "vb-\(tag)"])
            && sh(["-n", a, "link", "set", "va-\(tag)", "up"]) && sh(["-n", b, "link", "set", "vb-\(tag)", "up"])
            && sh(["-n", a, "link", "set", "lo", "up"]) && sh(["-n", b, "link", "set", "lo", "up"])
            && sh(["-n", a, "route", "add", "224.0.0.0/4", "dev", "va-\(tag)"])
            && sh(["-n", b, "route", "add", "224.0.0.0/4", "dev", "vb-\(tag)"])
        #expect(setUp, "could not build the namespaces")
        guard setUp else { return }
        print("discovery across namespaces: \(a) (10.231.0.1) and \(b) (10.231.0.2) joined by a veth pair")
        let laptop = try TestDevice("laptop")
        let desk = try TestDevice("desk")
        laptop.trust(desk, flags: ["--team"])  // no address: it must be discovered across the link
        desk.trust(laptop, flags: ["--team"])
        let flags = ["--port", "0", "--listen", "0.0.0.0", "--announce-interval", "0.2"]
        let deskAgent = try BackgroundShare(
            desk.withConfig(["agent"] + flags), wrapper: [ip, "netns", "exec", b])
        defer { deskAgent.stop() }
        let laptopAgent = try BackgroundShare(
            laptop.withConfig(["agent"] + flags), wrapper: [ip, "netns", "exec", a])
        defer { laptopAgent.stop() }
        let line = try #require(deskAgent.stderr.waitForLine(containing: "listening on port", timeout: 30))
        let deskPort = try #require(TestDevice.port(in: line))
        var peers = ""
        let heard = waitUntil(timeout: 30) {
            let run = try? BackgroundShare(laptop.withConfig(["peers"]), wrapper: [ip, "netns", "exec", a])
            _ = run?.wait(timeout: 10)
            peers = run?.stdout.text ?? ""
            return peers.contains("10.231.0.2:\(deskPort)")
        }
        #expect(heard, "\(peers)")
        let ping = try BackgroundShare(laptop.withConfig(["ping", "desk"]), wrapper: [ip, "netns", "exec", a])
        #expect(ping.wait(timeout: 30) == 0, "\(ping.stderr.text)")
        #expect(ping.stdout.text.contains("10.231.0.2:\(deskPort)"))
    }
}
