import Foundation
import Testing

/// Garbage, half-open and stalled connections never take the listener down.
@Suite(.serialized) struct HostileConnectionTests {
    @Test func randomBytesHalfOpenAndStalledHandshakesAreSurvived() throws {
        let desk = try TestDevice("desk")
        let friend = try TestDevice("friend")
        desk.trust(friend)
        let (agent, port) = try desk.startAgent(["--handshake-timeout", "2"])
        defer { agent.stop() }
        friend.trust(desk, address: "127.0.0.1:\(port)")

        // Random bytes: the handshake fails at once and the connection closes.
        let garbage = try #require(RawClient(port: port))
        garbage.send((0..<4096).map { _ in UInt8.random(in: 0...255) })
        #expect(garbage.secondsUntilClosed(timeout: 10) != nil)

        // A client that starts a handshake and stops: closed after the handshake timeout, not before.
        let stalled = try #require(RawClient(port: port))
        stalled.send([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC, 0x03, 0x03])
        let halfOpen = try #require(RawClient(port: port))
        let stalledAfter = try #require(stalled.secondsUntilClosed(timeout: 15))
        #expect(stalledAfter >= 1.5 && stalledAfter < 10)
        // A connection that never says anything is closed by the same timeout.
        #expect(halfOpen.secondsUntilClosed(timeout: 15) != nil)

        #expect(friend.run(["ping", "desk"]).status == 0)
    }

    @Test func twoHundredAbandonedConnectionsLeaveTheListenerUpAndMemoryFlat() throws {
        let desk = try TestDevice("desk")
        let friend = try TestDevice("friend")
        desk.trust(friend)
        let (agent, port) = try desk.startAgent(["--handshake-timeout", "2"])
        defer { agent.stop() }
        friend.trust(desk, address: "127.0.0.1:\(port)")
        #expect(friend.run(["ping", "desk"]).status == 0)
        let before = try #require(residentKiB(agent.pid))

        var clients: [RawClient] = []
        for _ in 0..<200 {
            if let client = RawClient(port: port) { clients.append(client) }
        }
        #expect(clients.count == 200)
        // While they hang, a trusted ping still gets through.
        #expect(friend.run(["ping", "desk"]).status == 0)
        for client in clients { #expect(client.secondsUntilClosed(timeout: 20) != nil) }
        clients.removeAll()

        #expect(friend.run(["ping", "desk", "--count", "3"]).status == 0)
        let after = try #require(residentKiB(agent.pid))
        #expect(after - before < 16 * 1024, "RSS grew from \(before) KiB to \(after) KiB")
        // A second wave costs no more than the first did.
        for _ in 0..<200 { if let client = RawClient(port: port) { clients.append(client) } }
        for client in clients { _ = client.secondsUntilClosed(timeout: 20) }
        clients.removeAll()
        #expect(friend.run(["ping", "desk"]).status == 0)
        let again = try #require(residentKiB(agent.pid))
        #expect(again - after < 4 * 1024, "RSS grew from \(after) KiB to \(again) KiB on the second wave")
    }
}
