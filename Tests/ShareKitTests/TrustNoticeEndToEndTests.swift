import Foundation
import Testing

extension EndToEndAgents {
    /// Trust you can take back: a revocation signed by one of the owner's devices reaches every other one, including
    /// one that was away; a rotated key keeps working with the owner's devices without pairing again.
    @Suite(.serialized) struct TrustNoticeEndToEndTests {
        /// Notices are tried every second here (10 s by default).
        static let fast = ["SHARE_NOTICE_INTERVAL": "1"]

        /// The owner's devices trusting each other as team, each with an agent on a port of its own.
        func owners(_ names: [String]) throws -> [TestDevice] {
            let devices = try names.map { try TestDevice($0) }
            for device in devices {
                for other in devices where other !== device {
                    device.trust(other, address: "127.0.0.1:\(port(of: other))", flags: ["--team"])
                }
            }
            return devices
        }

        /// A port for each device's agent, fixed for the test.
        func port(of device: TestDevice) -> Int {
            if let port = ports[device.name] { return port }
            let port = freePort()
            ports[device.name] = port
            return port
        }

        final class Ports: @unchecked Sendable { var map: [String: Int] = [:] }
        let table = Ports()
        var ports: [String: Int] {
            get { table.map }
            nonmutating set { table.map = newValue }
        }

        func agent(_ device: TestDevice) throws -> BackgroundShare {
            let agent = try device.background(
                ["agent", "--port", "\(port(of: device))", "--listen", "127.0.0.1", "--no-discovery"],
                environment: Self.fast)
            guard agent.stderr.waitForLine(containing: "listening on port", timeout: 30) != nil else {
                agent.stop()
                throw TestFailure("agent did not start: \(agent.stderr.text)")
            }
            return agent
        }

        @Test func aRevokedDeviceIsRefusedByEveryOtherIncludingOneThatWasAway() throws {
            let devices = try owners(["phone", "laptop", "desk", "tablet"])
            let (phone, laptop, desk, tablet) = (devices[0], devices[1], devices[2], devices[3])
            let phoneAgent = try agent(phone)
            defer { phoneAgent.stop() }
            let laptopAgent = try agent(laptop)
            defer { laptopAgent.stop() }
            let tabletAgent = try agent(tablet)
            defer { tabletAgent.stop() }
            // The desk is away. The tablet is lost: the phone revokes it.
            #expect(tablet.run(["ping", "laptop"]).status == 0)
            let revoked = phone.run(["trust", "revoke", "tablet"])
            #expect(revoked.status == 0, "\(revoked.stderr)")
            #expect(
                waitUntil(timeout: 20) { !laptop.run(["trust", "list"]).stdout.contains("tablet") },
                "the laptop took the revocation")
            #expect(tablet.run(["ping", "laptop"]).status == 77)
            #expect(tablet.run(["ping", "phone"]).status == 77)
            // The desk comes back: it is told too, and refuses the tablet.
            #expect(desk.run(["trust", "list"]).stdout.contains("tablet"))
            let deskAgent = try agent(desk)
            defer { deskAgent.stop() }
            #expect(
                waitUntil(timeout: 30) { !desk.run(["trust", "list"]).stdout.contains("tablet") },
                "the desk took the revocation when it came back")
            #expect(tablet.run(["ping", "desk"]).status == 77)
            // The others still reach each other.
            #expect(laptop.run(["ping", "desk"]).status == 0)
        }

        @Test func aRotatedKeyKeepsWorkingWithTheOwnersDevices() throws {
            let devices = try owners(["phone", "laptop", "desk"])
            let (phone, laptop, desk) = (devices[0], devices[1], devices[2])
            let friend = try TestDevice("friend")
            friend.trust(phone, address: "127.0.0.1:\(port(of: phone))", flags: ["--group", "climbing"])
            phone.trust(friend, address: "127.0.0.1:\(port(of: friend))", flags: ["--group", "climbing"])
            let laptopAgent = try agent(laptop)
            defer { laptopAgent.stop() }
            let deskAgent = try agent(desk)
            defer { deskAgent.stop() }
            let friendAgent = try agent(friend)
            defer { friendAgent.stop() }
            let oldID = phone.id
            let rotated = phone.run(["id", "--rotate"])
            #expect(rotated.status == 0, "\(rotated.stderr)")
            let newID = phone.id
            #expect(newID != oldID)
            let phoneAgent = try agent(phone)
            defer { phoneAgent.stop() }
            #expect(
                waitUntil(timeout: 30) {
                    laptop.run(["trust", "list"]).stdout.contains(newID)
                        && desk.run(["trust", "list"]).stdout.contains(newID)
                }, "the owner's devices took the new key")
            #expect(!laptop.run(["trust", "list"]).stdout.contains(oldID))
            // Both ways, without pairing again.
            #expect(phone.run(["ping", "laptop"]).status == 0)
            #expect(laptop.run(["ping", "phone"]).status == 0)
            // A friend's device is told to pair again: it trusts neither key now.
            #expect(waitUntil(timeout: 30) { !friend.run(["trust", "list"]).stdout.contains("phone") })
            #expect(friendAgent.stderr.text.contains("must pair again"), "\(friendAgent.stderr.text)")
        }
    }
}
