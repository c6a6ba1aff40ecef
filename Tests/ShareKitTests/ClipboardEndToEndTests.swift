import Foundation
import Testing

extension EndToEnd {
    /// Lazy clipboard: a copy publishes only a description; a paste on another of the owner's devices negotiates
    /// and only then are bytes produced.
    @Suite(.serialized) struct ClipboardEndToEndTests {
        @Test func copyOnOneDevicePasteOnAnotherAsTheRichTypeThenAsText() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let (agent, port) = try laptop.startAgent(["--no-discovery"])
            defer { agent.stop() }
            desk.trust(laptop, address: "127.0.0.1:\(port)", flags: ["--team"])
            #expect(laptop.run(["profile", "add", "Juan", "--fact", "Climbed Aneto"]).status == 0)
            #expect(laptop.run(["copy", "--profile", "Juan"]).status == 0)
            // Nothing was produced by the copy: the profile goes only when pasted, as what the paster accepts.
            let rich = desk.run(["paste"])
            #expect(rich.status == 0, "\(rich.stderr)")
            #expect(desk.run(["profile", "list"]).stdout.hasPrefix("Juan"))
            let text = desk.run(["paste", "--type", "public.plain-text", "--quiet"])
            #expect(text.status == 0)
            // Exactly the pasted bytes (`share paste | od -c`): no newline added, no status line.
            #expect(text.stdout == "Juan")
            // A newer copy replaces the older one.
            #expect(laptop.run(["copy", "--text", "newer"]).status == 0)
            #expect(desk.run(["paste", "--from", "laptop", "--quiet"]).stdout == "newer")
        }

        @Test func anExpiredCopyIsGone() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let (agent, port) = try laptop.startAgent(["--no-discovery"])
            defer { agent.stop() }
            desk.trust(laptop, address: "127.0.0.1:\(port)", flags: ["--team"])
            #expect(laptop.run(["copy", "--text", "brief", "--expire", "0.3"]).status == 0)
            // Waiting for the expiry time itself (nothing signals it).
            Thread.sleep(forTimeInterval: 0.6)
            let result = desk.run(["paste", "--from", "laptop"])
            #expect(result.status == 3)
            #expect(result.stderr.contains("expired"), "\(result.stderr)")
        }

        @Test func onlyTheOwnersDevicesMayPaste() throws {
            let laptop = try TestDevice("laptop")
            let friend = try TestDevice("friend")
            laptop.trust(friend)  // trusted, but not the owner's device
            let (agent, port) = try laptop.startAgent(["--no-discovery"])
            defer { agent.stop() }
            friend.trust(laptop, address: "127.0.0.1:\(port)")
            #expect(laptop.run(["copy", "--text", "private"]).status == 0)
            let result = friend.run(["paste", "--from", "laptop"])
            #expect(result.status == 3)
            #expect(result.stderr.contains("only with its owner's devices"), "\(result.stderr)")
            #expect(!result.stdout.contains("private"))
        }
    }
}
