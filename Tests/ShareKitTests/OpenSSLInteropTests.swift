import Foundation
import ShareTLS
import Testing

extension EndToEnd {
    /// The real `openssl` command line as a peer.
    @Suite(.serialized) struct OpenSSLInteropTests {
        let openssl = "/usr/bin/openssl"

        /// A key and self-signed Ed25519 certificate made by the openssl command.
        func makeCredentials(in directory: URL, name: String) throws -> (key: URL, cert: URL, id: DeviceID) {
            let key = directory.appendingPathComponent("\(name).key")
            let cert = directory.appendingPathComponent("\(name).crt")
            let made = runTool(
                openssl,
                [
                    "req", "-x509", "-newkey", "ed25519", "-nodes", "-keyout", key.path, "-out", cert.path,
                    "-subj", "/CN=\(name)", "-days", "2",
                ])
            #expect(made.status == 0, "\(made.output)")
            let id = try Certificate(pem: String(contentsOf: cert, encoding: .utf8)).deviceID()
            return (key, cert, id)
        }

        @Test func tls12ClientIsRefused() throws {
            let desk = try TestDevice("desk")
            let (agent, port) = try desk.startAgent()
            defer { agent.stop() }
            let result = runTool(openssl, ["s_client", "-connect", "127.0.0.1:\(port)", "-tls1_2"], timeout: 20)
            #expect(result.status != 0)
            #expect(
                result.output.contains("alert protocol version") || result.output.contains("no protocols available")
                    || result.output.contains("unsupported protocol"), "\(result.output)")
            #expect(!result.output.contains("New, TLSv1.2"))
            try expectStillServes(desk, port: port)
        }

        @Test func clientWithoutCertificateIsRefused() throws {
            let desk = try TestDevice("desk")
            let (agent, port) = try desk.startAgent()
            defer { agent.stop() }
            let result = runTool(
                openssl, ["s_client", "-connect", "127.0.0.1:\(port)", "-tls1_3", "-ign_eof"],
                stdin: Data("hello\n".utf8), timeout: 20)
            #expect(
                result.output.contains("certificate required") || result.output.contains("alert"), "\(result.output)")
            #expect(
                agent.stderr.waitForLine(containing: "presented no certificate", timeout: 10) != nil
                    || agent.stderr.text.contains("failed before its hello"))
            try expectStillServes(desk, port: port)
        }

        @Test func clientWithATrustedCertificateCompletesTheHandshake() throws {
            let desk = try TestDevice("desk")
            let creds = try makeCredentials(in: desk.directory, name: "scli")
            #expect(desk.run(["trust", "add", creds.id.description, "--name", "scli"]).status == 0)
            let (agent, port) = try desk.startAgent()
            defer { agent.stop() }
            let result = runTool(
                openssl,
                [
                    "s_client", "-connect", "127.0.0.1:\(port)", "-tls1_3", "-cert", creds.cert.path,
                    "-key", creds.key.path,
                ], timeout: 20)
            #expect(result.output.contains("TLSv1.3"), "\(result.output)")
            #expect(result.output.contains("New, TLSv1.3, Cipher is TLS_AES_128_GCM_SHA256"), "\(result.output)")
            #expect(!agent.stderr.text.contains("not trusted"))
            // An untrusted certificate made the same way is refused.
            let stranger = try makeCredentials(in: desk.directory, name: "stranger")
            let refused = runTool(
                openssl,
                [
                    "s_client", "-connect", "127.0.0.1:\(port)", "-tls1_3", "-cert", stranger.cert.path,
                    "-key", stranger.key.path, "-ign_eof",
                ], stdin: Data("x".utf8), timeout: 20)
            #expect(refused.output.contains("alert"), "\(refused.output)")
            #expect(agent.stderr.waitForLine(containing: "device \(stranger.id) is not trusted", timeout: 10) != nil)
        }

        @Test func ourClientCompletesATLS13HandshakeWithOpenSSLServer() throws {
            let laptop = try TestDevice("laptop")
            let server = try makeCredentials(in: laptop.directory, name: "sserver")
            #expect(laptop.run(["trust", "add", server.id.description, "--name", "sserver"]).status == 0)
            let port = freePort()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: openssl)
            process.arguments = [
                "s_server", "-accept", "\(port)", "-naccept", "1", "-tls1_3", "-cert", server.cert.path,
                "-key", server.key.path, "-Verify", "1", "-CAfile",
                laptop.config.appendingPathComponent("cert.pem").path,
            ]
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = pipe
            process.standardInput = Pipe()
            let output = OutputCollector(pipe)
            try process.run()
            defer { if process.isRunning { process.terminate() }; process.waitForExit() }
            #expect(output.waitForLine(containing: "ACCEPT", timeout: 20) != nil)
            let ping = laptop.run(["ping", "127.0.0.1:\(port)", "--timeout", "3"])
            // The handshake completes; then s_server does not speak share, so the hello goes unanswered.
            #expect(
                output.waitForLine(containing: "CIPHER is TLS_AES_128_GCM_SHA256", timeout: 10) != nil, "\(output.text)"
            )
            #expect(
                output.text.contains("Client certificate") || output.text.contains("verify return:1"), "\(output.text)")
            #expect(ping.status == 69 || ping.status == 75 || ping.status == 76, "\(ping.stderr)")
        }

        func expectStillServes(_ desk: TestDevice, port: Int) throws {
            let friend = try TestDevice("friend")
            desk.trust(friend)
            friend.trust(desk, address: "127.0.0.1:\(port)")
            let ping = friend.run(["ping", "desk"])
            #expect(ping.status == 0, "\(ping.stderr)")
        }
    }
}
