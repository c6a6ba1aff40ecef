import Foundation
import Testing

/// The example package (`Examples/ProfileApp`), built only on the library products, between processes: the seeds'
/// profile sent by one program and received by another as a `Profile` or as its name, through the program's own
/// listener or the agent, refused clearly when nothing is in common, queued with the agent, and a 1 GiB
/// `FileRepresentation` with flat memory.
extension EndToEnd {
    @Suite(.serialized) struct LibraryEndToEndTests {
        /// The example's executable, next to `share` (the test command builds it; built here when it is missing).
        static let app: URL = {
            let url = ShareBinary.url.deletingLastPathComponent().appendingPathComponent("profile-app")
            if !FileManager.default.isExecutableFile(atPath: url.path) {
                let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                    .deletingLastPathComponent()
                let built = runTool(
                    "/usr/bin/env",
                    [
                        "swift", "build", "--package-path", root.appendingPathComponent("Examples/ProfileApp").path,
                        "--scratch-path", root.appendingPathComponent(".build").path,
                    ], timeout: 900)
                precondition(built.status == 0, "the example package did not build: \(built.output)")
            }
            return url
        }()

        func app(_ device: TestDevice, _ arguments: [String]) throws -> BackgroundShare {
            try BackgroundShare(
                [arguments[0], "--config", device.config.path] + arguments.dropFirst(), executable: Self.app)
        }

        /// Starts `profile-app receive` and returns it with its port.
        func receiver(_ device: TestDevice, _ arguments: [String] = []) throws -> (BackgroundShare, Int) {
            let process = try app(device, ["receive"] + arguments)
            guard let line = process.stdout.waitForLine(containing: "listening on port", timeout: 30),
                let port = TestDevice.port(in: line)
            else {
                process.stop()
                throw TestFailure("profile-app receive did not start: \(process.stderr.text)")
            }
            return (process, port)
        }

        @Test func aProfileArrivesAsAProfileWhereTheTypeIsKnownAndAsItsNameWhereOnlyTextIs() throws {
            let (desk, laptop) = try TestDevice.pair("desk", "laptop")
            let (rich, richPort) = try receiver(laptop)
            defer { rich.stop() }
            let send = try app(
                desk,
                [
                    "send", "--to", "127.0.0.1:\(richPort)", "--name", "Ada Lovelace", "--bio", "mathematician",
                    "--fact", "wrote the first program",
                ])
            #expect(send.wait(timeout: 60) == 0, "\(send.stderr.text)")
            #expect(send.stdout.text.contains("delivered Profile: received"), "\(send.stdout.text)")
            #expect(rich.wait(timeout: 30) == 0, "\(rich.stderr.text)")
            #expect(
                rich.stdout.text.contains(
                    "profile Ada Lovelace: mathematician [wrote the first program] — Ada Lovelace from desk as "
                        + "com.example.profile"), "\(rich.stdout.text)")

            let (plain, plainPort) = try receiver(laptop, ["--as", "text"])
            defer { plain.stop() }
            let again = try app(desk, ["send", "--to", "127.0.0.1:\(plainPort)", "--name", "Grace Hopper"])
            #expect(again.wait(timeout: 60) == 0, "\(again.stderr.text)")
            #expect(plain.wait(timeout: 30) == 0, "\(plain.stderr.text)")
            #expect(
                plain.stdout.text.contains("text Grace Hopper — Grace Hopper from desk as public.utf8-plain-text"),
                "\(plain.stdout.text)")
        }

        @Test func aReceiverThatDeclaresNothingOfferedRefusesAndBothSidesSayWhy() throws {
            let (desk, laptop) = try TestDevice.pair("desk", "laptop")
            let (videos, port) = try receiver(laptop, ["--as", "video"])
            defer { videos.stop() }
            let send = try app(desk, ["send", "--to", "127.0.0.1:\(port)", "--name", "Ada Lovelace"])
            #expect(send.wait(timeout: 60) == 1)
            #expect(
                send.stdout.text.contains(
                    "refused Profile: no common representation: offered com.example.profile, public.utf8-plain-text; "
                        + "receiver accepts com.example.profile-video"), "\(send.stdout.text)")
            #expect(send.stderr.text.contains("took nothing"), "\(send.stderr.text)")
            let line = videos.stdout.waitForLine(containing: "refused Profile from desk", timeout: 30)
            #expect(line?.contains("no common representation") == true, "\(videos.stdout.text)")
        }

        @Test func aProgramReceivesThroughTheAgentAndTheInboxTakesOverWhenItEnds() throws {
            let (desk, laptop) = try TestDevice.pair("desk", "laptop")
            let inbox = try laptop.folder("inbox")
            let (agent, agentPort) = try laptop.startAgent(["--inbox", inbox.path])
            defer { agent.stop() }
            let program = try app(laptop, ["receive", "--agent", "--count", "2"])
            defer { program.stop() }
            #expect(program.stdout.waitForLine(containing: "receiving through the agent", timeout: 30) != nil)
            let status = laptop.run(["status"])
            #expect(
                status.stdout.contains(
                    "receiving program: profile-app, accepting com.example.profile, public.utf8-plain-text"),
                "\(status.stdout)")
            // A second program is told which one receives.
            let second = try app(laptop, ["receive", "--agent"])
            #expect(second.wait(timeout: 30) == 1)
            #expect(second.stderr.text.contains("profile-app already receives through this agent"))

            let text = desk.run(["send", "--text", "lunch at one", "--to", "127.0.0.1:\(agentPort)"])
            #expect(text.status == 0, "\(text.stderr)")
            let send = try app(desk, ["send", "--to", "127.0.0.1:\(agentPort)", "--name", "Hedy Lamarr"])
            #expect(send.wait(timeout: 60) == 0, "\(send.stderr.text)")
            #expect(program.wait(timeout: 30) == 0, "\(program.stderr.text)")
            let said = program.stdout.text
            #expect(said.contains("text lunch at one — text from desk as public.utf8-plain-text"), "\(said)")
            #expect(said.contains("profile Hedy Lamarr:  [] — Hedy Lamarr from desk as com.example.profile"))
            // Nothing of the program's went to the inbox, and its folder went with it.
            #expect(!laptop.run(["inbox", "--inbox", inbox.path]).stdout.contains("lunch at one"))
            let incoming = laptop.config.appendingPathComponent("state/incoming")
            let left = FileManager.default.subpaths(atPath: incoming.path) ?? []
            #expect(left == [], "left in \(incoming.path): \(left)")

            // Without a program the agent's own accept list and inbox apply again.
            let later = desk.run(["send", "--text", "see you", "--to", "127.0.0.1:\(agentPort)"])
            #expect(later.status == 0, "\(later.stderr)")
            #expect(laptop.run(["inbox", "--inbox", inbox.path]).stdout.contains("see you"))
            #expect(!laptop.run(["status"]).stdout.contains("receiving program"))
        }

        @Test func aQueuedSendLetsTheProgramExitAndTheAgentDelivers() throws {
            let desk = try TestDevice("desk")
            let laptop = try TestDevice("laptop")
            laptop.trust(desk, flags: ["--team"])
            let (rich, port) = try receiver(laptop)
            defer { rich.stop() }
            desk.trust(laptop, address: "127.0.0.1:\(port)", flags: ["--team"])
            let (agent, _) = try desk.startAgent()
            defer { agent.stop() }
            let send = try app(desk, ["send", "--queue", "--to", "laptop", "--name", "Katherine Johnson"])
            #expect(send.wait(timeout: 30) == 0, "\(send.stderr.text)")
            #expect(send.stdout.text.contains("queued Katherine Johnson for laptop with the agent"))
            #expect(rich.wait(timeout: 60) == 0, "\(rich.stderr.text)")
            #expect(rich.stdout.text.contains("profile Katherine Johnson:"), "\(rich.stdout.text)")
        }

        @Test func aGigabyteFileRepresentationTravelsWithFlatMemoryOnBothSides() throws {
            let (desk, laptop) = try TestDevice.pair("desk", "laptop")
            let video = try desk.folder("videos").appendingPathComponent("talk.mp4")
            try makeFile(video, size: 1 << 30)
            let into = try laptop.folder("received")
            let (receiving, port) = try receiver(laptop, ["--as", "video", "--into", into.path])
            defer { receiving.stop() }
            let send = try app(
                desk, ["send", "--to", "127.0.0.1:\(port)", "--name", "Ada Lovelace", "--video", video.path])
            // Peak resident memory of each side, read while they run (VmHWM only grows).
            var peaks: [Int32: Int] = [:]
            func sample() {
                for pid in [send.pid, receiving.pid] {
                    if let peak = peakKiB(pid) { peaks[pid] = max(peaks[pid] ?? 0, peak) }
                }
            }
            #expect(
                waitUntil(timeout: 300) {
                    sample()
                    return !send.process.isRunning
                })
            #expect(send.wait(timeout: 10) == 0, "\(send.stderr.text)")
            #expect(receiving.wait(timeout: 60) == 0, "\(receiving.stderr.text)")
            #expect(
                receiving.stdout.text.contains("video received-talk.mp4 (\(1 << 30) bytes)"), "\(receiving.stdout.text)"
            )
            let copy = into.appendingPathComponent("received-talk.mp4")
            #expect(try sha256(copy) == sha256(video))
            let sender = (peaks[send.pid] ?? 0) >> 10
            let receiver = (peaks[receiving.pid] ?? 0) >> 10
            #expect(sender > 0 && receiver > 0)
            #expect(
                sender < 160 && receiver < 160, "peak resident memory: sender \(sender) MiB, receiver \(receiver) MiB")
        }
    }
}

/// Peak resident memory of a running process in KiB (from /proc).
func peakKiB(_ pid: Int32) -> Int? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "")
    }
    return nil
}

/// The SHA-256 of a file, by the system's `sha256sum`.
func sha256(_ url: URL) throws -> String {
    let result = runTool("/usr/bin/sha256sum", [url.path], timeout: 120)
    guard result.status == 0, let digest = result.output.split(separator: " ").first else {
        throw TestFailure("sha256sum failed: \(result.output)")
    }
    return String(digest)
}
