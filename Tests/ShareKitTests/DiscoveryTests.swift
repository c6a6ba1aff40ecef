import Foundation
import ShareKit
import ShareTrust
import ShareProtocol
import ShareTLS
import Testing
import ShareReach
import ShareEngine
import ShareAgent

/// The discovery part of an agent on its own, on loopback multicast.
@Suite struct DiscoveryTests {
    /// A device announcing more often than the listener's receive timeout (here every 0.2 s, under 0.5 s) is still
    /// written down for `share peers` within the write interval: the listener does not wait for a quiet moment.
    @Test func whatIsHeardIsWrittenWhileAnnouncementsKeepComing() throws {
        let paths = scratchPaths("listener")
        defer { try? FileManager.default.removeItem(at: paths.config) }
        let device = try LocalDevice.loadOrCreate(paths: paths, defaultName: "listener")
        try DevicePaths.ensurePrivateDirectory(paths.state)
        let port = freeUDPPort()
        let discovery = try Discovery(
            device: device, listenPort: 4_000, port: port, interval: 3_600, interface: "127.0.0.1",
            trust: try TrustCache(file: paths.trustFile))
        discovery.start()
        defer { discovery.stop() }
        let sender = AnnouncementSender(port: port)
        let other = DeviceID(bytes: randomID())
        var written = false
        // Steady announcements for at most twice the write interval, paced, never a gap of 0.5 s.
        let deadline = Date().addingTimeInterval(2 * Discovery.writeInterval + 1)
        while !written && Date() < deadline {
            sender.announce(id: other, name: "desk", port: 4_001)
            written = DiscoveredPeer.load(paths).contains { $0.id == other.description && $0.address.port == 4_001 }
            Thread.sleep(forTimeInterval: 0.2)
        }
        #expect(written, "nothing was written while the announcements kept coming")
    }
}
