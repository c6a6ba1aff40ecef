import Foundation
import Glibc
import ShareTestSupport
import Testing

extension EndToEnd {
    /// LocalSend as other implementations speak it: localsend-cli (PyPI, a second implementation nobody here wrote)
    /// both ways, and an upload whose body comes in chunks (`Transfer-Encoding: chunked`, as some apps send it), all
    /// in a network namespace of the test's own.
    @Suite(.serialized) struct LocalSendSecondPeerTests {
        static let tools = (ProcessInfo.processInfo.environment["SHARE_TOOLS"] ?? "/opt/share-tools") + "/localsend-cli"
        let namespace: TestNamespace
        let home: URL

        init() throws {
            guard let namespace = TestNamespace() else {
                throw TestFailure("LocalSend tests need root and ip netns (scripts/setup.sh installs iproute2)")
            }
            self.namespace = namespace
            home = FileManager.default.temporaryDirectory.appendingPathComponent("share-lscli-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        }

        /// localsend-cli (its own certificate under `home`), in the namespace.
        func cli(_ arguments: [String]) throws -> Spawned {
            try Spawned(
                namespace.wrapper[0],
                Array(namespace.wrapper.dropFirst()) + [Self.tools + "/bin/localsend-cli"] + arguments,
                // requests lets a CA bundle named in the environment override the tool's own `verify = False`.
                environment: [
                    "HOME": home.path, "PYTHONUNBUFFERED": "1", "REQUESTS_CA_BUNDLE": "", "CURL_CA_BUNDLE": "",
                ])
        }

        /// The desk's agent in the namespace, LocalSend on port 53318.
        func agent(_ desk: TestDevice) throws -> BackgroundShare {
            let agent = try BackgroundShare(
                desk.withConfig([
                    "agent", "--port", "0", "--listen", "127.0.0.1", "--no-discovery", "--localsend",
                    "--localsend-port", "53318",
                ]), wrapper: namespace.wrapper)
            guard agent.stderr.waitForLine(containing: "LocalSend on port", timeout: 30) != nil else {
                agent.stop()
                throw TestFailure("the agent did not start LocalSend: \(agent.stderr.text)")
            }
            return agent
        }

        func share(_ desk: TestDevice, _ arguments: [String]) throws -> CommandResult {
            let process = try BackgroundShare(desk.withConfig(arguments), wrapper: namespace.wrapper)
            let status = process.wait(timeout: 120) ?? -9
            return CommandResult(status: status, stdout: process.stdout.text, stderr: process.stderr.text)
        }

        /// Accepts the first LocalSend offer `share pending` lists, as soon as it is there.
        func acceptFirstOffer(_ desk: TestDevice, from sender: Spawned? = nil) -> Bool {
            waitUntil(timeout: 30) {
                if let sender, !sender.process.isRunning { return true }
                guard
                    let id = desk.run(["pending"]).stdout.split(separator: "\n").first(where: {
                        $0.contains("(LocalSend")
                    })?.split(separator: " ").first
                else { return false }
                return desk.run(["accept", String(id)]).status == 0
            }
        }

        @Test func bothWaysWithLocalsendCli() throws {
            defer { try? FileManager.default.removeItem(at: home) }
            let desk = try TestDevice("desk")
            let daemon = try agent(desk)
            defer { daemon.stop() }
            let downloads = home.appendingPathComponent("downloads")
            let receiver = try cli(["receive", "--json", "--output", downloads.path])
            defer { receiver.stop() }
            #expect(receiver.waitForLine(containing: "\"ready\"") != nil, "\(receiver.output)")
            // Seen by its multicast announcement (on the namespace's loopback).
            var alias: String?
            #expect(
                waitUntil(timeout: 30) {
                    alias = desk.run(["peers"]).stdout.split(separator: "\n").first { $0.contains("localsend-cli@") }?
                        .split(separator: "\t").first.map(String.init)
                    return alias != nil
                }, "\(desk.run(["peers"]).stdout)")
            let out = try desk.folder("out")
            let report = out.appendingPathComponent("report.pdf")
            try makeFile(report, size: 1 << 20)
            let sent = try share(
                desk, ["send", "--direct", report.path, "--text", "dinner at 8", "--to", try #require(alias)])
            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(
                try Data(contentsOf: downloads.appendingPathComponent("report.pdf")) == Data(contentsOf: report),
                "\(receiver.output)")
            #expect(receiver.output.contains("dinner at 8"), "\(receiver.output)")
            receiver.stop()

            // localsend-cli sends to the desk: held for the desk's user, accepted, saved in its folder.
            let photo = home.appendingPathComponent("photo.jpg")
            try makeFile(photo, size: 300_000)
            // localsend-cli waits 10 s for the answer to its offer (a fixed timeout of its own); on a loaded machine
            // the desk's user (this test) may answer later, and the phone's user sends again, as a person would.
            var output = ""
            for _ in 0..<4 {
                let sender = try cli(["send", "127.0.0.1", photo.path, "--port", "53318", "--json"])
                defer { sender.stop() }
                #expect(acceptFirstOffer(desk, from: sender))
                let status = sender.wait(timeout: 60)
                output = sender.output
                if status == 0 || !output.contains("Read timed out") { break }
            }
            #expect(output.contains("\"sent\""), "\(output)")
            let inbox = desk.config.appendingPathComponent("data/inbox")
            let folders = try FileManager.default.contentsOfDirectory(atPath: inbox.path)
            let landed = folders.map { inbox.appendingPathComponent($0).appendingPathComponent("photo.jpg") }
                .first { FileManager.default.fileExists(atPath: $0.path) }
            #expect(try landed.map { try Data(contentsOf: $0) } == Data(contentsOf: photo), "\(folders)")
        }

        /// An upload whose body comes in chunks is taken, bounded as any body: the file arrives whole; a chunked
        /// body longer than the file it announced is refused and nothing is kept.
        @Test func aChunkedUploadIsTaken() throws {
            defer { try? FileManager.default.removeItem(at: home) }
            let desk = try TestDevice("desk")
            let daemon = try agent(desk)
            defer { daemon.stop() }
            let file = home.appendingPathComponent("chunked.bin")
            try makeFile(file, size: 700_000)
            let script = home.appendingPathComponent("chunked.py")
            try Self.chunkedClient.write(to: script, atomically: true, encoding: .utf8)
            let honest = try Spawned(
                namespace.wrapper[0],
                Array(namespace.wrapper.dropFirst()) + [Self.tools + "/bin/python3", script.path, file.path, "0"])
            defer { honest.stop() }
            #expect(acceptFirstOffer(desk))
            #expect(honest.wait(timeout: 60) == 0, "\(honest.output)")
            #expect(honest.output.contains("upload 200"), "\(honest.output)")
            let inbox = desk.config.appendingPathComponent("data/inbox")
            let kept = try FileManager.default.subpathsOfDirectory(atPath: inbox.path).filter {
                $0.hasSuffix("chunked.bin")
            }
            try #require(kept.count == 1, "\(kept)")
            #expect(try Data(contentsOf: inbox.appendingPathComponent(kept[0])) == Data(contentsOf: file))

            let liar = try Spawned(
                namespace.wrapper[0],
                Array(namespace.wrapper.dropFirst()) + [Self.tools + "/bin/python3", script.path, file.path, "10"])
            defer { liar.stop() }
            #expect(acceptFirstOffer(desk))
            #expect(liar.wait(timeout: 60) == 0, "\(liar.output)")
            #expect(liar.output.contains("upload 400"), "\(liar.output)")
        }

        /// prepare-upload with a full v2 info, then the file as a chunked body (requests sends a generator so),
        /// `extra` bytes longer than announced. Prints the status of each step.
        static let chunkedClient = """
            import hashlib, json, os, sys, uuid, requests, urllib3
            urllib3.disable_warnings()
            patience = float(os.environ.get("SHARE_TEST_PATIENCE", "1"))
            path, extra = sys.argv[1], int(sys.argv[2])
            data = open(path, "rb").read()
            base = "https://127.0.0.1:53318/api/localsend/v2"
            info = {"alias": "chunky", "version": "2.1", "deviceModel": "test", "deviceType": "mobile",
                    "fingerprint": uuid.uuid4().hex, "port": 53317, "protocol": "https", "download": False}
            files = {"f1": {"id": "f1", "fileName": "chunked.bin", "size": len(data),
                            "fileType": "application/octet-stream", "sha256": hashlib.sha256(data).hexdigest()}}
            r = requests.post(base + "/prepare-upload", json={"info": info, "files": files}, verify=False, timeout=60 * patience)
            print("prepare", r.status_code, flush=True)
            session = r.json()
            def chunks():
                body = data + b"x" * extra
                for i in range(0, len(body), 65536):
                    yield body[i:i + 65536]
            url = base + "/upload?sessionId=%s&fileId=f1&token=%s" % (session["sessionId"], session["files"]["f1"])
            try:
                r = requests.post(url, data=chunks(), verify=False, timeout=60 * patience)
                print("upload", r.status_code, r.text[:200], flush=True)
            except requests.exceptions.ConnectionError as error:
                print("upload closed", error, flush=True)
            """
    }
}
