import Foundation
import Glibc
import ShareKit
import ShareNet
import Testing
import ShareTrust
import ShareReach
import ShareProtocol
import ShareEngine
import ShareAgent

extension EndToEndAgents {
    /// A part of the agent that can no longer do its work ends the agent, which says which part and why and exits
    /// non-zero (systemd's `Restart=on-failure` starts it again): never an agent that looks healthy with a dead part.
    /// Each server part is made to fail for real: its process is left without a free descriptor (prlimit), and a few
    /// connections arrive, so accepting fails with EMFILE until the failure is reported.
    @Suite(.serialized) struct AgentPartFailureTests {
        enum Part: String, CaseIterable {
            case listener, localSend = "LocalSend", page, control = "control socket"

            /// The name its acceptor logs.
            var server: String {
                switch self {
                case .listener: "listener"
                case .localSend: "localsend"
                case .page: "web"
                case .control: "control"
                }
            }
        }

        @Test(arguments: Part.allCases) func aPartThatCannotAcceptEndsTheAgentSayingWhy(_ part: Part) throws {
            let desk = try TestDevice("desk")
            let agent = try desk.background(
                [
                    "agent", "--port", "0", "--listen", "127.0.0.1", "--no-discovery", "--localsend",
                    "--localsend-port", "0", "--localsend-multicast-port", "0", "--web-port", "0",
                ], environment: ["SHARE_TEST_ACCEPT_FAILING_SECONDS": "2"])
            defer { agent.stop() }
            guard let own = agent.stderr.waitForLine(containing: "listening on port", timeout: 30),
                let localSend = agent.stderr.waitForLine(containing: "LocalSend on port", timeout: 30),
                let page = agent.stdout.waitForLine(containing: "page at", timeout: 30)
            else { throw TestFailure("the agent did not start: \(agent.stderr.text)") }
            func port(_ line: String, after marker: String) -> Int? {
                line.components(separatedBy: marker).last.flatMap {
                    Int($0.prefix { $0.isNumber })
                }
            }
            // Every part started (the page answers, the control socket answers) before the descriptors run out:
            // starting a part without descriptors is another failure than the one tested here.
            let pagePort = port(page, after: "127.0.0.1:")!
            let started = waitUntil(timeout: 30) {
                guard desk.run(["status"]).status == 0,
                    let fd = try? Syscalls.connect(host: "127.0.0.1", port: pagePort, timeout: 5)
                else { return false }
                defer { Syscalls.close(fd) }
                Syscalls.setTimeouts(fd, seconds: 5)
                let request = "GET /favicon.ico HTTP/1.1\r\nHost: 127.0.0.1:\(pagePort)\r\nConnection: close\r\n\r\n"
                guard (try? Syscalls.writeAll(fd, Array(request.utf8))) != nil,
                    let status = try? Syscalls.readLine(fd, limit: 200)
                else { return false }
                return String(decoding: status, as: UTF8.self).hasPrefix("HTTP/1.1 200")
            }
            #expect(started, "the agent's parts did not all answer: \(agent.stderr.text)")
            // Every descriptor the agent may have is in use: the next accept fails with EMFILE.
            let open = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(agent.pid)/fd").count
            let limited = Process()
            limited.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
            limited.arguments = ["--pid", "\(agent.pid)", "--nofile=\(open):\(open)"]
            try limited.run()
            limited.waitForExit()
            #expect(limited.terminationStatus == 0)
            // Connections keep coming (and are held) until the agent ends: however many descriptors other threads
            // had open for a moment when the limit was set, accepting soon fails and keeps failing.
            var clients: [Int32] = []
            defer { clients.forEach(Syscalls.close) }
            let deadline = Date().addingTimeInterval(30)
            while agent.process.isRunning, Date() < deadline, clients.count < 256 {
                let fd: Int32?
                switch part {
                case .listener:
                    fd = try? Syscalls.connect(host: "127.0.0.1", port: port(own, after: "port ")!, timeout: 5)
                case .localSend:
                    fd = try? Syscalls.connect(
                        host: "127.0.0.1", port: port(localSend, after: "LocalSend on port ")!, timeout: 5)
                case .page:
                    fd = try? Syscalls.connect(host: "127.0.0.1", port: pagePort, timeout: 5)
                case .control:
                    fd = try? Syscalls.unixConnect(
                        ControlClient.socketPath(DevicePaths.resolve(configOverride: desk.config.path)))
                }
                if let fd { clients.append(fd) }
                Thread.sleep(forTimeInterval: 0.05)
            }
            let status = agent.wait(timeout: 30)
            #expect(status != nil && status != 0, "the agent did not end: \(agent.stderr.text)")
            let said = agent.stderr.text
            // The flooded part met the failure; whichever part met it for long enough first ended the agent (another
            // part that accepts, asked something meanwhile, may be first: the descriptors are the process's).
            #expect(
                said.contains("accept failed; still listening") && said.contains("server=\(part.server)"), "\(said)")
            #expect(
                said.contains("share: the agent's ") && said.contains(" stopped: ")
                    && said.contains("cannot accept connections (accept: Too many open files)"), "\(said)")
        }
    }
}
