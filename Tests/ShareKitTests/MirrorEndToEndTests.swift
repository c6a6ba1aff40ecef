import Foundation
import Testing

extension EndToEnd {
    /// `share mirror`: a send-only shared folder; the desk's agent keeps its copy current in its inbox for the laptop
    /// (receive-only: what is changed there is put back).
    @Suite(.serialized) struct MirrorEndToEndTests {
        /// Two devices; the laptop knows the desk at `deskPort`.
        func devices(deskPort: Int, deskTrustsLaptopAs flags: [String] = ["--team"]) throws -> (TestDevice, TestDevice)
        {
            let laptop = try TestDevice("laptop")
            let desk = try TestDevice("desk")
            laptop.trust(desk, address: "127.0.0.1:\(deskPort)", flags: ["--team"])
            desk.trust(laptop, flags: flags)
            return (laptop, desk)
        }

        /// Whether the copy holds exactly the folder's files with the same bytes (conflict copies, and what a folder
        /// keeps for itself — its marker, versions, partials — aside).
        func same(_ folder: URL, _ copy: URL) -> Bool {
            func files(_ root: URL) -> [String: Data] {
                var out: [String: Data] = [:]
                let walker = FileManager.default.enumerator(atPath: root.path)
                while let path = walker?.nextObject() as? String {
                    var isFolder: ObjCBool = false
                    let full = root.appendingPathComponent(path)
                    if FileManager.default.fileExists(atPath: full.path, isDirectory: &isFolder), !isFolder.boolValue,
                        !path.contains(".sync-conflict-"), !path.hasPrefix(".share")
                    {
                        out[path] = FileManager.default.contents(atPath: full.path)
                    }
                }
                return out
            }
            return files(folder) == files(copy)
        }

        @Test func aMirroredFolderStaysCurrentOnTheDesk() throws {
            let deskPort = freePort()
            let (laptop, desk) = try devices(deskPort: deskPort)
            let inbox = try desk.folder("inbox")
            let (deskAgent, _) = try desk.startAgent(["--inbox", inbox.path, "--port", String(deskPort)])
            defer { deskAgent.stop() }
            let (agent, _) = try laptop.startAgent()
            defer { agent.stop() }
            let folder = try laptop.folder("thesis")
            try FileManager.default.createDirectory(
                at: folder.appendingPathComponent("chapters"), withIntermediateDirectories: true)
            try makeFile(folder.appendingPathComponent("chapters/one.tex"), size: 200_000)
            try Data("notes\n".utf8).write(to: folder.appendingPathComponent("notes.txt"))
            let started = laptop.run(["mirror", folder.path, "--to", "desk", "--wait", "60"], timeout: 90)
            #expect(started.status == 0, "\(started.stderr)")
            #expect(started.stderr.contains("the copy on desk is current"), "\(started.stderr)")
            let copy = inbox.appendingPathComponent("laptop/thesis")
            #expect(same(folder, copy))
            // Changed, renamed, added in a new folder, removed: the watcher sends each burst on its own.
            let handle = try FileHandle(forWritingTo: folder.appendingPathComponent("chapters/one.tex"))
            try handle.seek(toOffset: 100_000)
            handle.write(Data(repeating: 7, count: 3000))
            try handle.close()
            try FileManager.default.moveItem(
                at: folder.appendingPathComponent("notes.txt"), to: folder.appendingPathComponent("todo.txt"))
            try FileManager.default.createDirectory(
                at: folder.appendingPathComponent("figures"), withIntermediateDirectories: true)
            try makeFile(folder.appendingPathComponent("figures/plot.png"), size: 50_000)
            #expect(waitUntil(timeout: 30) { same(folder, copy) }, "the copy did not follow the folder")
            #expect(!FileManager.default.fileExists(atPath: copy.appendingPathComponent("notes.txt").path))
            let listed = laptop.run(["sync"])
            #expect(listed.stdout.contains("thesis (") && listed.stdout.contains("send-only"), "\(listed.stdout)")
            // A file changed on the desk is put back, the desk's edit kept aside; one removed there comes back.
            try Data("desk's edit\n".utf8).write(to: copy.appendingPathComponent("todo.txt"))
            try FileManager.default.removeItem(at: copy.appendingPathComponent("figures/plot.png"))
            #expect(waitUntil(timeout: 30) { same(folder, copy) }, "the copy was not put back")
            let kept = try FileManager.default.contentsOfDirectory(atPath: copy.path).filter {
                $0.hasPrefix("todo.sync-conflict-") && $0.hasSuffix(".txt")
            }
            #expect(kept.count == 1, "\(kept)")
            if let name = kept.first {
                #expect(try String(contentsOf: copy.appendingPathComponent(name), encoding: .utf8) == "desk's edit\n")
            }
            // Nothing changed on the copy comes back to the laptop.
            #expect(
                !(try FileManager.default.contentsOfDirectory(atPath: folder.path)).contains { $0.contains("conflict") }
            )
            // Removed, it stops: later changes stay on the laptop.
            let id = try #require(
                listed.stdout.split(separator: "(").dropFirst().first?.split(separator: ")").first.map(String.init))
            // A mirror's type stays what it is.
            let typed = laptop.run(["sync", "set", id, "--type", "send-receive"])
            #expect(typed.status == 64 && typed.stderr.contains("is a mirror: its type stays"), "\(typed.stderr)")
            #expect(laptop.run(["sync", "remove", id]).status == 0)
            try Data("after\n".utf8).write(to: folder.appendingPathComponent("after.txt"))
            #expect(
                !waitUntil(timeout: 3) {
                    FileManager.default.fileExists(atPath: copy.appendingPathComponent("after.txt").path)
                })
        }

        /// The desk is away while the folder changes: when its agent is back, the copy catches up.
        @Test func anOfflineDeskCatchesUp() throws {
            let deskPort = freePort()
            let (laptop, desk) = try devices(deskPort: deskPort)
            let inbox = try desk.folder("inbox")
            let (agent, _) = try laptop.startAgent()
            defer { agent.stop() }
            let folder = try laptop.folder("photos")
            for n in 0..<5 { try makeFile(folder.appendingPathComponent("p\(n).jpg"), size: 40_000) }
            let started = laptop.run(["mirror", folder.path, "--to", "desk"])
            #expect(started.status == 0, "\(started.stderr)")
            try FileManager.default.removeItem(at: folder.appendingPathComponent("p0.jpg"))
            try makeFile(folder.appendingPathComponent("p9.jpg"), size: 40_000)
            let (deskAgent, _) = try desk.startAgent(["--inbox", inbox.path, "--port", String(deskPort)])
            defer { deskAgent.stop() }
            let copy = inbox.appendingPathComponent("laptop/photos")
            #expect(waitUntil(timeout: 60) { same(folder, copy) }, "the copy did not catch up")
        }

        /// A device that is not one of the owner's may not keep a mirror: it refuses, and the laptop says why.
        @Test func onlyTheOwnersDevicesKeepMirrors() throws {
            let deskPort = freePort()
            let (laptop, desk) = try devices(deskPort: deskPort, deskTrustsLaptopAs: [])
            let inbox = try desk.folder("inbox")
            let (deskAgent, _) = try desk.startAgent(["--inbox", inbox.path, "--port", String(deskPort)])
            defer { deskAgent.stop() }
            let (agent, _) = try laptop.startAgent()
            defer { agent.stop() }
            let folder = try laptop.folder("work")
            try Data("x".utf8).write(to: folder.appendingPathComponent("x.txt"))
            let started = laptop.run(["mirror", folder.path, "--to", "desk", "--wait", "15"], timeout: 90)
            #expect(started.status != 0)
            #expect(
                started.stderr.contains("shares folders only with its owner's devices"), "\(started.stderr)")
            #expect(!FileManager.default.fileExists(atPath: inbox.appendingPathComponent("laptop/work").path))
        }
    }
}
