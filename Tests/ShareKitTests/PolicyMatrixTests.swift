import Foundation
import ShareTestSupport
import Synchronization
import Testing

extension EndToEndAgents {
    /// Every cell of docs/SECURITY.md's capability matrix, through the binary: each relation a device can have to
    /// the phone's agent tries each capability, and is let in or refused exactly as the matrix says.
    @Suite(.serialized) struct PolicyMatrixTests {
        static let attacker = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/attacker.py")

        /// The relations, as rows of the matrix.
        enum Relation: String, CaseIterable {
            case untrusted, trusted, group, team, watch
        }

        /// The capabilities, as columns.
        enum Capability: String, CaseIterable {
            case ping, sendToInbox, pasteClipboard, attachAsWatch, sendToAWatch, sendFromAWatch, deliverForwarded
            case shareFolders
        }

        /// docs/SECURITY.md, as data: who may do what.
        static let matrix: [Relation: Set<Capability>] = [
            .untrusted: [],
            .trusted: [.ping, .sendToInbox],
            .group: [.ping, .sendToInbox],
            .team: [.ping, .sendToInbox, .pasteClipboard, .sendToAWatch, .deliverForwarded, .shareFolders],
            .watch: [.ping, .sendToInbox, .pasteClipboard, .attachAsWatch, .sendFromAWatch, .deliverForwarded],
        ]

        @Test func everyRelationAgainstEveryCapability() throws {
            let phone = try TestDevice("phone")
            let laptop = try TestDevice("laptop")  // the owner's other device: a target for a watch's sends
            let myWatch = try TestDevice("my-watch")  // the phone's watch: a target for the owner's sends
            var devices: [Relation: TestDevice] = [:]
            for relation in Relation.allCases { devices[relation] = try TestDevice(relation.rawValue) }
            for (relation, device) in devices {
                switch relation {
                case .untrusted: break
                case .trusted: phone.trust(device)
                case .group: phone.trust(device, flags: ["--group", "climbing"])
                case .team: phone.trust(device, flags: ["--team"])
                case .watch: phone.trust(device, flags: ["--team", "--watch"])
                }
            }
            phone.trust(laptop, flags: ["--team"])
            phone.trust(myWatch, flags: ["--team", "--watch"])
            let inbox = try phone.folder("inbox")
            let (agent, port) = try phone.startAgent(["--inbox", inbox.path, "--no-discovery"])
            defer { agent.stop() }
            for device in devices.values { device.trust(phone, address: "127.0.0.1:\(port)", flags: ["--team"]) }
            // The laptop's agent takes forwarded items from the phone (its owner's device).
            laptop.trust(phone, flags: ["--team"])
            let (laptopAgent, laptopPort) = try laptop.startAgent(["--no-discovery"])
            defer { laptopAgent.stop() }
            phone.trust(laptop, address: "127.0.0.1:\(laptopPort)", flags: ["--team"])
            // The phone has seen its watch attach (it knows what the watch accepts), and has something copied.
            myWatch.trust(phone, address: "127.0.0.1:\(port)", flags: ["--team"])
            let attached = try myWatch.background(["watch", "--agent", "phone", "--json"])
            #expect(attached.stdout.waitForLine(containing: "\"event\":\"attached\"", timeout: 30) != nil)
            #expect(phone.run(["copy", "--text", "the door code"]).status == 0)

            // The relations are tried at once, each by its own device (the phone's agent serves them side by side);
            // one relation's capabilities one after another.
            let results = Mutex<[Relation: Set<Capability>]>([:])
            let errors = Mutex<[String]>([])
            let all = devices
            DispatchQueue.concurrentPerform(iterations: Relation.allCases.count) { index in
                let relation = Relation.allCases[index]
                let device = all[relation]!
                var allowed: Set<Capability> = []
                do {
                    for capability in Capability.allCases where capability != .deliverForwarded {
                        if try tries(capability, device: device, port: port) { allowed.insert(capability) }
                    }
                    // Delivering forwarded items is asked of the receiver by the forwarding agent: here a receiver
                    // that has this relation to the phone gets a watch's item through it.
                    if try receivesForwarded(relation, phone: phone, watch: myWatch) {
                        allowed.insert(.deliverForwarded)
                    }
                } catch {
                    errors.withLock { $0.append("\(relation): \(error)") }
                }
                results.withLock { $0[relation] = allowed }
            }
            #expect(errors.withLock { $0 }.isEmpty, "\(errors.withLock { $0 })")
            let found = results.withLock { $0 }
            attached.stop()

            for relation in Relation.allCases {
                let missing = Self.matrix[relation]!.subtracting(found[relation]!)
                let extra = found[relation]!.subtracting(Self.matrix[relation]!)
                #expect(missing.isEmpty, "\(relation) could not: \(missing.map(\.rawValue).sorted())")
                #expect(extra.isEmpty, "\(relation) could: \(extra.map(\.rawValue).sorted())")
            }
        }

        /// Whether `device` succeeds at `capability` against the phone.
        func tries(_ capability: Capability, device: TestDevice, port: Int) throws -> Bool {
            switch capability {
            case .ping:
                return device.run(["ping", "phone", "--timeout", "5"]).status == 0
            case .sendToInbox:
                return device.run(["send", "--direct", "--text", "hello", "--to", "phone"]).status == 0
            case .pasteClipboard:
                let result = device.run(["paste", "--from", "phone"])
                return result.status == 0 && result.stdout.contains("the door code")
            case .attachAsWatch:
                return attack("attach-as-watch", device: device, port: port).contains("attached")
            case .shareFolders:
                return attack("share-folders", device: device, port: port).contains("linked")
            case .sendToAWatch:
                return device.run(["send", "--direct", "--via", "phone", "--to", "my-watch", "--text", "x"]).status == 0
            case .sendFromAWatch:
                return device.run(["watch", "send", "--agent", "phone", "--to", "laptop", "--text", "x"]).status == 0
            case .deliverForwarded:
                return false
            }
        }

        /// What the phone answered `scenario` of Fixtures/attacker.py, run as `device`.
        func attack(_ scenario: String, device: TestDevice, port: Int) -> String {
            runTool(
                "/usr/bin/python3",
                [
                    Self.attacker.path, "\(port)", device.config.appendingPathComponent("cert.pem").path,
                    device.config.appendingPathComponent("key.pem").path, scenario,
                ]
            ).output
        }

        /// A receiver that trusts the phone with `relation` is sent a watch's item through the phone (which trusts the
        /// receiver as its owner's device): whether the receiver takes it.
        func receivesForwarded(_ relation: Relation, phone: TestDevice, watch: TestDevice) throws -> Bool {
            let receiver = try TestDevice("to-\(relation.rawValue)")
            switch relation {
            case .untrusted: break
            case .trusted: receiver.trust(phone)
            case .group: receiver.trust(phone, flags: ["--group", "climbing"])
            case .team: receiver.trust(phone, flags: ["--team"])
            case .watch: receiver.trust(phone, flags: ["--team", "--watch"])
            }
            // The receive's own deadline scales with the machine as the test's do (at load 16 the item took longer
            // than a fixed 20 s to come through the phone).
            let (receive, port) = try receiver.startReceive(
                ["--timeout", String(Int(Patience.seconds(20)))], into: try receiver.folder("in"))
            defer { receive.stop() }
            phone.trust(receiver, address: "127.0.0.1:\(port)", flags: ["--team"])
            let sent = watch.run(["watch", "send", "--agent", "phone", "--to", receiver.name, "--text", "via"])
            return sent.status == 0 && receive.wait(timeout: 20) == 0
        }
    }
}
