import Foundation
import Testing

extension EndToEnd {
    /// What is piped into `share send` is sent as what it is: text is a text (printed by the receiver), a tar stays a
    /// tar, with or without `-`.
    @Suite(.serialized) struct StandardInputTests {
        @Test func pipedTextIsSentAsTextWithoutADash() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let (receiver, port) = try desk.startReceive(into: inbox)
            defer { receiver.stop() }
            let sent = laptop.run(["send", "--to", "127.0.0.1:\(port)"], stdin: "hi from a pipe\n")
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(receiver.wait(timeout: 30) == 0, "\(receiver.stderr.text)")
            #expect(receiver.stdout.text == "hi from a pipe\n", "\(receiver.stdout.text)")
            let saved = try FileManager.default.contentsOfDirectory(atPath: inbox.path).filter { !$0.hasPrefix(".") }
            #expect(saved.isEmpty, "printed, not saved: \(saved)")
        }

        @Test func aDashTypesStandardInputByItsContent() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let source = try laptop.folder("src")
            try Data("inside the tar\n".utf8).write(to: source.appendingPathComponent("note.txt"))
            let tar = laptop.directory.appendingPathComponent("bundle.tar")
            try #require(runTool("/bin/tar", ["cf", tar.path, "-C", source.path, "note.txt"]).status == 0)
            let (receiver, port) = try desk.startReceive(into: inbox)
            defer { receiver.stop() }
            let sent = try BackgroundShare(
                laptop.withConfig(["send", "-", "--to", "127.0.0.1:\(port)"]),
                wrapper: ["/bin/sh", "-c", "exec \"$0\" \"$@\" < \(tar.path)"])
            #expect(sent.wait(timeout: 60) == 0, "\(sent.stderr.text)")
            #expect(receiver.wait(timeout: 30) == 0, "\(receiver.stderr.text)")
            #expect(try Data(contentsOf: inbox.appendingPathComponent("stdin.tar")) == Data(contentsOf: tar))
            #expect(receiver.stdout.text.isEmpty)

            let (again, port2) = try desk.startReceive(into: inbox)
            defer { again.stop() }
            let text = laptop.run(["send", "-", "--to", "127.0.0.1:\(port2)"], stdin: "dashed text\n")
            #expect(text.status == 0, "\(text.stderr)")
            #expect(again.wait(timeout: 30) == 0)
            #expect(again.stdout.text == "dashed text\n", "\(again.stdout.text)")
        }

        @Test func emptyStandardInputIsNothingToSend() throws {
            let laptop = try TestDevice("laptop")
            let sent = laptop.run(["send", "--to", "127.0.0.1:9"], stdin: "")
            #expect(sent.status == 64, "\(sent.stderr)")
            #expect(sent.stderr.contains("nothing to send"), "\(sent.stderr)")
        }
    }
}

extension EndToEnd {
    /// The README's own example: `share receive` on the desk, `share send … --to desk` on the laptop, by name, with
    /// no flags: the receive takes the port the laptop learned at pairing.
    @Suite(.serialized) struct ReceiveByNameTests {
        @Test func aSendByNameFindsTheWaitingReceive() throws {
            let desk = try TestDevice("desk")
            let laptop = try TestDevice("laptop")
            let known = freePort()
            try Data("{\"port\": \(known)}".utf8).write(to: desk.config.appendingPathComponent("agent.json"))
            desk.trust(laptop, flags: ["--team"])
            laptop.trust(desk, address: "127.0.0.1:\(known)", flags: ["--team"])

            let nobody = laptop.run(["send", "--text", "anyone there?", "--to", "desk", "--direct"])
            #expect(nobody.status == 69, "\(nobody.stderr)")
            #expect(nobody.stderr.contains("on desk, run share receive"), "\(nobody.stderr)")

            let inbox = try desk.folder("inbox")
            let receiver = try desk.background(["receive", "--listen", "127.0.0.1", "--into", inbox.path])
            defer { receiver.stop() }
            let line = try #require(receiver.stderr.waitForLine(containing: "waiting on port", timeout: 30))
            #expect(TestDevice.port(in: line) == known, "\(line)")
            let sent = laptop.run(["send", "--text", "dinner at eight?", "--to", "desk", "--direct"])
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(receiver.wait(timeout: 30) == 0, "\(receiver.stderr.text)")
            #expect(receiver.stdout.text == "dinner at eight?\n")
        }
    }
}
