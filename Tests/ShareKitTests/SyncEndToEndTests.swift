import Foundation
import Glibc
import ShareTLS
import ShareTestSupport
import Testing

/// Devices that share folders, each with its agent running (the owner's devices, trusted as team both ways).
final class SyncDevices {
    let devices: [TestDevice]
    var agents: [BackgroundShare?]
    let ports: [Int]
    let environment: [String: String]

    /// More arguments of each device's agent, by index.
    let options: [Int: [String]]

    init(_ names: [String], environment: [String: String] = [:], options: [Int: [String]] = [:]) throws {
        devices = try names.map { try TestDevice($0) }
        ports = names.map { _ in freePort() }
        self.environment = environment
        self.options = options
        for (i, a) in devices.enumerated() {
            for (j, b) in devices.enumerated() where i != j {
                a.trust(b, address: "127.0.0.1:\(ports[j])", flags: ["--team"])
            }
        }
        agents = []
        for index in devices.indices { agents.append(try start(index)) }
    }

    deinit { for agent in agents { agent?.stop() } }

    subscript(_ index: Int) -> TestDevice { devices[index] }

    /// What every running agent said (for a failure's message).
    var logs: String {
        zip(devices, agents).map { device, agent in
            "== \(device.name)\n"
                + (agent?.stderr.text.split(separator: "\n").suffix(40).joined(separator: "\n") ?? "off")
        }.joined(separator: "\n")
    }

    @discardableResult
    func start(_ index: Int) throws -> BackgroundShare {
        let (agent, _) = try devices[index].startAgent(
            ["--no-discovery", "--port", String(ports[index])] + (options[index] ?? []), environment: environment)
        if index < agents.count { agents[index] = agent }
        return agent
    }

    func stop(_ index: Int) {
        agents[index]?.stop()
        agents[index] = nil
    }

    func kill9(_ index: Int) {
        guard let agent = agents[index] else { return }
        kill(agent.pid, SIGKILL)
        _ = agent.wait(timeout: 10)
        agents[index] = nil
    }

    /// `share sync --json` of a device: its folders and the offers.
    func listing(_ index: Int) -> (folders: [[String: Any]], offers: [[String: Any]]) {
        let result = devices[index].run(["sync", "--json"])
        guard result.status == 0,
            let object = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        else { return ([], []) }
        return ((object["folders"] as? [[String: Any]]) ?? [], (object["offers"] as? [[String: Any]]) ?? [])
    }

    /// Shares `folder` of device `index` with the others named; its ID.
    func share(_ index: Int, _ folder: URL, with others: [Int], extra: [String] = []) throws -> String {
        let result = devices[index].run(
            ["sync", "add", folder.path] + others.flatMap { ["--with", devices[$0].name] } + extra)
        #expect(result.status == 0, "\(result.stderr)")
        let line = try #require(result.stderr.split(separator: "\n").first { $0.contains("sharing") })
        let id = try #require(line.split(separator: "(").dropFirst().first?.split(separator: ")").first)
        return String(id)
    }

    /// Waits for the offer of `id` on device `index` and accepts it into `into`.
    func accept(_ index: Int, _ id: String, into: URL) throws {
        #expect(
            waitUntil(timeout: 30) { self.listing(index).offers.contains { $0["id"] as? String == id } },
            "\(devices[index].name) was not offered \(id)")
        let result = devices[index].run(["sync", "accept", id, "--into", into.path])
        #expect(result.status == 0, "\(result.stderr)")
    }

    /// Waits until every device's folders are up to date and in step with every device (bounded).
    func settled(_ indices: [Int]? = nil, timeout: Double = 60) -> Bool {
        waitUntil(timeout: timeout) {
            (indices ?? Array(self.devices.indices)).allSatisfy { index in
                let folders = self.listing(index).folders
                return !folders.isEmpty
                    && folders.allSatisfy { folder in
                        folder["state"] as? String == "up to date"
                            && ((folder["peers"] as? [[String: Any]]) ?? []).allSatisfy {
                                $0["inStep"] as? Bool == true || $0["connected"] as? Bool == false
                            }
                    }
            }
        }
    }
}

/// Every file beneath `root` and its bytes (folders and links by what they are).
func treeOf(_ root: URL, skippingConflicts: Bool = false) -> [String: String] {
    var out: [String: String] = [:]
    let manager = FileManager.default
    guard let walker = manager.enumerator(atPath: root.path) else { return out }
    while let path = walker.nextObject() as? String {
        if path.hasPrefix(".share-") || path == ".sharefolder" || path.hasPrefix(".sharefolder/") { continue }
        if skippingConflicts, path.contains(".sync-conflict-") { continue }
        let full = root.appendingPathComponent(path).path
        let attributes = try? manager.attributesOfItem(atPath: full)
        switch attributes?[.type] as? FileAttributeType {
        case .typeDirectory?: out[path] = "folder"
        case .typeSymbolicLink?: out[path] = "link " + ((try? manager.destinationOfSymbolicLink(atPath: full)) ?? "")
        default:
            let data = manager.contents(atPath: full) ?? Data()
            out[path] =
                data.count > 64 ? "\(data.count) bytes \(data.hashValue)" : String(decoding: data, as: UTF8.self)
        }
    }
    return out
}

extension EndToEndAgents {
    /// `share sync`: three agents keep one folder the same, both ways, through whichever device is on.
    @Suite(.serialized) struct SyncEndToEndTests {
        /// Three devices sharing a folder of the first one's, accepted by the other two; the folders.
        func threeSharing(_ environment: [String: String] = [:]) throws -> (SyncDevices, [URL], String) {
            let devices = try SyncDevices(["laptop", "desk", "phone"], environment: environment)
            let folders = try (0..<3).map { try devices[$0].folder("thesis") }
            try Data("first draft\n".utf8).write(to: folders[0].appendingPathComponent("notes.txt"))
            try FileManager.default.createDirectory(
                at: folders[0].appendingPathComponent("chapters"), withIntermediateDirectories: true)
            try makeFile(folders[0].appendingPathComponent("chapters/one.bin"), size: 300_000)
            let id = try devices.share(0, folders[0], with: [1, 2])
            try devices.accept(1, id, into: folders[1])
            try devices.accept(2, id, into: folders[2])
            #expect(devices.settled(), "the first sync did not settle")
            return (devices, folders, id)
        }

        func same(_ folders: [URL], skippingConflicts: Bool = false) -> Bool {
            let first = treeOf(folders[0], skippingConflicts: skippingConflicts)
            return folders.dropFirst().allSatisfy { treeOf($0, skippingConflicts: skippingConflicts) == first }
        }

        @Test func editsOnEachSideReachEveryDevice() throws {
            let (devices, folders, _) = try threeSharing()
            #expect(same(folders), "\(folders.map { treeOf($0) })")
            // An edit on the desk, a new file on the phone, a removal and a rename on the laptop.
            try Data("second draft from the desk\n".utf8).write(to: folders[1].appendingPathComponent("notes.txt"))
            try Data("from the phone\n".utf8).write(to: folders[2].appendingPathComponent("idea.txt"))
            #expect(
                waitUntil(timeout: 30) {
                    treeOf(folders[0])["idea.txt"] == "from the phone\n"
                        && treeOf(folders[0])["notes.txt"] == "second draft from the desk\n"
                }, "\(treeOf(folders[0]))\n\(devices.logs)")
            try FileManager.default.moveItem(
                at: folders[0].appendingPathComponent("chapters/one.bin"),
                to: folders[0].appendingPathComponent("chapters/first.bin"))
            try FileManager.default.removeItem(at: folders[0].appendingPathComponent("idea.txt"))
            #expect(devices.settled())
            #expect(
                waitUntil(timeout: 30) { self.same(folders) }, "\(folders.map { treeOf($0) })")
            let tree = treeOf(folders[2])
            #expect(tree["notes.txt"] == "second draft from the desk\n" && tree["idea.txt"] == nil)
            #expect(tree["chapters/first.bin"] != nil && tree["chapters/one.bin"] == nil, "\(tree)")
        }

        @Test func aWaitAnswersOnceEveryDeviceHoldsWhatWasScannedOrSaysWhoIsBehind() throws {
            let (devices, folders, id) = try threeSharing()
            try Data("waited for\n".utf8).write(to: folders[0].appendingPathComponent("waited.txt"))
            // The rescan answers once the laptop's index has the file; the wait, once the desk and the phone hold it.
            let rescan = devices[0].run(["sync", "rescan", id])
            #expect(rescan.status == 0, "\(rescan.stderr)")
            let waited = devices[0].run(["sync", "--wait", "60", "--json"])
            #expect(waited.status == 0, "\(waited.stderr)\n\(devices.logs)")
            for folder in folders.dropFirst() {
                #expect(treeOf(folder)["waited.txt"] == "waited for\n", "\(treeOf(folder))")
            }
            let object = try JSONSerialization.jsonObject(with: Data(waited.stdout.utf8)) as? [String: Any]
            let listed = try #require((object?["folders"] as? [[String: Any]])?.first)
            #expect(listed["state"] as? String == "up to date" && listed["files"] as? Int == 3, "\(listed)")
            // The phone off and a change it lacks: the wait ends at its bound, saying so.
            devices.stop(2)
            try Data("the phone lacks this\n".utf8).write(to: folders[0].appendingPathComponent("later.txt"))
            #expect(devices[0].run(["sync", "rescan", id]).status == 0)
            let behind = devices[0].run(["sync", "--wait", "2"])
            #expect(behind.status == 69, "\(behind.stdout)\n\(behind.stderr)")
            #expect(behind.stderr.contains("not every folder is in step yet after 2 s"), "\(behind.stderr)")
            #expect(behind.stderr.contains("thesis: up to date here, phone (off) not in step"), "\(behind.stderr)")
            #expect(behind.stderr.split(separator: "\n").count == 1, "one line: \(behind.stderr)")
            #expect(behind.stdout.contains("phone"), "\(behind.stdout)")
        }

        @Test func aWaitWhoseAskerWentAwayEnds() throws {
            // A folder shared with a device that is off never settles: each wait asked for would hold one of the
            // control socket's 128 connections for an hour, had it not ended when its asker went away.
            let devices = try SyncDevices(["laptop", "desk"])
            devices.stop(1)
            let folder = try devices[0].folder("thesis")
            try Data("draft\n".utf8).write(to: folder.appendingPathComponent("notes.txt"))
            _ = try devices.share(0, folder, with: [1])
            // A send to the desk stays queued as long as it is off.
            let sent = devices[0].run(["send", folder.appendingPathComponent("notes.txt").path, "--to", "desk"])
            let job = try #require(
                sent.stderr.split(separator: " ").drop { $0 != "job" }.dropFirst().first.map(String.init),
                "\(sent.stderr)")
            let socket = devices[0].config.appendingPathComponent("state/agent.sock").path
            let script = """
                import socket, sys
                wait = ('{"op":"wait","id":"%s","timeout":3600}\\n' % sys.argv[2]).encode()
                for request in (b'{"op":"folders","timeout":3600}\\n', wait) * 80:
                    s = socket.socket(socket.AF_UNIX)
                    try:
                        s.connect(sys.argv[1]); s.sendall(request)
                    except OSError:
                        pass
                    s.close()
                """
            let asked = runTool("/usr/bin/python3", ["-c", script, socket, job])
            #expect(asked.status == 0, "\(asked.output)")
            #expect(
                waitUntil(timeout: 30) { devices[0].run(["sync", "--json"]).status == 0 },
                "the control socket stayed full of abandoned waits\n\(devices.logs)")
            let agent = try #require(devices.agents[0])
            let threads = {
                (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(agent.pid)/task").count) ?? 0
            }
            #expect(waitUntil(timeout: 30) { threads() < 60 }, "\(threads()) threads")
        }

        @Test func aChangeReachesTheThirdDeviceThroughTheSecondWhileTheFirstIsOff() throws {
            let (devices, folders, _) = try threeSharing()
            // The phone is off while the laptop changes; then the laptop goes off and the phone comes back.
            devices.stop(2)
            try Data("written on the laptop\n".utf8).write(to: folders[0].appendingPathComponent("later.txt"))
            #expect(
                waitUntil(timeout: 30) {
                    FileManager.default.fileExists(atPath: folders[1].appendingPathComponent("later.txt").path)
                }, "the desk did not get it")
            #expect(devices.settled([1]))
            devices.stop(0)
            try devices.start(2)
            #expect(
                waitUntil(timeout: 60) {
                    (try? String(contentsOf: folders[2].appendingPathComponent("later.txt"), encoding: .utf8))
                        == "written on the laptop\n"
                }, "the phone did not get it through the desk")
        }

        @Test func concurrentEditsKeepOneWinnerEverywhereAndTheOtherAsAConflictCopy() throws {
            let (devices, folders, _) = try threeSharing()
            // The phone is off; the laptop and the phone edit the same file; the phone comes back.
            devices.stop(2)
            try Data("the laptop's version\n".utf8).write(to: folders[0].appendingPathComponent("notes.txt"))
            #expect(waitUntil(timeout: 30) { treeOf(folders[1])["notes.txt"] == "the laptop's version\n" })
            try Data("the phone's version\n".utf8).write(to: folders[2].appendingPathComponent("notes.txt"))
            try devices.start(2)
            // Within half a minute: a pull left waiting for an answer that never comes stalls for a minute.
            #expect(
                waitUntil(timeout: 30) {
                    self.same(folders)
                        && treeOf(folders[0]).keys.contains { $0.hasPrefix("notes.sync-conflict-") }
                }, "\(folders.map { treeOf($0) })")
            let tree = treeOf(folders[1])
            let copies = tree.filter { $0.key.hasPrefix("notes.sync-conflict-") }
            // One winner at the path, the other version kept. (Two devices that held the losing content may each
            // keep it, under their own names, when they set it aside at the same moment: never fewer than one.)
            #expect((1...2).contains(copies.count) && Set(copies.values).count == 1, "\(tree)")
            #expect(
                Set([tree["notes.txt"], copies.first?.value])
                    == Set(["the laptop's version\n", "the phone's version\n"]), "\(tree)")
            // Every device lists the conflict, with both versions' devices.
            for index in 0..<3 {
                let listed = devices.listing(index).folders.first?["conflicts"] as? [[String: Any]] ?? []
                #expect(
                    listed.count == copies.count && listed.allSatisfy { $0["path"] as? String == "notes.txt" },
                    "\(listed)")
                #expect(listed.first?["winner"] as? String != nil)
            }
            let text = devices[1].run(["sync"]).stdout
            #expect(text.contains("conflict: notes.txt"), "\(text)")
        }

        @Test func aDeletionAtTheSameTimeAsAnEditKeepsTheEdit() throws {
            let (devices, folders, _) = try threeSharing()
            devices.stop(2)
            try FileManager.default.removeItem(at: folders[0].appendingPathComponent("notes.txt"))
            #expect(
                waitUntil(timeout: 30) {
                    !FileManager.default.fileExists(atPath: folders[1].appendingPathComponent("notes.txt").path)
                }, "the desk kept notes.txt")
            try Data("edited while the laptop deleted it\n".utf8).write(
                to: folders[2].appendingPathComponent("notes.txt"))
            try devices.start(2)
            #expect(
                waitUntil(timeout: 30) {
                    self.same(folders)
                        && treeOf(folders[0])["notes.txt"] == "edited while the laptop deleted it\n"
                }, "\(folders.map { treeOf($0) })")
        }

        @Test func anAgentKilledMidTransferCatchesUp() throws {
            let (devices, folders, _) = try threeSharing(["SHARE_TEST_SEND_RATE": String(8 << 20)])
            try makeFile(folders[0].appendingPathComponent("big.bin"), size: 48 << 20)
            // The desk is killed while the file crosses (about six seconds at this rate), then started again.
            #expect(
                waitUntil(timeout: 30) {
                    let partials = folders[1].appendingPathComponent(".share-partial")
                    return ((try? FileManager.default.contentsOfDirectory(atPath: partials.path)) ?? [])
                        .contains { $0.hasSuffix(".part") }
                }, "the transfer did not start")
            devices.kill9(1)
            try devices.start(1)
            #expect(
                waitUntil(timeout: 120) { self.same(folders) }, "\(folders.map { treeOf($0) })")
        }

        @Test func twoFoldersOfTheSameNameAreTwoFolders() throws {
            let devices = try SyncDevices(["laptop", "desk"])
            let one = try devices[0].folder("w1/docs")
            let two = try devices[0].folder("w2/docs")
            try Data("plan one\n".utf8).write(to: one.appendingPathComponent("plan.txt"))
            try Data("plan two\n".utf8).write(to: two.appendingPathComponent("plan.txt"))
            let first = try devices.share(0, one, with: [1])
            let second = try devices.share(0, two, with: [1])
            #expect(first != second)
            let intoOne = try devices[1].folder("docs-1")
            let intoTwo = try devices[1].folder("docs-2")
            // A place that is a file, or inside a folder accepted already, is refused in one line.
            let file = try devices[1].folder("elsewhere").appendingPathComponent("a-file")
            try Data("x\n".utf8).write(to: file)
            #expect(waitUntil(timeout: 30) { devices.listing(1).offers.contains { $0["id"] as? String == first } })
            let onAFile = devices[1].run(["sync", "accept", first, "--into", file.path])
            #expect(onAFile.status == 73 && onAFile.stderr.contains("is a file, not a folder"), "\(onAFile.stderr)")
            try devices.accept(1, first, into: intoOne)
            let inside = devices[1].run(["sync", "accept", second, "--into", intoOne.appendingPathComponent("in").path])
            #expect(
                inside.status == 64 && inside.stderr.contains("is inside the shared folder docs"), "\(inside.stderr)")
            try devices.accept(1, second, into: intoTwo)
            #expect(devices.settled())
            #expect(treeOf(intoOne)["plan.txt"] == "plan one\n" && treeOf(intoTwo)["plan.txt"] == "plan two\n")
            // A removal in one touches nothing of the other.
            try FileManager.default.removeItem(at: one.appendingPathComponent("plan.txt"))
            #expect(
                waitUntil(timeout: 30) { treeOf(intoOne)["plan.txt"] == nil })
            #expect(treeOf(intoTwo)["plan.txt"] == "plan two\n")
            // One removed on the laptop: the desk, still linked to it for the other, says the laptop no longer shares
            // it (and is not in step with it), not that the laptop is away.
            #expect(devices[0].run(["sync", "remove", second]).status == 0)
            func laptop(in folder: String) -> [String: Any]? {
                let listed = devices.listing(1).folders.first {
                    ($0["settings"] as? [String: Any])?["id"] as? String == folder
                }
                return (listed?["peers"] as? [[String: Any]])?.first
            }
            #expect(
                waitUntil(timeout: 30) {
                    laptop(in: second).map { $0["notSharing"] as? Bool == true && $0["inStep"] as? Bool == false }
                        ?? false
                }, "\(String(describing: laptop(in: second)))")
            #expect(laptop(in: first)?["connected"] as? Bool == true && laptop(in: first)?["notSharing"] == nil)
            // The laptop said why: it removed it.
            #expect(laptop(in: second)?["notSharingWhy"] as? String == "removed")
            #expect(devices[1].run(["sync"]).stdout.contains("laptop: connected, removed this folder there"))
        }

        /// agent.json's `folders` names the devices whose folders are taken without asking, and where they go: two
        /// folders of one name land side by side, each its own.
        @Test func foldersOfADeviceNamedInAgentJSONAreAcceptedWithoutAsking() throws {
            let devices = try SyncDevices(["laptop", "desk"])
            let place = devices[1].directory.appendingPathComponent("Sync")
            let settings = devices[1].config.appendingPathComponent("agent.json")
            var object =
                (try? JSONSerialization.jsonObject(with: Data(contentsOf: settings))) as? [String: Any] ?? [:]
            object["folders"] = ["autoAccept": ["laptop"], "path": place.path]
            try JSONSerialization.data(withJSONObject: object).write(to: settings)
            devices.stop(1)
            try devices.start(1)
            let one = try devices[0].folder("w1/docs")
            let two = try devices[0].folder("w2/docs")
            try Data("plan one\n".utf8).write(to: one.appendingPathComponent("plan.txt"))
            try Data("plan two\n".utf8).write(to: two.appendingPathComponent("plan.txt"))
            _ = try devices.share(0, one, with: [1])
            _ = try devices.share(0, two, with: [1])
            #expect(
                waitUntil(timeout: 60) {
                    let plans = ["docs", "docs (2)"].map {
                        treeOf(place.appendingPathComponent($0))["plan.txt"] ?? ""
                    }
                    return Set(plans) == ["plan one\n", "plan two\n"]
                }, "\(treeOf(place))\n\(devices.logs)")
            #expect(devices.listing(1).offers.isEmpty && devices.listing(1).folders.count == 2)
        }

        @Test func aFolderSentThenSyncedHoldsNoDuplicates() throws {
            let devices = try SyncDevices(["laptop", "desk"])
            let folder = try devices[0].folder("photos")
            for n in 0..<5 { try makeFile(folder.appendingPathComponent("p\(n).jpg"), size: 20_000) }
            let inbox = devices[1].directory.appendingPathComponent("config/data/inbox")
            let sent = devices[0].run(["send", folder.path, "--to", "desk", "--direct"])
            #expect(sent.status == 0, "\(sent.stderr)")
            let copy = try #require(
                (try? FileManager.default.contentsOfDirectory(atPath: inbox.appendingPathComponent("laptop").path))?
                    .first { $0.hasPrefix("photos") })
            let target = inbox.appendingPathComponent("laptop/\(copy)")
            let id = try devices.share(0, folder, with: [1])
            try devices.accept(1, id, into: target)
            #expect(devices.settled())
            let tree = treeOf(target)
            #expect(tree.count == 5 && !tree.keys.contains { $0.contains("sync-conflict") }, "\(tree)")
        }

        @Test func aFolderOfMoreFilesThanOneScanPartIsRecordedOnceAndArrivesWhole() throws {
            // 2,500 files (a first scan records them a thousand at a time, announcing each part), an empty folder,
            // and a link.
            let devices = try SyncDevices(["laptop", "desk"])
            let folders = try (0..<2).map { try devices[$0].folder("notes") }
            for n in 0..<2500 {
                let place = folders[0].appendingPathComponent("d\(n / 100)")
                if n % 100 == 0 {
                    try FileManager.default.createDirectory(at: place, withIntermediateDirectories: true)
                }
                try Data("note \(n)\n".utf8).write(to: place.appendingPathComponent("n\(n).txt"))
            }
            try FileManager.default.createDirectory(
                at: folders[0].appendingPathComponent("empty"), withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(
                atPath: folders[0].appendingPathComponent("d0/link").path, withDestinationPath: "n0.txt")
            // Patterns there before the folder is shared hold from its first part on.
            try Data("*.secret\n".utf8).write(to: folders[0].appendingPathComponent(".shareignore"))
            try Data("key\n".utf8).write(to: folders[0].appendingPathComponent("d0/a.secret"))
            let id = try devices.share(0, folders[0], with: [1])
            try devices.accept(1, id, into: folders[1])
            #expect(devices.settled(timeout: 120), "\(devices.logs)")
            var expected = treeOf(folders[0])
            expected[".shareignore"] = nil
            expected["d0/a.secret"] = nil
            #expect(treeOf(folders[1]) == expected)
            #expect(treeOf(folders[1])["d24/n2499.txt"] == "note 2499\n")
            // Each device's index holds every file once, and nothing is left to pull or changed here.
            for index in 0..<2 {
                let folder = try #require(devices.listing(index).folders.first)
                #expect(folder["files"] as? Int == 2500, "\(folder)")
                #expect(folder["neededFiles"] as? Int == 0, "\(folder)")
            }
        }

        /// A folder shared already, shared with one more device (a new phone): the same folder (its ID), offered to
        /// that device, which gets it whole; the devices that had it learn of the new one (a change made on one of
        /// them reaches it while the first is off); nothing new asked, or another type, is refused with why.
        @Test func aFolderSharedAlreadyIsSharedWithOneMoreDevice() throws {
            let devices = try SyncDevices(["laptop", "desk", "phone"])
            let folders = try (0..<3).map { try devices[$0].folder("docs") }
            try Data("one\n".utf8).write(to: folders[0].appendingPathComponent("one.txt"))
            let id = try devices.share(0, folders[0], with: [1])
            try devices.accept(1, id, into: folders[1])
            #expect(devices.settled([0, 1]), "\(devices.logs)")
            #expect(devices.listing(2).offers.isEmpty)
            // Named through a link to it: the same folder.
            let link = folders[0].deletingLastPathComponent().appendingPathComponent("docs-link")
            try FileManager.default.createSymbolicLink(at: link, withDestinationURL: folders[0])
            let more = devices[0].run(["sync", "add", link.path, "--with", "phone"])
            #expect(
                more.status == 0 && more.stderr.contains("(\(id))") && more.stderr.contains("too"), "\(more.stderr)")
            try devices.accept(2, id, into: folders[2])
            #expect(waitUntil(timeout: 30) { treeOf(folders[2]) == treeOf(folders[0]) }, "\(devices.logs)")
            #expect(devices.listing(0).folders.count == 1)
            for (arguments, hint) in [
                (["sync", "add", folders[0].path, "--with", "desk", "--with", "phone"], "with desk, phone"),
                (["sync", "add", folders[0].path, "--with", "desk", "--send-only"], "its type and settings stay"),
            ] {
                let result = devices[0].run(arguments)
                #expect(
                    result.status == 64 && result.stderr.contains("already shared as docs (\(id))")
                        && result.stderr.contains(hint) && result.stderr.split(separator: "\n").count == 1,
                    "\(arguments): \(result.status) \(result.stderr)")
            }
            // The desk shares it with the phone too now: a change made there reaches the phone with the laptop off.
            #expect(
                waitUntil(timeout: 30) {
                    (devices.listing(1).folders.first?["peers"] as? [[String: Any]])?.contains {
                        $0["name"] as? String == "phone" && $0["inStep"] as? Bool == true
                    } == true
                }, "\(devices.listing(1).folders)")
            devices.stop(0)
            try Data("two\n".utf8).write(to: folders[1].appendingPathComponent("two.txt"))
            #expect(waitUntil(timeout: 30) { treeOf(folders[2])["two.txt"] == "two\n" }, "\(devices.logs)")
            // The desk says how far the laptop is behind: the one file it has not seen.
            let laptop = (devices.listing(1).folders.first?["peers"] as? [[String: Any]])?.first {
                $0["name"] as? String == "laptop"
            }
            #expect(
                laptop?["inStep"] as? Bool == false && laptop?["differing"] as? Int == 1,
                "\(String(describing: laptop))")
            // Away, and why as far as the desk knows: never a refusal of a link that gave way to another.
            let listed = devices[1].run(["sync"]).stdout
            #expect(
                listed.contains("laptop: away") && listed.contains("1 file(s) differ, last in step")
                    && !listed.contains("open already"), "\(listed)\n\(devices.logs)")
        }

        /// The laptop's folder `docs` (one.txt) shared with the desk, accepted there and settled.
        func twoSharingOneFile(environment: [String: String] = [:]) throws -> (SyncDevices, [URL], String) {
            let devices = try SyncDevices(["laptop", "desk"], environment: environment)
            let folders = try (0..<2).map { try devices[$0].folder("docs") }
            try Data("one\n".utf8).write(to: folders[0].appendingPathComponent("one.txt"))
            let id = try devices.share(0, folders[0], with: [1])
            try devices.accept(1, id, into: folders[1])
            #expect(devices.settled(), "\(devices.logs)")
            return (devices, folders, id)
        }

        /// When a device was last in step is kept with the folder's index: after both agents stopped and one came
        /// back alone, it still says when the other last held what it holds, and that it is away.
        @Test func whenADeviceWasLastInStepOutlivesARestart() throws {
            let (devices, _, id) = try twoSharingOneFile()
            // share status has a line for the folder too.
            let status = devices[0].run(["status"]).stdout
            #expect(status.contains("folder: docs (\(id)) up to date, 1 file(s); desk in step"), "\(status)")
            devices.stop(1)
            devices.stop(0)
            try devices.start(0)
            let desk = try #require(
                (devices.listing(0).folders.first?["peers"] as? [[String: Any]])?.first {
                    $0["name"] as? String == "desk"
                }, "\(devices.listing(0).folders)")
            #expect(desk["connected"] as? Bool == false && desk["lastInStep"] != nil, "\(desk)")
            let listed = devices[0].run(["sync"]).stdout
            #expect(
                listed.contains("desk: away") && listed.contains("last in step") && !listed.contains("in step\n"),
                "\(listed)")
            #expect(devices[0].run(["status"]).stdout.contains("; desk away"))
        }

        /// A device that has a folder offered and does not take it says so to the device that shares it: not
        /// accepted yet, then declined; each shown there in `share sync`, `share status` and `--json`. The desk can
        /// still take the folder it declined.
        @Test func aDeviceThatDoesNotTakeAFolderSaysWhy() throws {
            let devices = try SyncDevices(["laptop", "desk"])
            let folder = try devices[0].folder("thesis")
            try Data("draft\n".utf8).write(to: folder.appendingPathComponent("draft.txt"))
            let id = try devices.share(0, folder, with: [1])
            func desk() -> [String: Any]? {
                (devices.listing(0).folders.first?["peers"] as? [[String: Any]])?.first
            }
            #expect(
                waitUntil(timeout: 30) { desk()?["notSharingWhy"] as? String == "offered" },
                "\(String(describing: desk()))\n\(devices.logs)")
            #expect(desk()?["notSharing"] as? Bool == true && desk()?["inStep"] as? Bool == false)
            #expect(devices[0].run(["sync"]).stdout.contains("desk: connected, has not accepted this folder yet"))
            let declined = devices[1].run(["sync", "decline", id])
            #expect(declined.status == 0, "\(declined.stderr)")
            #expect(
                waitUntil(timeout: 30) { desk()?["notSharingWhy"] as? String == "declined" },
                "\(String(describing: desk()))\n\(devices.logs)")
            #expect(devices[0].run(["sync"]).stdout.contains("desk: connected, declined this folder"))
            #expect(devices[0].run(["status"]).stdout.contains("; desk declined it"))
            // The folder waits for the desk, which said why.
            #expect(devices.listing(0).folders.first?["state"] as? String == "waiting for desk (declined it)")
            // Still said after the desk restarts (the decline is kept): first nothing is said (no link), then the
            // new link's hello says it again.
            devices.stop(1)
            #expect(waitUntil(timeout: 30) { desk().map { $0["notSharing"] == nil } ?? false })
            try devices.start(1)
            #expect(
                waitUntil(timeout: 30) { desk()?["notSharingWhy"] as? String == "declined" },
                "\(String(describing: desk()))")
            // Declined is not for ever: the desk lists what it declined, and takes it after all.
            let listed = devices[1].run(["sync"]).stdout
            #expect(listed.contains("declined: thesis (\(id)) from laptop; share sync accept \(id)"), "\(listed)")
            #expect(devices.listing(1).offers.isEmpty)
            let json = devices[1].run(["sync", "--json"]).stdout
            let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
            #expect((object?["declined"] as? [[String: Any]])?.map { $0["id"] as? String } == [id], "\(json)")
            let into = try devices[1].folder("thesis-after-all")
            let accepted = devices[1].run(["sync", "accept", "thesis", "--into", into.path])
            #expect(accepted.status == 0, "\(accepted.stderr)")
            #expect(devices.settled(), "\(devices.logs)")
            #expect(treeOf(into)["draft.txt"] == "draft\n")
            #expect(desk()?["notSharing"] == nil && desk()?["inStep"] as? Bool == true, "\(String(describing: desk()))")
            #expect(!devices[1].run(["sync"]).stdout.contains("declined:"))
        }

        /// A folder paused on one device: nothing crosses either way, the device says so and the other sees it
        /// as not shared there, through a restart too; resumed, what changed on both sides meanwhile crosses.
        @Test func aPausedFolderTakesAndSendsNothingUntilItIsResumed() throws {
            let (devices, folders, id) = try twoSharingOneFile()
            // Named by its label, the one folder here that has it (by its path when resumed below).
            let paused = devices[1].run(["sync", "pause", "docs"])
            #expect(paused.status == 0 && paused.stderr.contains("paused docs (\(id))"), "\(paused.stderr)")
            #expect(devices.listing(1).folders.first?["state"] as? String == "paused")
            // The paused side says the laptop is there (it is this device that paused, not the laptop that declines).
            #expect(
                waitUntil(timeout: 30) {
                    let listed = devices[1].run(["sync"]).stdout
                    return listed.contains("laptop: connected") && !listed.contains("not sharing")
                }, "\(devices[1].run(["sync"]).stdout)")
            #expect(
                waitUntil(timeout: 30) {
                    (devices.listing(0).folders.first?["peers"] as? [[String: Any]])?.first?["notSharing"] as? Bool
                        == true
                }, "\(devices.listing(0).folders)")
            // The laptop is told why: the desk paused it.
            #expect(
                (devices.listing(0).folders.first?["peers"] as? [[String: Any]])?.first?["notSharingWhy"] as? String
                    == "paused")
            #expect(devices[0].run(["sync"]).stdout.contains("desk: connected, paused this folder there"))
            #expect(devices[0].run(["status"]).stdout.contains("; desk paused it"))
            try Data("from the laptop\n".utf8).write(to: folders[0].appendingPathComponent("laptop.txt"))
            try Data("from the desk\n".utf8).write(to: folders[1].appendingPathComponent("desk.txt"))
            // Paused through a restart; asked again, or asked to scan: one line each, exit 64.
            devices.stop(1)
            try devices.start(1)
            for arguments in [["sync", "pause", id], ["sync", "rescan", id]] {
                let result = devices[1].run(arguments)
                #expect(result.status == 64 && result.stderr.contains("paused"), "\(arguments): \(result.stderr)")
            }
            #expect(
                waitUntil(timeout: 5) {
                    treeOf(folders[0])["desk.txt"] != nil || treeOf(folders[1])["laptop.txt"] != nil
                }
                    == false, "\(treeOf(folders[0]))\n\(treeOf(folders[1]))")
            #expect(devices.listing(1).folders.first?["state"] as? String == "paused")
            let resumed = devices[1].run(["sync", "resume", folders[1].path + "/"])
            #expect(resumed.status == 0 && resumed.stderr.contains("resumed docs"), "\(resumed.stderr)")
            #expect(
                waitUntil(timeout: 30) {
                    treeOf(folders[0])["desk.txt"] == "from the desk\n"
                        && treeOf(folders[1])["laptop.txt"] == "from the laptop\n"
                }, "\(devices.logs)")
            #expect(devices.settled(), "\(devices.logs)")
            #expect(devices[1].run(["sync", "resume", id]).status == 64)
        }

        /// What other devices changed is listed where it was applied (`share sync changes`): added, changed,
        /// renamed and deleted, by which device, newest first; the device that made the changes lists none of them.
        @Test func theChangesOtherDevicesMadeAreListedWhereTheyWereApplied() throws {
            let (devices, folders, id) = try twoSharingOneFile()
            try Data("two\n".utf8).write(to: folders[0].appendingPathComponent("two.txt"))
            try Data("one, edited\n".utf8).write(to: folders[0].appendingPathComponent("one.txt"))
            #expect(
                waitUntil(timeout: 30) {
                    treeOf(folders[1])["two.txt"] == "two\n" && treeOf(folders[1])["one.txt"] == "one, edited\n"
                }, "\(devices.logs)")
            // A rename (one move on the laptop) is applied here by moving the file: one change, naming both paths.
            try FileManager.default.moveItem(
                at: folders[0].appendingPathComponent("one.txt"), to: folders[0].appendingPathComponent("uno.txt"))
            #expect(
                waitUntil(timeout: 30) {
                    treeOf(folders[1])["uno.txt"] == "one, edited\n" && treeOf(folders[1])["one.txt"] == nil
                }, "\(devices.logs)")
            // A name another device chose that carries a terminal's escape: listed with the escape spelled out.
            let escaping = "red\u{1B}[31m.txt"
            try Data("escape\n".utf8).write(to: folders[0].appendingPathComponent(escaping))
            #expect(waitUntil(timeout: 30) { treeOf(folders[1])[escaping] == "escape\n" }, "\(devices.logs)")
            try FileManager.default.removeItem(at: folders[0].appendingPathComponent("two.txt"))
            #expect(waitUntil(timeout: 30) { treeOf(folders[1])["two.txt"] == nil }, "\(devices.logs)")
            let listed = devices[1].run(["sync", "changes", "docs"])
            #expect(
                !listed.stdout.contains("\u{1B}") && listed.stdout.contains("laptop  added file  red\\u{1b}[31m.txt"),
                "\(listed.stdout)")
            #expect(listed.status == 0, "\(listed.stderr)")
            let lines = listed.stdout.split(separator: "\n").map(String.init)
            // Six at least (a busy machine may see an edit half written, then whole: two changes).
            let count = lines.first.flatMap { line -> Int? in
                guard line.hasPrefix("docs (\(id)): "), line.hasSuffix(" change(s) by other devices, newest first")
                else { return nil }
                return Int(line.dropFirst("docs (\(id)): ".count).prefix { $0.isNumber })
            }
            #expect((count ?? 0) >= 6 && lines.count == (count ?? 0) + 1, "\(listed.stdout)")
            #expect(lines.dropFirst().first?.hasSuffix("laptop  deleted file  two.txt") == true, "\(listed.stdout)")
            #expect(!lines.contains { $0.hasSuffix("deleted file  one.txt") }, "\(listed.stdout)")
            for line in [
                "laptop  added file  one.txt", "laptop  added file  two.txt", "laptop  changed file  one.txt",
                "laptop  renamed file  uno.txt (was one.txt)",
            ] {
                #expect(lines.contains { $0.hasSuffix(line) }, "\(line)\n\(listed.stdout)")
            }
            let json = devices[1].run(["sync", "changes", id, "--json"])
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: [[String: Any]]])
            #expect(
                object[id]?.last?["action"] as? String == "deleted" && object[id]?.last?["by"] as? String == "laptop")
            #expect(devices[0].run(["sync", "changes"]).stdout.contains("nothing changed by another device"))
        }

        /// Two folders of one label here: a command naming the label is refused and names both IDs (and where
        /// each is); each is named by its ID or its path instead, and an offer by its label.
        @Test func aLabelTwoFoldersShareNamesNeitherAndTheirPathsDo() throws {
            let devices = try SyncDevices(["laptop", "desk"])
            let first = try devices[0].folder("work/docs")
            let second = try devices[0].folder("home/docs")
            let one = try devices.share(0, first, with: [1])
            let two = try devices.share(0, second, with: [1])
            let refused = devices[0].run(["sync", "pause", "docs"])
            #expect(
                refused.status == 64 && refused.stderr.contains("2 shared folders are labelled docs")
                    && refused.stderr.contains("\(one) (\(first.path))") && refused.stderr.contains(two),
                "\(refused.stderr)")
            let paused = devices[0].run(["sync", "pause", second.path])
            #expect(paused.status == 0 && paused.stderr.contains("paused docs (\(two))"), "\(paused.stderr)")
            #expect(devices[0].run(["sync", "pause", one]).status == 0)
            // The desk is offered both, under one label: accepting by it is refused the same way.
            #expect(waitUntil(timeout: 30) { devices.listing(1).offers.count == 2 }, "\(devices.logs)")
            let accepted = devices[1].run(["sync", "accept", "docs"])
            #expect(
                accepted.status == 64 && accepted.stderr.contains("2 folders offered are labelled docs"),
                "\(accepted.stderr)")
        }

        /// A folder replaced by a file on the laptop while the desk made a file in that folder: the folder stays
        /// (with the desk's file; the laptop's removals of the others hold), the laptop's file is kept beside it as
        /// a conflict copy, and both devices say that a folder is at the path.
        @Test func aFolderReplacedByAFileWhileFilesWereMadeInItStaysAndTheFileIsKeptBeside() throws {
            let (devices, folders, id) = try twoSharingOneFile()
            try FileManager.default.createDirectory(
                at: folders[0].appendingPathComponent("notes"), withIntermediateDirectories: true)
            try Data("old\n".utf8).write(to: folders[0].appendingPathComponent("notes/old.txt"))
            #expect(
                waitUntil(timeout: 30) { treeOf(folders[1])["notes/old.txt"] == "old\n" } && devices.settled(),
                "\(devices.logs)")
            #expect(devices[1].run(["sync", "pause", id]).status == 0)
            try FileManager.default.removeItem(at: folders[0].appendingPathComponent("notes"))
            try Data("a file now\n".utf8).write(to: folders[0].appendingPathComponent("notes"))
            try Data("made on the desk\n".utf8).write(to: folders[1].appendingPathComponent("notes/desk.txt"))
            #expect(
                waitUntil(timeout: 30) {
                    (devices.listing(0).folders.first?["peers"] as? [[String: Any]])?.first?["notSharing"] as? Bool
                        == true && devices.listing(0).folders.first?["state"] as? String == "up to date"
                }, "\(devices.logs)")
            #expect(devices[1].run(["sync", "resume", id]).status == 0)
            #expect(devices.settled(), "\(devices.logs)")
            let tree = treeOf(folders[0])
            #expect(tree == treeOf(folders[1]), "\(tree)\n\(treeOf(folders[1]))")
            let copy = tree.keys.first { $0.hasPrefix("notes.sync-conflict-") }
            #expect(
                tree["notes"] == "folder" && tree["notes/desk.txt"] == "made on the desk\n"
                    && tree["notes/old.txt"] == nil && copy.map { tree[$0] } == "a file now\n", "\(tree)")
            for index in 0..<2 {
                let listed = devices[index].run(["sync"]).stdout
                #expect(
                    listed.contains("conflict: notes — laptop's of ")
                        && listed.contains("a folder is there (files were made in it on another device meanwhile)"),
                    "\(listed)")
            }
        }

        /// The laptop stops sharing the folder with the phone: the phone sees it as not shared by the laptop, the
        /// laptop no longer lists the phone, and the desk's word that it shares the folder with the phone does not
        /// bring the phone back (also after a restart); the folder still syncs with the desk, and through the desk
        /// with the phone. Shared again with `add --with`, the laptop and the phone are in step again.
        @Test func aFolderUnsharedWithOneDeviceStaysSyncedWithTheOthers() throws {
            let (devices, folders, id) = try threeSharing()
            let unshared = devices[0].run(["sync", "unshare", id, "--with", "phone"])
            #expect(
                unshared.status == 0 && unshared.stderr.contains("thesis (\(id)) is no longer shared with phone here"),
                "\(unshared.stderr)")
            func peers(_ index: Int) -> [[String: Any]] {
                (devices.listing(index).folders.first?["peers"] as? [[String: Any]]) ?? []
            }
            #expect(
                waitUntil(timeout: 30) {
                    peers(2).first { $0["name"] as? String == "laptop" }?["notSharing"] as? Bool == true
                }, "\(peers(2))\n\(devices.logs)")
            #expect(peers(2).first { $0["name"] as? String == "laptop" }?["notSharingWhy"] as? String == "unshared")
            #expect(
                devices[2].run(["sync"]).stdout.contains(
                    "laptop: connected, no longer shares this folder with this device"))
            #expect(devices.settled([0, 1]), "\(devices.logs)")
            #expect(peers(0).map { $0["name"] as? String } == ["desk"], "\(peers(0))")
            try Data("after\n".utf8).write(to: folders[0].appendingPathComponent("after.txt"))
            #expect(
                waitUntil(timeout: 30) {
                    treeOf(folders[1])["after.txt"] == "after\n" && treeOf(folders[2])["after.txt"] == "after\n"
                }, "\(devices.logs)")
            devices.stop(0)
            try devices.start(0)
            #expect(devices.settled([0, 1]), "\(devices.logs)")
            #expect(peers(0).map { $0["name"] as? String } == ["desk"], "\(peers(0))")
            // Unshared with every device, it says so.
            #expect(devices[0].run(["sync", "unshare", id, "--with", "desk"]).status == 0)
            let alone = devices[0].run(["sync"]).stdout
            #expect(
                alone.contains("shared with no device: share sync add \(folders[0].path) --with DEVICE"), "\(alone)")
            #expect(devices[0].run(["sync", "add", folders[0].path, "--with", "desk"]).status == 0)
            for (arguments, words) in [
                (
                    ["sync", "unshare", id, "--with", "phone"],
                    "is not shared with 'phone' here (it is shared with desk)"
                ),
                (["sync", "unshare", id], "name a device to stop sharing"),
                (["sync", "unshare", "aaaaa-bbbbb-ccccc", "--with", "desk"], "no shared folder aaaaa-bbbbb-ccccc"),
            ] {
                let result = devices[0].run(arguments)
                #expect(
                    result.status == 64 && result.stderr.contains(words)
                        && result.stderr.split(separator: "\n").count == 1, "\(arguments): \(result.stderr)")
            }
            let again = devices[0].run(["sync", "add", folders[0].path, "--with", "phone"])
            #expect(again.status == 0, "\(again.stderr)")
            #expect(devices.settled(), "\(devices.logs)")
            #expect(Set(peers(0).map { $0["name"] as? String }) == ["desk", "phone"], "\(peers(0))")
        }

        /// A large file on its way: what is to come shrinks, the rate and the bytes crossed show while it arrives
        /// (not only once its pull ends); once it is here, nothing is to come and what crossed is the file.
        @Test func aLargeFileShowsItsProgressWhileItArrives() throws {
            let (devices, folders, _) = try twoSharingOneFile(environment: ["SHARE_TEST_SEND_RATE": "200000"])
            let size = 8 << 20
            try makeFile(folders[0].appendingPathComponent("big.bin"), size: size)
            // About a chunk a second at this rate: some chunks in, the file not yet here.
            var seen: [String: Any] = [:]
            #expect(
                waitUntil(timeout: 30) {
                    guard let folder = devices.listing(1).folders.first else { return false }
                    seen = folder
                    let toCome = folder["neededBytes"] as? Int ?? 0
                    return folder["neededFiles"] as? Int == 1 && toCome > 0 && toCome <= size - (2 << 20)
                        && (folder["rate"] as? Double ?? 0) > 0 && (folder["bytesReceived"] as? Int ?? 0) >= 2 << 20
                }, "\(seen)\n\(devices.logs)")
            // `share sync` says it too, with about how long is left.
            let line = devices[1].run(["sync"]).stdout
            #expect(line.contains("1 file(s),") && line.contains("/s, about ") && line.contains(" left"), "\(line)")
            #expect(treeOf(folders[1])["big.bin"] == nil, "the file came before its progress was seen")
            #expect(devices.settled(), "\(devices.logs)")
            let done = try #require(devices.listing(1).folders.first)
            let crossed = done["bytesReceived"] as? Int ?? 0
            #expect(
                done["neededBytes"] as? Int == 0 && crossed >= size && crossed < size + (1 << 20), "\(done)")
        }

        /// A device no longer trusted while a file is on its way to it: the transfer ends at once (the desk lists
        /// the file as not pulled) instead of carrying on to the end.
        @Test func aFileOnItsWayToADeviceNoLongerTrustedStops() throws {
            let (devices, folders, _) = try twoSharingOneFile(environment: ["SHARE_TEST_SEND_RATE": "200000"])
            try makeFile(folders[0].appendingPathComponent("big.bin"), size: 16_000_000)
            // On its way (a chunk a second at this rate: 16 s): the desk's partial of it grows.
            let partials = folders[1].appendingPathComponent(".share-partial")
            func partialBytes() -> Int {
                let names = (try? FileManager.default.subpathsOfDirectory(atPath: partials.path)) ?? []
                return names.reduce(0) { total, name in
                    let size =
                        (try? FileManager.default.attributesOfItem(
                            atPath: partials.appendingPathComponent(name).path))?[.size] as? Int
                    return total + (size ?? 0)
                }
            }
            #expect(waitUntil(timeout: 30) { partialBytes() > 0 }, "\(devices.logs)")
            #expect(devices[0].run(["trust", "remove", "desk"]).status == 0)
            // Without the cut the file would land some 15 s from now; with it, it is listed at once (10 s allowed
            // for a busy machine).
            #expect(
                waitUntil(timeout: 10) {
                    ((devices.listing(1).folders.first?["problems"] as? [[String: Any]]) ?? []).contains {
                        $0["path"] as? String == "big.bin" && ($0["reason"] as? String)?.hasPrefix("not pulled") == true
                    }
                }, "\(devices.listing(1).folders)\n\(devices.logs)")
            #expect(treeOf(folders[1])["big.bin"] == nil)
        }

        /// A folder is shared with at most 63 other devices (what a hello carries with its own): more at once, or
        /// one more later, is refused with one line, and the folder stays as it was.
        @Test func aFolderIsSharedWithAtMostSixtyThreeOtherDevices() throws {
            let laptop = try TestDevice("laptop")
            let names = (1...64).map { "d\($0)" }
            for name in names {
                let id = DeviceID(bytes: (0..<32).map { _ in UInt8.random(in: 0...255) }).description
                let result = laptop.run(["trust", "add", id, "--name", name, "--team"])
                #expect(result.status == 0, "\(result.stderr)")
            }
            let (agent, _) = try laptop.startAgent(["--no-discovery"])
            defer { agent.stop() }
            let folder = try laptop.folder("docs")
            let all = laptop.run(["sync", "add", folder.path] + names.flatMap { ["--with", $0] })
            #expect(
                all.status == 64 && all.stderr.contains("at most 63 other devices")
                    && all.stderr.split(separator: "\n").count == 1, "\(all.stderr)")
            let most = laptop.run(["sync", "add", folder.path] + names.dropLast().flatMap { ["--with", $0] })
            #expect(most.status == 0, "\(most.stderr)")
            let more = laptop.run(["sync", "add", folder.path, "--with", "d64"])
            #expect(more.status == 64 && more.stderr.contains("at most 63 other devices"), "\(more.stderr)")
            let result = laptop.run(["sync", "--json"])
            let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            let folders = object?["folders"] as? [[String: Any]]
            #expect(
                folders?.count == 1
                    && ((folders?.first?["settings"] as? [String: Any])?["devices"] as? [Any])?.count
                        == 63,
                "\(result.stdout.prefix(500))")
        }

        /// A folder's own settings changed on one device: its label there (through a restart; the desk keeps its
        /// own), and no versions kept any more of what the desk's changes replace; wrong uses exit 64 with one line.
        @Test func aFoldersOwnSettingsChangeOnOneDevice() throws {
            let (devices, folders, id) = try twoSharingOneFile()
            let set = devices[0].run(["sync", "set", id, "--label", "Thesis", "--keep-versions", "0"])
            #expect(
                set.status == 0 && set.stderr.contains("Thesis (\(id)), send-receive: versions kept not at all"),
                "\(set.stderr)")
            try Data("changed on the desk\n".utf8).write(to: folders[1].appendingPathComponent("one.txt"))
            #expect(
                waitUntil(timeout: 30) { treeOf(folders[0])["one.txt"] == "changed on the desk\n" }, "\(devices.logs)")
            let kept = devices[0].run(["sync", "versions", id, "--json"])
            #expect(kept.status == 0 && kept.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "[]", "\(kept)")
            devices.stop(0)
            try devices.start(0)
            func label(_ index: Int) -> String? {
                (devices.listing(index).folders.first?["settings"] as? [String: Any])?["label"] as? String
            }
            #expect(label(0) == "Thesis" && label(1) == "docs")
            for (arguments, words) in [
                (["sync", "set", id], "name a setting to change: --type"),
                (["sync", "set", id, "--keep-versions", "-1"], "0 or more"),
                (["sync", "set", id, "--max-conflicts", "-2"], "-1: no limit"),
                (["sync", "set", id, "--label", "two\nlines"], "without control characters"),
                (["sync", "set", "aaaaa-bbbbb-ccccc", "--label", "x"], "no shared folder aaaaa-bbbbb-ccccc"),
            ] {
                let result = devices[0].run(arguments)
                #expect(
                    result.status == 64 && result.stderr.contains(words)
                        && result.stderr.split(separator: "\n").count == 1, "\(arguments): \(result.stderr)")
            }
            #expect(label(0) == "Thesis")
        }

        /// Accepted with what it keeps (`--keep-versions`, `--max-conflicts -1`, no limit): the folder's settings say
        /// so; a number out of range is refused with one line and nothing is accepted.
        @Test func aFolderIsAcceptedWithWhatItKeeps() throws {
            let devices = try SyncDevices(["laptop", "desk"])
            let folders = try (0..<2).map { try devices[$0].folder("docs") }
            let id = try devices.share(0, folders[0], with: [1])
            #expect(waitUntil(timeout: 30) { devices.listing(1).offers.contains { $0["id"] as? String == id } })
            let wrong = devices[1].run(["sync", "accept", id, "--into", folders[1].path, "--max-conflicts", "-5"])
            #expect(
                wrong.status == 64 && wrong.stderr.contains("-1: no limit")
                    && wrong.stderr.split(separator: "\n").count == 1, "\(wrong.stderr)")
            #expect(devices.listing(1).folders.isEmpty)
            let accepted = devices[1].run([
                "sync", "accept", id, "--into", folders[1].path, "--keep-versions", "7", "--max-conflicts", "-1",
            ])
            #expect(accepted.status == 0, "\(accepted.stderr)")
            let settings = devices.listing(1).folders.first?["settings"] as? [String: Any]
            #expect(
                settings?["keepVersions"] as? Int == 7 && settings?["maxConflicts"] as? Int == -1,
                "\(String(describing: settings))")
        }

        /// A folder's type changed on one device: made receive-only on the desk, a file made there stays there
        /// (listed as changed here) until the desk makes it send-receive again, when it goes to the laptop; made
        /// send-only on the laptop, the desk's edit is listed there as changed elsewhere and not applied, until the
        /// laptop makes it send-receive again.
        @Test func aFoldersTypeChangedOnOneDeviceTakesEffectEachWay() throws {
            let (devices, folders, id) = try twoSharingOneFile()
            func problems(_ index: Int) -> [String] {
                ((devices.listing(index).folders.first?["problems"] as? [[String: Any]]) ?? []).map {
                    "\($0["path"] as? String ?? ""): \($0["reason"] as? String ?? "")"
                }
            }
            let receiving = devices[1].run(["sync", "set", id, "--type", "receive-only"])
            #expect(receiving.status == 0 && receiving.stderr.contains("receive-only"), "\(receiving.stderr)")
            try Data("made on the desk\n".utf8).write(to: folders[1].appendingPathComponent("desk.txt"))
            #expect(
                waitUntil(timeout: 30) { problems(1).contains { $0.hasPrefix("desk.txt: changed here") } },
                "\(problems(1))\n\(devices.logs)")
            #expect(treeOf(folders[0])["desk.txt"] == nil)
            #expect(devices[1].run(["sync", "set", id, "--type", "send-receive"]).status == 0)
            #expect(
                waitUntil(timeout: 30) { treeOf(folders[0])["desk.txt"] == "made on the desk\n" }, "\(devices.logs)")
            #expect(devices.settled(), "\(devices.logs)")
            #expect(devices[0].run(["sync", "set", id, "--type", "send-only"]).status == 0)
            try Data("edited on the desk\n".utf8).write(to: folders[1].appendingPathComponent("one.txt"))
            #expect(
                waitUntil(timeout: 30) { problems(0).contains { $0.hasPrefix("one.txt: changed elsewhere") } },
                "\(problems(0))\n\(devices.logs)")
            #expect(treeOf(folders[0])["one.txt"] == "one\n")
            #expect(devices[0].run(["sync", "set", id, "--type", "send-receive"]).status == 0)
            #expect(
                waitUntil(timeout: 30) { treeOf(folders[0])["one.txt"] == "edited on the desk\n" }, "\(devices.logs)")
            #expect(devices.settled(), "\(devices.logs)")
            let wrong = devices[0].run(["sync", "set", id, "--type", "both-ways"])
            #expect(
                wrong.status == 64 && wrong.stderr.contains("send-receive, send-only or receive-only, not 'both-ways'"),
                "\(wrong.stderr)")
        }

        /// What each pull carried is said where sends are (`share jobs`, after them) and in `share sync --json`:
        /// a small edit of a large file crosses as a few KB, the rest made from the copy already here, both ways
        /// (one device opened the link: it pulls, and the other asks over the link and has the file pushed).
        @Test func shareJobsSaysWhatEachPullCarriedAndWhatCameFromTheLocalCopy() throws {
            let (devices, folders, id) = try twoSharingOneFile()
            try makeFile(folders[0].appendingPathComponent("big.bin"), size: 2_000_000)
            let whole = try Data(contentsOf: folders[0].appendingPathComponent("big.bin"))
            #expect(
                waitUntil(timeout: 30) {
                    (try? Data(contentsOf: folders[1].appendingPathComponent("big.bin"))) == whole
                },
                "\(devices.logs)")
            for (from, to, offset) in [(0, 1, 1_000_000), (1, 0, 500_000)] {
                let big = folders[from].appendingPathComponent("big.bin")
                let handle = try FileHandle(forWritingTo: big)
                try handle.seek(toOffset: UInt64(offset))
                try handle.write(contentsOf: Data("EDIT".utf8))
                try handle.close()
                let edited = try Data(contentsOf: big)
                func pulls() -> [[String: Any]] {
                    (devices.listing(to).folders.first?["recentPulls"] as? [[String: Any]]) ?? []
                }
                let before = pulls().count
                // The file in place, and the pull that brought it listed (it is listed once its session ends).
                #expect(
                    waitUntil(timeout: 30) {
                        (try? Data(contentsOf: folders[to].appendingPathComponent("big.bin"))) == edited
                            && pulls().count > before
                    }, "\(devices.logs)")
                let pulls = pulls()
                let last = pulls.last
                #expect(
                    last?["from"] as? String == devices[from].name && last?["files"] as? Int == 1
                        && (last?["crossed"] as? Int ?? .max) < 100_000
                        && (last?["fromLocal"] as? Int ?? 0) > 1_900_000, "to \(devices[to].name): \(pulls)")
            }
            let pulls = (devices.listing(1).folders.first?["recentPulls"] as? [[String: Any]]) ?? []
            let jobs = devices[1].run(["jobs"])
            let lines = jobs.stdout.split(separator: "\n")
            #expect(
                jobs.status == 0 && lines.count == pulls.count
                    && lines.first?.hasPrefix("docs (\(id))  pulled from laptop  ") == true
                    && lines.first?.contains("1 file(s), ") == true
                    && lines.first?.contains("MiB made from copies here") == true, "\(jobs.stdout)")
        }

        /// A device no longer trusted loses its link at once: nothing more of the folder's index goes to it, and it
        /// says the link is gone.
        @Test func aDeviceNoLongerTrustedHearsNothingMore() throws {
            let (devices, folders, _) = try twoSharingOneFile()
            #expect(devices[0].run(["trust", "remove", "desk"]).status == 0)
            let laptop = {
                (devices.listing(1).folders.first?["peers"] as? [[String: Any]])?.first {
                    $0["name"] as? String == "laptop"
                }
            }
            #expect(
                waitUntil(timeout: 10) { laptop()?["connected"] as? Bool == false }, "\(String(describing: laptop()))")
            try Data("changed\n".utf8).write(to: folders[0].appendingPathComponent("one.txt"))
            try Data("new\n".utf8).write(to: folders[0].appendingPathComponent("two.txt"))
            #expect(
                waitUntil(timeout: 5) { laptop()?["differing"] != nil || treeOf(folders[1])["two.txt"] != nil }
                    == false,
                "\(String(describing: laptop()))")
            #expect(treeOf(folders[1]) == ["one.txt": "one\n"], "\(treeOf(folders[1]))")
            #expect(
                devices[1].run(["sync"]).stdout.contains(
                    "laptop: away (127.0.0.1:\(devices.ports[0]) refused this device"),
                "\(devices[1].run(["sync"]).stdout)")
        }

        @Test func aFolderOnlyOfTheOwnersDevices() throws {
            let devices = try SyncDevices(["laptop", "desk"])
            let friend = try TestDevice("friend")
            devices[0].trust(friend)
            let folder = try devices[0].folder("shared")
            let refused = devices[0].run(["sync", "add", folder.path, "--with", "friend"])
            #expect(refused.status != 0 && refused.stderr.contains("owner's devices"), "\(refused.stderr)")
            // Said of the device named, with what would change it.
            #expect(
                refused.stderr.contains("friend is trusted here without --team")
                    && refused.stderr.contains("share trust add \(friend.id) --name friend --team"),
                "\(refused.stderr)")
            // A name that names nothing is a wrong argument, as the agent that found it says: exit status 64, one
            // line saying where the names are listed.
            var cases: [([String], String)] = [
                (["sync", "add", folder.path, "--with", "nobody"], "share trust list"),
                (["sync", "remove", "no-such-folder"], "share sync lists them"),
                (["sync", "rescan", "no-such-folder"], "share sync lists them"),
                (["sync", "accept", "no-such-folder", "--into", folder.path], "share sync lists the offers"),
                (["sync", "versions", "no-such-folder", "a.txt"], "share sync lists them"),
            ]
            // A place a folder cannot take: one shared already, one inside a shared folder or holding one, one that
            // holds the device's own settings and keys.
            let shared = try devices[0].folder("thesis")
            try FileManager.default.createDirectory(
                at: shared.appendingPathComponent("chapters"), withIntermediateDirectories: true)
            #expect(devices[0].run(["sync", "add", shared.path, "--with", "desk"]).status == 0)
            cases += [
                (["sync", "add", shared.path, "--with", "desk"], "is already shared as thesis"),
                (
                    ["sync", "add", shared.appendingPathComponent("chapters").path, "--with", "desk"],
                    "is inside the shared folder thesis"
                ),
                (["sync", "add", devices[0].directory.path, "--with", "desk"], "holds the shared folder thesis"),
                (["sync", "add", devices[0].config.path, "--with", "desk"], "holds share's own settings and keys"),
                (["sync", "add", folder.path, "--with", "desk", "--label", "bad\u{1}label"], "--label"),
            ]
            for (arguments, hint) in cases {
                let result = devices[0].run(arguments)
                #expect(
                    result.status == 64 && result.stderr.contains(hint)
                        && result.stderr.split(separator: "\n").count == 1,
                    "share \(arguments.joined(separator: " ")): \(result.status) \(result.stderr)")
            }
            // A folder whose name holds a control character is labelled with it made "?", and is offered (a label
            // that broke a hello's rules would have ended every link to the desk).
            let odd = try devices[0].folder("two\nlines")
            let added = devices[0].run(["sync", "add", odd.path, "--with", "desk"])
            #expect(added.status == 0 && added.stderr.contains("as two?lines"), "\(added.stderr)")
            #expect(
                waitUntil(timeout: 30) { devices.listing(1).offers.contains { $0["label"] as? String == "two?lines" } },
                "\(devices.listing(1).offers)\n\(devices.logs)")
        }
    }
}
