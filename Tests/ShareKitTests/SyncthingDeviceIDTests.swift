import Foundation
import Testing

extension EndToEnd {
    /// The ID `share id` prints is the one Syncthing computes for the same certificate: Syncthing's own global
    /// discovery server (`stdiscosrv`, from Debian) takes the device's announcement, made with its certificate, and
    /// finds it again by that ID; the same digest with the check characters of earlier share versions is refused
    /// there (400), and still parsed by share.
    @Suite(.serialized) struct SyncthingDeviceIDTests {
        static let server = "/usr/bin/stdiscosrv"
        static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/discovery_check.py")

        /// The earlier form of an ID: each block's check character computed from its right end.
        static func earlierForm(_ id: String) -> String {
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
            let chars = Array(id.replacingOccurrences(of: "-", with: ""))
            var out = ""
            for block in 0..<4 {
                let chunk = Array(chars[(block * 14)..<(block * 14 + 13)])
                var factor = 2
                var sum = 0
                for char in chunk.reversed() {
                    let addend = factor * alphabet.firstIndex(of: char)!
                    sum += addend / 32 + addend % 32
                    factor = factor == 2 ? 1 : 2
                }
                out += String(chunk) + String(alphabet[(32 - sum % 32) % 32])
            }
            return out
        }

        @Test func syncthingsDiscoveryServerKnowsOurIDs() throws {
            guard FileManager.default.isExecutableFile(atPath: Self.server) else {
                print("skipped: \(Self.server) is not installed (scripts/setup.sh installs syncthing-discosrv)")
                return
            }
            let device = try TestDevice("laptop")
            let work = try device.folder("discovery")
            let port = freePort()
            let server = Process()
            server.executableURL = URL(fileURLWithPath: Self.server)
            server.arguments = [
                "-listen", "127.0.0.1:\(port)", "-replication-listen", "", "-db-dir",
                work.appendingPathComponent("db").path,
                "-cert", work.appendingPathComponent("cert.pem").path, "-key",
                work.appendingPathComponent("key.pem").path,
            ]
            server.currentDirectoryURL = work
            server.standardOutput = FileHandle.nullDevice
            server.standardError = FileHandle.nullDevice
            try server.run()
            defer {
                server.terminate()
                server.waitForExit()
            }
            #expect(waitUntil(timeout: 60) { RawClient(port: port) != nil }, "stdiscosrv did not start")
            let id = device.id
            let cert = device.config.appendingPathComponent("cert.pem").path
            let key = device.config.appendingPathComponent("key.pem").path
            let ours = runTool("/usr/bin/python3", [Self.script.path, "\(port)", cert, key, id])
            #expect(ours.output.contains("post 204"), "\(ours.output)")
            #expect(ours.output.contains("get 200") && ours.output.contains("tcp://192.0.2.10:22000"), "\(ours.output)")

            let earlier = Self.earlierForm(id)
            #expect(earlier != id.replacingOccurrences(of: "-", with: ""))
            let refused = runTool("/usr/bin/python3", [Self.script.path, "\(port)", cert, key, earlier])
            print("stdiscosrv on the earlier form: \(refused.output)")
            #expect(refused.output.contains("get 400"), "\(refused.output)")
            // share still reads the earlier form (trust stores and typed IDs keep working).
            let other = try TestDevice("desk")
            let added = other.run(["trust", "add", earlier, "--name", "laptop"])
            #expect(added.status == 0, "\(added.stderr)")
            #expect(other.run(["trust", "list"]).stdout.contains(id))
        }
    }
}
