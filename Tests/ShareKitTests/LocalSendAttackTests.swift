import ShareHTTP
import Foundation
import Glibc
import ShareLocalSend
import ShareTLS
import Testing
import ShareNet

extension EndToEnd {
    /// Hostile LocalSend peers against the agent (LocalSend on loopback, multicast off): names that climb out, sizes
    /// that lie, a wrong SHA-256, 10,000 files in one upload, connections held open, a flood of fake announcements.
    /// Each fails for the attacker, leaves nothing behind, and the honest device is still served.
    @Suite(.serialized) struct LocalSendAttackTests {
        let desk: TestDevice
        let agent: BackgroundShare
        let address: LocalSendAddress
        let attacker: TLSIdentity
        let client: LocalSendClient

        init() throws {
            desk = try TestDevice("desk")
            attacker = try p256Identity()
            client = try LocalSendClient(identity: attacker)
            // Trusted without asking: the attacks below must fail on their own, not for want of an answer.
            let print = LocalSend.fingerprint(ofCertificateDER: try attacker.certificate.derBytes())
            let trusted = desk.run(["trust", "add", "--localsend", print, "--name", "attacker", "--no-ask"])
            precondition(trusted.status == 0, trusted.stderr)
            agent = try desk.background([
                "agent", "--port", "0", "--listen", "127.0.0.1", "--no-discovery", "--localsend", "--localsend-port",
                "0",
                "--localsend-multicast-port", "0",
            ])
            guard let line = agent.stderr.waitForLine(containing: "LocalSend on port", timeout: 30),
                let port = line.components(separatedBy: "LocalSend on port ").last?.split(separator: ",").first
                    .flatMap({ Int($0) })
            else {
                agent.stop()
                throw TestFailure("no LocalSend port: \(agent.stderr.text)")
            }
            address = LocalSendAddress(host: "127.0.0.1", port: port, fingerprint: nil)
        }

        var inbox: URL { desk.config.appendingPathComponent("data/inbox") }

        func info(alias: String = "attacker") throws -> LocalSendInfo {
            LocalSendInfo(
                alias: alias, deviceModel: "evil", deviceType: "mobile",
                fingerprint: LocalSend.fingerprint(ofCertificateDER: try attacker.certificate.derBytes()), port: 1)
        }

        /// prepare-upload; the status and the session.
        func prepare(_ files: [LocalSendFile]) throws -> (Int, LocalSendUploadSession?) {
            let body = LocalSendPrepareUpload(
                info: try info(), files: Dictionary(files.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a }))
            let answer = try client.post(
                address, LocalSend.apiPrefix + "/prepare-upload", json: Array(try JSONEncoder().encode(body)),
                timeout: 30)
            return (answer.status, try? JSONDecoder().decode(LocalSendUploadSession.self, from: Data(answer.body)))
        }

        /// Uploads `bytes` for `file` with Content-Length `length`; the status, or nil when the connection broke.
        func upload(_ file: LocalSendFile, _ session: LocalSendUploadSession, _ bytes: [UInt8], length: UInt64? = nil)
            -> Int?
        {
            let target =
                LocalSend.apiPrefix
                + "/upload?sessionId=\(session.sessionId)&fileId=\(file.id)&token=\(session.files[file.id] ?? "")"
            return try? client.upload(address, target, length: length ?? UInt64(bytes.count), timeout: 15) {
                try $0.tls.write(bytes)
                if let length, length > UInt64(bytes.count) { $0.tls.shutdown() }
            }
        }

        func file(_ name: String, _ bytes: [UInt8], sha256: String? = nil) -> LocalSendFile {
            LocalSendFile(
                id: SecureRandom.bytes(6).hexString, fileName: name, size: UInt64(bytes.count),
                fileType: "application/octet-stream", sha256: sha256 ?? SHA256Hasher.hash(bytes).hexString)
        }

        /// Every file under the device's config folder, relative.
        func everything() -> Set<String> {
            let root = desk.directory.path
            var found: Set<String> = []
            let walker = FileManager.default.enumerator(atPath: root)
            while let path = walker?.nextObject() as? String { found.insert(path) }
            return found.filter { !$0.hasPrefix("config/state") }
        }

        /// The honest device: a plain upload that lands.
        func honestUploadLands() throws {
            let bytes = Array("an honest photo".utf8)
            let honest = file("honest.jpg", bytes)
            let (status, session) = try prepare([honest])
            #expect(status == 200)
            let accepted = try #require(session)
            #expect(upload(honest, accepted, bytes) == 200)
            let landed = try FileManager.default.subpathsOfDirectory(atPath: inbox.path).filter {
                $0.hasSuffix("honest.jpg")
            }
            #expect(!landed.isEmpty, "\(landed)")
        }

        @Test func namesThatClimbOutLandInsideTheDevicesFolder() throws {
            defer { agent.stop() }
            let before = everything()
            let names = [
                "../../escape.txt", "/etc/evil.txt", "a/../../../b.txt", "..", "sub\\..\\..\\x.txt", ".hidden",
                "\u{0}nul",
            ]
            let files = names.map { file($0, Array("payload \($0)".utf8)) }
            let (status, session) = try prepare(files)
            #expect(status == 200)
            let accepted = try #require(session)
            for item in files {
                #expect(upload(item, accepted, Array("payload \(item.fileName)".utf8)) == 200, "\(item.fileName)")
            }
            let added = everything().subtracting(before)
            let folder = "config/data/inbox/attacker (LocalSend"
            #expect(
                added.allSatisfy { $0.hasPrefix(folder) || $0 == "config/data/inbox" || $0 == "config/data" },
                "\(added.sorted())")
            #expect(
                !FileManager.default.fileExists(
                    atPath: desk.directory.deletingLastPathComponent().appendingPathComponent("escape.txt").path))
            let stored = try FileManager.default.contentsOfDirectory(
                atPath: try #require(
                    try FileManager.default.contentsOfDirectory(at: inbox, includingPropertiesForKeys: nil).first?.path)
            )
            #expect(stored.count == names.count, "\(stored)")
            #expect(stored.allSatisfy { !$0.contains("/") && $0 != ".." && !$0.hasPrefix(".") }, "\(stored)")
        }

        @Test func sizesThatLieAndAWrongDigestLeaveNothing() throws {
            defer { agent.stop() }
            let bytes = [UInt8](repeating: 7, count: 100_000)
            let short = file("short.bin", bytes)
            let long = file("long.bin", bytes)
            let wrong = file("wrong.bin", bytes, sha256: String(repeating: "0", count: 64))
            let (status, session) = try prepare([short, long, wrong])
            #expect(status == 200)
            let accepted = try #require(session)
            // More bytes announced than sent, then the sender closes: refused (or cut), and nothing is kept.
            #expect(upload(short, accepted, Array(bytes.prefix(1000)), length: UInt64(bytes.count)) != 200)
            // A body longer than the file announced is refused before a byte is written.
            #expect(upload(long, accepted, bytes + bytes) == 400)
            #expect(upload(wrong, accepted, bytes) == 422)
            let folder = try #require(
                try FileManager.default.contentsOfDirectory(at: inbox, includingPropertiesForKeys: nil).first)
            #expect(
                waitUntil(timeout: 10) {
                    ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? ["?"]).isEmpty
                })
            try honestUploadLands()
        }

        /// Not an attack: LocalSend's message (one text/plain file whose preview is the text) needs no upload and
        /// lands in the text history, from the device's name.
        @Test func aMessageArrivesAsATextWithoutAnUpload() throws {
            defer { agent.stop() }
            let text = "meet at the station, platform 4"
            let message = LocalSendFile(
                id: "m1", fileName: "message.txt", size: UInt64(text.utf8.count), fileType: "text/plain", preview: text)
            let (status, session) = try prepare([message])
            #expect(status == 204)
            #expect(session == nil)
            let history = try String(contentsOf: inbox.appendingPathComponent("history.jsonl"), encoding: .utf8)
            #expect(history.contains(text) && history.contains("attacker (LocalSend)"), "\(history)")
        }

        @Test func tenThousandFilesInOneUploadAreRefused() throws {
            defer { agent.stop() }
            let files = (0..<10_000).map { file("f\($0).txt", Array("\($0)".utf8)) }
            let (status, session) = try prepare(files)
            #expect(status == 413)
            #expect(session == nil)
            try honestUploadLands()
        }

        @Test func connectionsHeldOpenFromOneHostDoNotKeepAnotherOut() throws {
            defer { agent.stop() }
            // Silent connections from 127.0.0.1, past its share of the server.
            var held: [Int32] = []
            defer { for fd in held { close(fd) } }
            for _ in 0..<40 {
                let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                var to = sockaddr_in()
                to.sin_family = sa_family_t(AF_INET)
                to.sin_port = in_port_t(UInt16(address.port).bigEndian)
                inet_pton(AF_INET, "127.0.0.1", &to.sin_addr)
                let connected = withUnsafePointer(to: &to) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
                #expect(connected == 0)
                held.append(fd)
            }
            // The honest device, from another address on the same machine, is served at once.
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var from = sockaddr_in()
            from.sin_family = sa_family_t(AF_INET)
            inet_pton(AF_INET, "127.0.0.2", &from.sin_addr)
            _ = withUnsafePointer(to: &from) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            var to = sockaddr_in()
            to.sin_family = sa_family_t(AF_INET)
            to.sin_port = in_port_t(UInt16(address.port).bigEndian)
            inet_pton(AF_INET, "127.0.0.1", &to.sin_addr)
            let connected = withUnsafePointer(to: &to) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            #expect(connected == 0)
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let context = try TLSContext(identity: attacker, role: .client, verifier: { _ in true }, minimumTLS12: true)
            let tls = try TLSConnection(context: context, fileDescriptor: fd)
            try tls.handshake()
            let http = HTTPConnection(tls)
            try http.writeRequest("GET", LocalSend.apiPrefix + "/info", host: "127.0.0.1", headers: [], length: 0)
            let head = try #require(try http.readHead(request: false))
            #expect(head.status == 200)
            let body = try http.readBody(length: try head.contentLength(), limit: 1 << 16)
            let answer = try JSONDecoder().decode(LocalSendInfo.self, from: Data(body))
            #expect(answer.alias == "desk")
        }
    }

    /// LocalSend's discovery under a flood of fake announcements: the list stays bounded, answers are rate-limited,
    /// and a device proved by its certificate is never pushed out.
    struct LocalSendFloodTests {
        @Test func hundredsOfFakeDevicesCannotPushOutAProvedOne() throws {
            let identity = try p256Identity()
            let peers = LocalSendPeers(ownFingerprint: "00")
            let honest = LocalSendInfo(
                alias: "phone", deviceModel: "Pixel", deviceType: "mobile",
                fingerprint: String(repeating: "AB", count: 32), port: 53317)
            peers.saw(honest, at: "192.0.2.1", proved: true)
            let discovery = LocalSendDiscovery(
                info: { honest }, peers: peers, client: try LocalSendClient(identity: identity), multicastPort: nil,
                interface: nil, addresses: [])
            defer { discovery.stop() }
            let started = Date()
            for number in 0..<1_000 {
                let fake = LocalSendInfo(
                    alias: "fake \(number)", deviceModel: nil, deviceType: "mobile",
                    fingerprint: String(format: "%064X", number), port: 9, announce: true)
                discovery.heard(
                    Array(try JSONEncoder().encode(fake)), from: "127.0.\(number % 250).\(1 + number / 250)")
            }
            let seconds = Date().timeIntervalSince(started)
            #expect(peers.all.count <= 256)
            #expect(peers.find("phone")?.proved == true)
            // At most 20 answers a second (each a register request to the claimed address).
            #expect(
                Double(discovery.answered) <= 20 * (seconds.rounded(.up) + 1), "\(discovery.answered) in \(seconds) s")
            // A claim of the proved device's fingerprint from elsewhere does not move it.
            var spoof = honest
            spoof.alias = "evil"
            peers.saw(spoof, at: "127.0.0.9", proved: false)
            #expect(peers.find(honest.fingerprint)?.host == "192.0.2.1")
        }
    }
}

func p256Identity() throws -> TLSIdentity {
    let key = try PrivateKey.generateP256()
    return try TLSIdentity(key: key, certificate: Certificate.selfSigned(key: key, commonName: "LocalSend User"))
}
