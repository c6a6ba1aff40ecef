import Foundation
import Testing

extension EndToEndAgents {
    /// A reader that goes away (`share … | head -1`) is not a crash: the one console writer meets EPIPE, the process
    /// stops cleanly with a documented status, and a peer is told the receiver stopped, not that a connection was
    /// lost.
    @Suite struct ClosedPipeTests {
        /// Runs `share ARGS` with its standard output (or standard error) read by a program that has already left,
        /// and exits with share's own status.
        static func closed(_ stream: String) -> [String] {
            let redirect = stream == "stdout" ? "" : "2>&1"
            return ["/bin/bash", "-c", "\"$0\" \"$@\" \(redirect) | true; exit ${PIPESTATUS[0]}"]
        }

        @Test func receiveWhoseReaderLeftStopsCleanlyAndTellsTheSender() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let receiver = try BackgroundShare(
                desk.withConfig(["receive", "--port", "0", "--listen", "127.0.0.1", "--into", inbox.path]),
                wrapper: Self.closed("stdout"))
            defer { receiver.stop() }
            let line = try #require(receiver.stderr.waitForLine(containing: "waiting on port", timeout: 30))
            let port = try #require(TestDevice.port(in: line))
            let sent = laptop.run(["send", "--text", "hello there", "--to", "127.0.0.1:\(port)"])
            let status = receiver.wait(timeout: 30)
            #expect(status == 0, "the reader of standard output left: exit 0 (\(receiver.stderr.text))")
            #expect(!receiver.stderr.text.contains("Fatal error"), "\(receiver.stderr.text)")
            #expect(sent.status != 0, "the text was not delivered")
            #expect(sent.stderr.contains("the receiver stopped"), "\(sent.stderr)")
            #expect(!sent.stderr.contains("connection"), "not a lost connection: \(sent.stderr)")
        }

        @Test func listingsAndSendsWhoseReaderLeftDoNotCrash() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let (receiver, port) = try desk.startReceive(into: inbox)
            defer { receiver.stop() }
            let file = try laptop.folder("src").appendingPathComponent("notes.bin")
            try makeFile(file, size: 1 << 20)
            let send = try BackgroundShare(
                laptop.withConfig(["send", file.path, "--to", "127.0.0.1:\(port)"]), wrapper: Self.closed("stderr"))
            let sendStatus = send.wait(timeout: 60)
            #expect(sendStatus == 0 || sendStatus == 141, "\(send.stdout.text)")
            #expect(!send.stdout.text.contains("Fatal error"), "\(send.stdout.text)")
            for command in [["trust", "list"], ["id"], ["--help"], ["send", "--help"]] {
                let listing = try BackgroundShare(laptop.withConfig(command), wrapper: Self.closed("stdout"))
                let status = listing.wait(timeout: 30)
                #expect(status == 0, "\(command): \(listing.stderr.text)")
                #expect(!listing.stderr.text.contains("Fatal error"), "\(command): \(listing.stderr.text)")
            }
        }
    }
}
