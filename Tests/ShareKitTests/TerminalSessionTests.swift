import Foundation
import Testing

extension EndToEnd {
    /// Sessions recorded on a real pseudo-terminal of 80 columns (`script`): what a person sees.
    @Suite(.serialized) struct TerminalSessionTests {
        /// Runs `command` under `script` on an 80×24 terminal; returns the typescript (what the terminal showed).
        func recorded(_ command: String, in folder: URL, timeout: Double = 60) -> (status: Int32, screen: String) {
            let typescript = folder.appendingPathComponent("typescript")
            let result = runTool(
                "/usr/bin/script",
                ["-q", "-e", "-f", "-c", "stty cols 80 rows 24; " + command, typescript.path], timeout: timeout)
            let screen = (try? String(contentsOf: typescript, encoding: .utf8)) ?? result.output
            return (result.status, screen)
        }

        /// What each redraw left on the line: the text between carriage returns and newlines, escape sequences
        /// removed.
        func shownLines(_ screen: String) -> [String] {
            let withoutEscapes = screen.replacingOccurrences(
                of: "\u{1B}\\[[0-9;?]*[A-Za-z]", with: "", options: .regularExpression)
            return withoutEscapes.components(separatedBy: CharacterSet(charactersIn: "\r\n")).filter { !$0.isEmpty }
        }

        /// The bar of a send and of a receive fits 80 columns, ends its line before anything else is said, and the
        /// receiver's standard output (a file here) holds only the text it received.
        @Test func aSendOnAnEightyColumnTerminal() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let received = desk.directory.appendingPathComponent("received.txt")
            let receiverPort = freePort()
            let share = ShareBinary.url.path
            let deskTTY = try desk.folder("tty")
            let receiver = Thread {
                _ = recorded(
                    "\(share) receive --config \(desk.config.path) --port \(receiverPort) --listen 127.0.0.1 "
                        + "--into \(inbox.path) > \(received.path)", in: deskTTY)
            }
            receiver.start()
            let deskScreen = deskTTY.appendingPathComponent("typescript")
            #expect(
                waitUntil(timeout: 30) {
                    (try? String(contentsOf: deskScreen, encoding: .utf8))?.contains("waiting on port") == true
                })
            let proxy = try TCPProxy(upstreamPort: receiverPort)
            defer { proxy.stop() }
            proxy.bytesPerSecond = 4 << 20
            let file = try laptop.folder("src").appendingPathComponent(
                "a holiday video with a name far too long for any terminal line.mov")
            try makeFile(file, size: 12 << 20)
            let (status, screen) = recorded(
                "\(share) send --config \(laptop.config.path) --to 127.0.0.1:\(proxy.port) '\(file.path)' "
                    + "--text 'see you at eight'", in: try laptop.folder("tty"))
            #expect(status == 0, "\(screen)")
            let lines = shownLines(screen)
            let bars = lines.filter { $0.contains("MiB/s") && $0.contains("%") }
            #expect(bars.count >= 2, "the bar was redrawn: \(lines)")
            // Every redraw of the bar fits (narrative lines are sentences: the terminal wraps them like any text).
            for line in bars { #expect(line.count < 80, "\(line.count) columns: \(line)") }
            #expect(bars.contains { $0.contains("…") && $0.contains("[") }, "\(bars)")
            #expect(lines.contains { $0.hasPrefix("sent 2 of 2 items") }, "\(lines)")
            #expect(
                waitUntil(timeout: 30) { (try? String(contentsOf: received, encoding: .utf8)) == "see you at eight\n" })
            #expect(FileManager.default.fileExists(atPath: inbox.appendingPathComponent(file.lastPathComponent).path))
            // The receiver's terminal showed its own bar, within 80 columns too, and no received text.
            #expect(waitUntil(timeout: 30) { !receiver.isExecuting })
            let deskLines = shownLines((try? String(contentsOf: deskScreen, encoding: .utf8)) ?? "")
            let deskBars = deskLines.filter { $0.contains("MiB/s") && $0.contains("%") }
            #expect(!deskBars.isEmpty, "\(deskLines)")
            for line in deskBars { #expect(line.count < 80, "\(line.count) columns: \(line)") }
            #expect(!deskLines.contains("see you at eight"), "\(deskLines)")
        }
    }
}
