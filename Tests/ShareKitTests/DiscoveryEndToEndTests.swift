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
                return peers.contains("desk") && peers.contains("stranger")
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
