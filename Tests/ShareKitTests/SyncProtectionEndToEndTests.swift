import Foundation
import Glibc
import ShareTestSupport
import Testing

extension EndToEndAgents {
    /// What a synced folder carries (links as links, empty folders, modes, type changes) and what protects it
    /// (ignore patterns, the marker, a mass deletion held), with real agents.
    @Suite(.serialized) struct SyncProtectionEndToEndTests {
        /// Two devices sharing a folder of the first one's (holding `files` small files), settled; the folders.
        func twoSharing(files: Int = 1) throws -> (SyncDevices, [URL], String) {
            let devices = try SyncDevices(["laptop", "desk"])
            let folders = try (0..<2).map { try devices[$0].folder("docs") }
            for n in 0..<files {
                try Data("file \(n)\n".utf8).write(to: folders[0].appendingPathComponent("f\(n).txt"))
            }
            let id = try devices.share(0, folders[0], with: [1])
            try devices.accept(1, id, into: folders[1])
            #expect(devices.settled(), "the first sync did not settle\n\(devices.logs)")
            return (devices, folders, id)
        }

        /// Device `index`'s config and state moved onto a tmpfs of 3 MiB mounted in its folder (its agent stopped
        /// and started again there): the tmpfs's path, for the test to unmount (`umount -l`) when it ends.
        func stateOnSmallDisk(_ devices: SyncDevices, _ index: Int) throws -> URL {
            devices.stop(index)
            let disk = devices[index].directory.appendingPathComponent("disk")
            try FileManager.default.createDirectory(at: disk, withIntermediateDirectories: true)
            let mounted = runTool("/bin/mount", ["-t", "tmpfs", "-o", "size=3m", "tmpfs", disk.path])
            try #require(mounted.status == 0, "\(mounted.output)")
            do {
                try FileManager.default.moveItem(at: devices[index].config, to: disk.appendingPathComponent("config"))
                try FileManager.default.createSymbolicLink(
                    at: devices[index].config, withDestinationURL: disk.appendingPathComponent("config"))
                try devices.start(index)
            } catch {
                _ = runTool("/bin/umount", ["-l", disk.path])
                throw error
            }
            return disk
        }

        func state(_ devices: SyncDevices, _ index: Int) -> String {
            devices.listing(index).folders.first?["state"] as? String ?? "?"
        }

        func mode(_ url: URL) -> Int {
            ((try? FileManager.default.attributesOfItem(atPath: url.path))?[.posixPermissions] as? Int) ?? -1
        }

        @Test func linksEmptyFoldersModesAndTypeChangesCrossAsTheyAre() throws {
            let (devices, folders, _) = try twoSharing()
            let manager = FileManager.default
            let laptop = folders[0]
            try manager.createDirectory(
                at: laptop.appendingPathComponent("empty/inner"), withIntermediateDirectories: true)
            try manager.createSymbolicLink(
                atPath: laptop.appendingPathComponent("here").path, withDestinationPath: "f0.txt")
            // A link that leaves the folder crosses as its text and is never followed on either side.
            try manager.createSymbolicLink(
                atPath: laptop.appendingPathComponent("away").path, withDestinationPath: "../../../../etc")
            try Data("#!/bin/sh\necho hi\n".utf8).write(to: laptop.appendingPathComponent("run.sh"))
            chmod(laptop.appendingPathComponent("run.sh").path, 0o755)
            try Data("a file that becomes a folder\n".utf8).write(to: laptop.appendingPathComponent("shape"))
            #expect(
                waitUntil(timeout: 30) { treeOf(folders[1]) == treeOf(laptop) },
                "\(treeOf(laptop))\n\(treeOf(folders[1]))\n\(devices.logs)")
            let desk = folders[1]
            #expect(treeOf(desk)["here"] == "link f0.txt" && treeOf(desk)["away"] == "link ../../../../etc")
            #expect(treeOf(desk)["empty/inner"] == "folder" && mode(desk.appendingPathComponent("run.sh")) == 0o755)
            // A permissions-only change crosses as metadata: no conflict copy, the same file (its inode) kept.
            let inode = try manager.attributesOfItem(atPath: desk.appendingPathComponent("f0.txt").path)[
                .systemFileNumber]
            chmod(laptop.appendingPathComponent("f0.txt").path, 0o600)
            #expect(
                waitUntil(timeout: 30) { mode(desk.appendingPathComponent("f0.txt")) == 0o600 }, "\(devices.logs)")
            #expect(
                try manager.attributesOfItem(atPath: desk.appendingPathComponent("f0.txt").path)[.systemFileNumber]
                    as? Int == inode as? Int)
            // So does a time-only change.
            let then = Date(timeIntervalSince1970: 1_600_000_000)
            try manager.setAttributes(
                [.modificationDate: then], ofItemAtPath: laptop.appendingPathComponent("f0.txt").path)
            #expect(
                waitUntil(timeout: 30) {
                    (try? manager.attributesOfItem(atPath: desk.appendingPathComponent("f0.txt").path))?[
                        .modificationDate]
                        as? Date == then
                }, "\(devices.logs)")
            #expect(
                try manager.attributesOfItem(atPath: desk.appendingPathComponent("f0.txt").path)[.systemFileNumber]
                    as? Int == inode as? Int)
            // A file replaced by a folder of the same name, and an empty folder removed.
            try manager.removeItem(at: laptop.appendingPathComponent("shape"))
            try manager.createDirectory(at: laptop.appendingPathComponent("shape"), withIntermediateDirectories: false)
            try Data("inside\n".utf8).write(to: laptop.appendingPathComponent("shape/in.txt"))
            try manager.removeItem(at: laptop.appendingPathComponent("empty"))
            #expect(
                waitUntil(timeout: 30) { treeOf(desk) == treeOf(laptop) },
                "\(treeOf(laptop))\n\(treeOf(desk))\n\(devices.logs)")
            #expect(!treeOf(desk).keys.contains { $0.contains("sync-conflict") })
            // A name written in NFD (as macOS writes it) is one name with its NFC form: renamed to it here, and
            // the desk gets the NFC name. A case-only rename is a rename.
            let nfd = "cafe\u{301}.txt"
            let nfc = "caf\u{e9}.txt"
            try Data("coffee\n".utf8).write(to: laptop.appendingPathComponent(nfd))
            try manager.moveItem(
                at: laptop.appendingPathComponent("run.sh"), to: laptop.appendingPathComponent("Run.sh"))
            func names(_ folder: URL) -> [[UInt8]] {
                ((try? manager.contentsOfDirectory(atPath: folder.path)) ?? []).map { Array($0.utf8) }
            }
            #expect(
                waitUntil(timeout: 30) {
                    names(desk).contains(Array(nfc.utf8)) && names(desk).contains(Array("Run.sh".utf8))
                        && !names(desk).contains(Array("run.sh".utf8))
                },
                "\(names(desk).map { String(decoding: $0, as: UTF8.self).unicodeScalars.map(\.value) })\n\(devices.logs)"
            )
            #expect(names(laptop).contains(Array(nfc.utf8)) && !names(laptop).contains(Array(nfd.utf8)))
            #expect(!names(desk).contains(Array(nfd.utf8)) && mode(desk.appendingPathComponent("Run.sh")) == 0o755)
        }

        /// A name the others cannot be given (not UTF-8, or taken by its NFC form) is listed as the folder's
        /// problem while it is there: the folder is out of sync, not up to date with a file missing elsewhere.
        @Test func aNameThatCannotBeSyncedIsListedUntilItIsGone() throws {
            let (devices, folders, _) = try twoSharing()
            let laptop = folders[0]
            // Bytes that are not UTF-8 (as an old Latin-1 disk holds them), and an NFD name beside its NFC form.
            let bad = Array(laptop.appendingPathComponent("caf").path.utf8) + [0xE9] + Array(".txt".utf8)
            let path = bad.map { CChar(bitPattern: $0) } + [0]
            let fd = open(path, O_CREAT | O_WRONLY | O_EXCL, 0o644)
            #expect(fd >= 0)
            close(fd)
            try Data("one\n".utf8).write(to: laptop.appendingPathComponent("r\u{e9}sum\u{e9}.txt"))
            try Data("two\n".utf8).write(to: laptop.appendingPathComponent("re\u{301}sume\u{301}.txt"))
            try Data("later\n".utf8).write(to: laptop.appendingPathComponent("later.txt"))
            #expect(waitUntil(timeout: 30) { treeOf(folders[1])["later.txt"] == "later\n" }, "\(devices.logs)")
            #expect(
                waitUntil(timeout: 30) {
                    problemsByPath(devices, 0).count == 2 && self.state(devices, 0) == "out of sync"
                },
                "\(problemsByPath(devices, 0))")
            #expect(
                problemsByPath(devices, 0)["caf\u{FFFD}.txt"]?.contains("not UTF-8") == true,
                "\(problemsByPath(devices, 0))")
            #expect(
                problemsByPath(devices, 0)["re\u{301}sume\u{301}.txt"]?.contains("Unicode normalisation") == true,
                "\(problemsByPath(devices, 0))")
            // Gone: listed no more, and the folder is up to date again.
            #expect(unlink(path) == 0)
            try FileManager.default.removeItem(at: laptop.appendingPathComponent("re\u{301}sume\u{301}.txt"))
            #expect(
                waitUntil(timeout: 30) { problemsByPath(devices, 0).isEmpty && self.state(devices, 0) == "up to date" },
                "\(problemsByPath(devices, 0))")
        }

        /// A file the holder cannot read (as a failing disk or a file of another user's): listed as the folder's
        /// problem, with why, while it is there. The file is a write-only kernel attribute bound over a file of the
        /// folder (root: mounts; reading it is refused even to root).
        /// Files dated beyond what a time in nanoseconds holds (after 2262: ext4 keeps times to 2446), made before
        /// the folder is shared and after: scanned, synced (dated at the last time the index holds) and kept, and
        /// neither agent stops (a scan of one stopped the agent at every start). A file dated before 1970, to the
        /// half second, lands dated as it was (its time once could not be set, and it was never placed).
        @Test func filesDatedBefore1970OrAfterWhatTheIndexHoldsSync() throws {
            let devices = try SyncDevices(["laptop", "desk"])
            let folders = try (0..<2).map { try devices[$0].folder("docs") }
            let far = Date(timeIntervalSince1970: 10_413_792_000)  // 2300-01-01
            let moon = Date(timeIntervalSince1970: -14_182_939.5)  // 1969-07-20 20:17:40.5
            func date(_ url: URL) -> Date? {
                try? FileManager.default.attributesOfItem(atPath: url.path)[.modificationDate] as? Date
            }
            func write(_ name: String, _ time: Date) throws {
                let url = folders[0].appendingPathComponent(name)
                try Data("\(name)\n".utf8).write(to: url)
                // touch, not Foundation, which cannot set a time before 1970 with a fraction of a second.
                let touched = runTool("/usr/bin/touch", ["-d", "@\(time.timeIntervalSince1970)", url.path])
                try #require(touched.status == 0, "\(touched.output)")
                try #require(date(url) == time, "this file system does not keep \(time) as a time")
            }
            try write("before.txt", far)
            try write("moon.txt", moon)
            let id = try devices.share(0, folders[0], with: [1])
            try devices.accept(1, id, into: folders[1])
            try write("after.txt", far)
            #expect(
                waitUntil(timeout: 30) {
                    let tree = treeOf(folders[1])
                    return tree["before.txt"] == "before.txt\n" && tree["after.txt"] == "after.txt\n"
                        && tree["moon.txt"] == "moon.txt\n"
                }, "\(treeOf(folders[1]))\n\(devices.logs)")
            #expect(devices.settled(), "\(devices.logs)")
            #expect(devices.agents.allSatisfy { $0?.process.isRunning == true }, "\(devices.logs)")
            let kept = date(folders[1].appendingPathComponent("after.txt"))
            #expect(kept.map { $0.timeIntervalSince1970 > 9_000_000_000 } == true, "\(String(describing: kept))")
            #expect(date(folders[1].appendingPathComponent("moon.txt")) == moon)
        }

        /// A folder of 400 folders side by side scanned by an agent that may open only a few more than it holds
        /// (a service's usual limit is 1,024 and its folders may hold thousands): every file is found. A scan once
        /// held every folder it had yet to read open, missed those it could not open, and a later scan took
        /// their files for deleted on every device.
        @Test func aFolderOfManyFoldersIsScannedWhole() throws {
            let desk = try TestDevice("desk")
            let laptop = try TestDevice("laptop")
            desk.trust(laptop, flags: ["--team"])
            let docs = try desk.folder("docs")
            for n in 0..<400 {
                let inner = docs.appendingPathComponent("d\(n)")
                try FileManager.default.createDirectory(at: inner, withIntermediateDirectories: true)
                try Data("\(n)\n".utf8).write(to: inner.appendingPathComponent("f.txt"))
            }
            let (agent, _) = try desk.startAgent(["--no-discovery"])
            defer { agent.stop() }
            let open = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(agent.pid)/fd").count
            let limited = runTool(
                "/usr/bin/prlimit", ["--pid", "\(agent.pid)", "--nofile=\(open + 150):\(open + 150)"])
            try #require(limited.status == 0, "\(limited.output)")
            let added = desk.run(["sync", "add", docs.path, "--with", "laptop"])
            #expect(added.status == 0, "\(added.stderr)")
            func files() -> Int? {
                let result = desk.run(["sync", "--json"])
                let object = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
                return (object?["folders"] as? [[String: Any]])?.first?["files"] as? Int
            }
            #expect(
                waitUntil(timeout: 30) { files() == 400 }, "\(String(describing: files()))\n\(agent.stderr.text)")
            // A full scan again finds every file where it was.
            let line = try #require(added.stderr.split(separator: "\n").first { $0.contains("sharing") })
            let id = String(try #require(line.split(separator: "(").dropFirst().first?.split(separator: ")").first))
            let rescan = desk.run(["sync", "rescan", id])
            #expect(rescan.status == 0, "\(rescan.stderr)")
            #expect(files() == 400)
        }

        @Test func aFileThatCannotBeReadIsListedUntilItIsGone() throws {
            let unreadable = ["pci", "platform", "cpu", "nd"].map { "/sys/bus/\($0)/drivers_probe" }
                .first { FileManager.default.fileExists(atPath: $0) }
            guard getuid() == 0, let unreadable else {
                print("skipped: binding a kernel attribute over a file needs root and /sys")
                return
            }
            let (devices, folders, _) = try twoSharing()
            let laptop = folders[0]
            let broken = laptop.appendingPathComponent("broken.bin")
            try Data().write(to: broken)
            let bound = runTool("/bin/mount", ["--bind", unreadable, broken.path])
            try #require(bound.status == 0, "\(bound.output)")
            var mounted = true
            defer { if mounted { _ = runTool("/bin/umount", ["-l", broken.path]) } }
            #expect(
                waitUntil(timeout: 30) {
                    self.state(devices, 0) == "out of sync"
                        && problemsByPath(devices, 0)["broken.bin"].map { $0.contains("cannot be read here") } == true
                }, "\(problemsByPath(devices, 0))\n\(devices.logs)")
            #expect(treeOf(folders[1])["broken.bin"] == nil)
            // Gone: listed no more, and the folder is up to date again.
            #expect(runTool("/bin/umount", [broken.path]).status == 0)
            mounted = false
            try FileManager.default.removeItem(at: broken)
            #expect(
                waitUntil(timeout: 30) { problemsByPath(devices, 0).isEmpty && self.state(devices, 0) == "up to date" },
                "\(problemsByPath(devices, 0))")
        }

        /// A device whose disk cannot take a file: the file is listed as not pulled and why, asked for again after
        /// a while (not in a loop), and pulled once there is room. Runs on a small tmpfs the test mounts (root).
        @Test func aFileThatDoesNotFitIsListedAndPulledOnceThereIsRoom() throws {
            guard getuid() == 0 else {
                print("skipped: mounting a tmpfs needs root")
                return
            }
            let devices = try SyncDevices(["laptop", "desk"])
            let laptop = try devices[0].folder("docs")
            try makeFile(laptop.appendingPathComponent("big.bin"), size: 3_000_000)
            try Data("small\n".utf8).write(to: laptop.appendingPathComponent("small.txt"))
            let disk = try devices[1].folder("small-disk")
            let mounted = runTool("/bin/mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", disk.path])
            try #require(mounted.status == 0, "\(mounted.output)")
            defer { _ = runTool("/bin/umount", ["-l", disk.path]) }
            let desk = disk.appendingPathComponent("docs")
            let id = try devices.share(0, laptop, with: [1])
            try devices.accept(1, id, into: desk)
            #expect(
                waitUntil(timeout: 30) {
                    self.state(devices, 1) == "out of sync"
                        && problemsByPath(devices, 1)["big.bin"].map {
                            $0.contains("not pulled") && $0.contains("free")
                        } == true
                }, "\(problemsByPath(devices, 1))\n\(devices.logs)")
            #expect(treeOf(desk)["small.txt"] == "small\n")
            // Asked for again after a while, longer each time: a few pulls in five seconds, not hundreds.
            let pulls = { devices.agents[1]?.stderr.text.components(separatedBy: "share.folders: pulled").count ?? 0 }
            let before = pulls()
            Thread.sleep(forTimeInterval: 5)
            #expect(pulls() - before <= 4, "\(pulls() - before) pulls in 5 s")
            // Room: the file comes, and the folder is up to date.
            #expect(runTool("/bin/mount", ["-o", "remount,size=16m", disk.path]).status == 0)
            #expect(
                waitUntil(timeout: 90) { treeOf(desk)["big.bin"] != nil && self.state(devices, 1) == "up to date" },
                "\(problemsByPath(devices, 1))\n\(devices.logs)")
        }

        /// A device whose whole disk is full (its folders and its agent's state, the list of folders and the index
        /// included, on one small tmpfs): a folder offered is listed all the same, accepting it says the disk is
        /// full, and with a little room the files that fit come while the rest are listed (the index's own writes
        /// failing meanwhile); with room every file comes and both devices are in step, and a restart then finds
        /// nothing deleted. Runs on a tmpfs the test mounts (root).
        @Test func aFullDiskThatHoldsTheIndexLosesNothingAndEveryFileComesOnceThereIsRoom() throws {
            guard getuid() == 0 else {
                print("skipped: mounting a tmpfs needs root")
                return
            }
            let devices = try SyncDevices(["laptop", "desk"])
            let laptop = try devices[0].folder("docs")
            for i in 0..<1_500 {
                let folder = laptop.appendingPathComponent(String(format: "part%02d", i / 100))
                if i % 100 == 0 {
                    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                }
                try Data(String(repeating: "line \(i) of a note\n", count: 60).utf8)
                    .write(to: folder.appendingPathComponent("note\(i).txt"))
            }
            let manager = FileManager.default
            let disk = try stateOnSmallDisk(devices, 1)
            defer { _ = runTool("/bin/umount", ["-l", disk.path]) }
            let filler = disk.appendingPathComponent("filler")
            _ = runTool("/bin/dd", ["if=/dev/zero", "of=\(filler.path)", "bs=4k"])
            let id = try devices.share(0, laptop, with: [1])
            // The offer is listed though it cannot be saved; accepting it says why it cannot be.
            #expect(
                waitUntil(timeout: 30) { devices.listing(1).offers.contains { $0["id"] as? String == id } },
                "\(devices.logs)")
            let desk = disk.appendingPathComponent("docs")
            let refused = devices[1].run(["sync", "accept", id, "--into", desk.path])
            #expect(
                refused.status == 74 && refused.stderr.contains("the disk is full; free some space"),
                "\(refused.status) \(refused.stderr)")
            #expect(refused.stderr.split(separator: "\n").count == 1, "\(refused.stderr)")
            // A little room: what fits comes, the rest is listed as not pulled.
            try manager.removeItem(at: filler)
            try devices.accept(1, id, into: desk)
            #expect(
                waitUntil(timeout: 60) {
                    self.state(devices, 1) == "out of sync"
                        && problemsByPath(devices, 1).values.contains { $0.contains("full") }
                }, "\(problems(devices, 1).prefix(5))\n\(devices.logs)")
            #expect(devices.agents[1]?.process.isRunning == true)
            // Room: every file comes, and both devices are in step.
            #expect(runTool("/bin/mount", ["-o", "remount,size=64m", disk.path]).status == 0)
            #expect(
                waitUntil(timeout: 90) { treeOf(desk) == treeOf(laptop) } && devices.settled(),
                "\(problems(devices, 1).prefix(5))\n\(devices.logs)")
            // A restart finds what it holds as it was: nothing taken for deleted, here or on the laptop.
            devices.stop(1)
            try devices.start(1)
            #expect(devices.settled(), "\(devices.logs)")
            #expect(treeOf(laptop).count == 1_515, "\(treeOf(laptop).count)")
            #expect(treeOf(desk) == treeOf(laptop))
        }

        /// A conflict on a file whose name is near the longest a file system allows (240 bytes): the copy's name
        /// is shortened to fit (it could not be made, and the devices never agreed), both devices end in step with
        /// one winner and the other version kept, and the conflict is listed under the file's whole name.
        @Test func aConflictOnALongNameKeepsBothVersionsUnderANameThatFits() throws {
            let (devices, folders, _) = try twoSharing()
            let name = String(repeating: "n", count: 236) + ".txt"
            try Data("first\n".utf8).write(to: folders[0].appendingPathComponent(name))
            #expect(waitUntil(timeout: 30) { treeOf(folders[1])[name] == "first\n" }, "\(devices.logs)")
            #expect(devices.settled())
            devices.stop(1)
            try Data("the laptop's version\n".utf8).write(to: folders[0].appendingPathComponent(name))
            try Data("the desk's version\n".utf8).write(to: folders[1].appendingPathComponent(name))
            try devices.start(1)
            #expect(
                waitUntil(timeout: 30) {
                    treeOf(folders[0]) == treeOf(folders[1]) && treeOf(folders[0]).count == 3
                } && devices.settled(),
                "\(treeOf(folders[0]).keys.sorted())\n\(problems(devices, 0))\n\(devices.logs)")
            let tree = treeOf(folders[0])
            let copy = tree.keys.first { $0.contains(".sync-conflict-") }
            #expect(copy.map { $0.utf8.count <= 255 && $0.hasSuffix(".txt") } == true, "\(tree.keys)")
            #expect(
                Set([tree[name], copy.flatMap { tree[$0] }])
                    == Set(["the laptop's version\n", "the desk's version\n"]),
                "\(tree)")
            for index in 0..<2 {
                let listed = devices.listing(index).folders.first?["conflicts"] as? [[String: Any]] ?? []
                #expect(listed.map { $0["path"] as? String } == [name], "\(listed)")
            }
        }

        /// Files whose names are as long as a file system allows in bytes (254, of two-byte characters) are made,
        /// replaced by an edit and renamed like any other, small ones and large ones.
        @Test func namesAsLongAsAFileSystemAllowsAreMadeEditedAndRenamed() throws {
            let (devices, folders, _) = try twoSharing()
            let small = String(repeating: "é", count: 125) + ".txt"
            let large = String(repeating: "ü", count: 125) + ".bin"
            try Data("first\n".utf8).write(to: folders[0].appendingPathComponent(small))
            try makeFile(folders[0].appendingPathComponent(large), size: 3_000_000)
            #expect(
                waitUntil(timeout: 30) { treeOf(folders[1]) == treeOf(folders[0]) } && devices.settled(),
                "\(problems(devices, 1))\n\(devices.logs)")
            try Data("edited\n".utf8).write(to: folders[0].appendingPathComponent(small))
            try makeFile(folders[0].appendingPathComponent(large), size: 3_100_000)
            let renamed = String(repeating: "ö", count: 125) + ".txt"
            try FileManager.default.moveItem(
                at: folders[0].appendingPathComponent("f0.txt"), to: folders[0].appendingPathComponent(renamed))
            #expect(
                waitUntil(timeout: 30) { treeOf(folders[1]) == treeOf(folders[0]) } && devices.settled(),
                "\(treeOf(folders[1]).keys.sorted())\n\(problems(devices, 1))\n\(devices.logs)")
            #expect(treeOf(folders[1])[small] == "edited\n")
            #expect(problems(devices, 1).isEmpty && problems(devices, 0).isEmpty)
        }

        /// A device whose agent keeps its state on a disk that fills (its folder elsewhere, with room): what
        /// changes in the folder cannot be recorded in its index, and the folder says so (out of sync, and why)
        /// rather than "up to date"; once there is room the folder is looked at again and every change reaches the
        /// other device, without waiting for the next full rescan. Runs on a tmpfs the test mounts (root).
        @Test func anIndexThatCannotBeWrittenIsSaidAndWhatChangedGoesOutOnceItCanBe() throws {
            guard getuid() == 0 else {
                print("skipped: mounting a tmpfs needs root")
                return
            }
            let devices = try SyncDevices(["laptop", "desk"])
            let manager = FileManager.default
            let disk = try stateOnSmallDisk(devices, 0)
            defer { _ = runTool("/bin/umount", ["-l", disk.path]) }
            let laptop = try devices[0].folder("docs")
            let desk = try devices[1].folder("docs")
            try Data("first\n".utf8).write(to: laptop.appendingPathComponent("a.txt"))
            let id = try devices.share(0, laptop, with: [1])
            try devices.accept(1, id, into: desk)
            #expect(devices.settled(), "\(devices.logs)")
            let filler = disk.appendingPathComponent("filler")
            _ = runTool("/bin/dd", ["if=/dev/zero", "of=\(filler.path)", "bs=4k"])
            for i in 0..<300 {
                try Data("new \(i)\n".utf8).write(to: laptop.appendingPathComponent("n\(i).txt"))
            }
            #expect(
                waitUntil(timeout: 30) {
                    self.state(devices, 0) == "out of sync"
                        && problemsByPath(devices, 0)[""].map { $0.contains("cannot record") && $0.contains("full") }
                            == true
                }, "\(self.state(devices, 0)) \(problems(devices, 0))\n\(devices.logs)")
            let said = devices[0].run(["sync"]).stdout
            #expect(said.contains("out of sync: this device cannot record"), "\(said)")
            // Room: every change goes out, well before the next full rescan (five minutes).
            try manager.removeItem(at: filler)
            #expect(
                waitUntil(timeout: 60) { treeOf(desk).count == 301 } && devices.settled(),
                "\(treeOf(desk).count) \(problems(devices, 0))\n\(devices.logs)")
            #expect(treeOf(desk) == treeOf(laptop))
            #expect(problems(devices, 0).isEmpty, "\(problems(devices, 0))")
        }

        /// A folder that cannot hold its marker (a read-only disk) is refused when it is shared or a folder offered
        /// is accepted into it, with why and what to do (exit 73), where it was said to be shared and then stopped at once for want of the marker, as if
        /// its disk were not mounted. Runs on a read-only tmpfs the test mounts (root).
        @Test func aFolderThatCannotHoldItsMarkerIsRefusedWithWhy() throws {
            guard getuid() == 0 else {
                print("skipped: mounting a tmpfs needs root")
                return
            }
            let devices = try SyncDevices(["laptop", "desk"])
            let archive = devices[0].directory.appendingPathComponent("archive")
            try FileManager.default.createDirectory(at: archive, withIntermediateDirectories: true)
            let mounted = runTool("/bin/mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", archive.path])
            try #require(mounted.status == 0, "\(mounted.output)")
            defer { _ = runTool("/bin/umount", ["-l", archive.path]) }
            try Data("archived\n".utf8).write(to: archive.appendingPathComponent("a.txt"))
            #expect(runTool("/bin/mount", ["-o", "remount,ro", archive.path]).status == 0)
            let added = devices[0].run(["sync", "add", archive.path, "--with", "desk", "--send-only"])
            #expect(added.status == 73, "\(added.status) \(added.stderr)")
            #expect(
                added.stderr.contains("cannot be made") && added.stderr.contains("read-only")
                    && added.stderr.split(separator: "\n").count == 1, "\(added.stderr)")
            #expect(devices.listing(0).folders.isEmpty)
            // Nor can a folder offered be taken into it.
            let docs = try devices[1].folder("docs")
            let id = try devices.share(1, docs, with: [0])
            #expect(
                waitUntil(timeout: 30) { devices.listing(0).offers.contains { $0["id"] as? String == id } },
                "\(devices.logs)")
            let accepted = devices[0].run(["sync", "accept", id, "--into", archive.path])
            #expect(
                accepted.status == 73 && accepted.stderr.contains("cannot sync into")
                    && accepted.stderr.contains("read-only"), "\(accepted.status) \(accepted.stderr)")
            #expect(devices.listing(0).folders.isEmpty)
        }

        @Test func ignoredFilesStayWhereTheyAreAndNewPatternsDeleteNothingElsewhere() throws {
            let (devices, folders, _) = try twoSharing()
            let laptop = folders[0]
            let desk = folders[1]
            try Data("*.tmp\n/build/\n(?i)THUMBS.DB\n".utf8).write(to: laptop.appendingPathComponent(".shareignore"))
            try Data("scratch\n".utf8).write(to: laptop.appendingPathComponent("x.tmp"))
            try FileManager.default.createDirectory(
                at: laptop.appendingPathComponent("build"), withIntermediateDirectories: true)
            try Data("object\n".utf8).write(to: laptop.appendingPathComponent("build/out.o"))
            try Data("thumbs\n".utf8).write(to: laptop.appendingPathComponent("Thumbs.db"))
            try Data("kept\n".utf8).write(to: laptop.appendingPathComponent("kept.txt"))
            #expect(waitUntil(timeout: 30) { treeOf(desk)["kept.txt"] == "kept\n" }, "\(devices.logs)")
            #expect(devices.settled())
            let tree = treeOf(desk)
            #expect(
                tree["x.tmp"] == nil && tree["build"] == nil && tree["Thumbs.db"] == nil && tree[".shareignore"] == nil,
                "\(tree)")
            // Patterns that now cover a synced file, then its removal here: the desk keeps its copy.
            try Data("*.tmp\nkept.txt\n".utf8).write(to: laptop.appendingPathComponent(".shareignore"))
            try FileManager.default.removeItem(at: laptop.appendingPathComponent("kept.txt"))
            try Data("after\n".utf8).write(to: laptop.appendingPathComponent("after.txt"))
            #expect(waitUntil(timeout: 30) { treeOf(desk)["after.txt"] == "after\n" }, "\(devices.logs)")
            #expect(devices.settled())
            #expect(treeOf(desk)["kept.txt"] == "kept\n", "\(treeOf(desk))")
        }

        /// Patterns shared through a synced file (`#include .shareglobalignore`, Syncthing's way): the laptop writes
        /// the file, it reaches the desk like any file, and the desk's own `.shareignore` including it then keeps
        /// the desk's `*.bak` files at home; a change to the included file is read again.
        @Test func patternsIncludedFromASyncedFileHoldOnEveryDeviceThatIncludesThem() throws {
            let (devices, folders, _) = try twoSharing()
            let (laptop, desk) = (folders[0], folders[1])
            for folder in folders {
                try Data("#include .shareglobalignore\n".utf8).write(to: folder.appendingPathComponent(".shareignore"))
            }
            try Data("*.bak\n".utf8).write(to: laptop.appendingPathComponent(".shareglobalignore"))
            #expect(
                waitUntil(timeout: 30) { treeOf(desk)[".shareglobalignore"] == "*.bak\n" }, "\(devices.logs)")
            #expect(devices.settled())
            try Data("desk only\n".utf8).write(to: desk.appendingPathComponent("notes.bak"))
            try Data("shared\n".utf8).write(to: desk.appendingPathComponent("notes.txt"))
            #expect(waitUntil(timeout: 30) { treeOf(laptop)["notes.txt"] == "shared\n" }, "\(devices.logs)")
            #expect(devices.settled())
            #expect(treeOf(laptop)["notes.bak"] == nil, "\(treeOf(laptop))")
            // The included file changed on the laptop: the desk reads it again once it arrives (and `*.bak` is no
            // longer ignored: the desk's file goes out).
            try Data("*.tmp\n".utf8).write(to: laptop.appendingPathComponent(".shareglobalignore"))
            #expect(
                waitUntil(timeout: 30) { treeOf(laptop)["notes.bak"] == "desk only\n" },
                "\(treeOf(laptop))\n\(devices.logs)")
        }

        @Test func aFolderWhoseMarkerIsGoneStopsAndDeletesNothing() throws {
            let (devices, folders, _) = try twoSharing(files: 5)
            let laptop = folders[0]
            let away = laptop.deletingLastPathComponent().appendingPathComponent("docs-unmounted")
            // The disk goes away: an empty folder is left at its path, without the marker.
            try FileManager.default.moveItem(at: laptop, to: away)
            try FileManager.default.createDirectory(at: laptop, withIntermediateDirectories: false)
            #expect(
                waitUntil(timeout: 30) { state(devices, 0).hasPrefix("stopped") },
                "\(state(devices, 0))\n\(devices.logs)")
            #expect(state(devices, 0).contains(".sharefolder"))
            // A change on the desk is not applied into the stopped folder, and nothing was deleted on the desk.
            try Data("from the desk\n".utf8).write(to: folders[1].appendingPathComponent("new.txt"))
            #expect(
                waitUntil(timeout: 30) { devices.listing(1).folders.first?["files"] as? Int == 6 },
                "\(devices.listing(1).folders)")
            #expect(treeOf(folders[1]).keys.filter { $0.hasPrefix("f") }.count == 5, "\(treeOf(folders[1]))")
            #expect(treeOf(laptop).isEmpty, "\(treeOf(laptop))")
            // The disk comes back: the folder runs again and catches up.
            try FileManager.default.removeItem(at: laptop)
            try FileManager.default.moveItem(at: away, to: laptop)
            #expect(
                waitUntil(timeout: 30) { treeOf(laptop)["new.txt"] == "from the desk\n" },
                "\(state(devices, 0))\n\(devices.logs)")
            #expect(treeOf(laptop).count == 6 && treeOf(folders[1]).count == 6)
        }

        /// A folder's index damaged while its agent was off (a bad sector, a copy cut short): the agent sets it aside,
        /// says so, makes it again from the files and the other device (no conflict copy, nothing sent again whole
        /// that both hold), and the folder is up to date; a folder whose place cannot be opened says why.
        @Test func aDamagedIndexIsSetAsideAndMadeAgain() throws {
            let (devices, folders, id) = try twoSharing(files: 30)
            devices.stop(1)
            let index = devices[1].config.appendingPathComponent("state/folders/\(id).db")
            // An index names every file of its folder: only its owner reads it.
            let private600 = {
                [index.path, index.path + "-wal"].allSatisfy { path in
                    !FileManager.default.fileExists(atPath: path) || self.mode(URL(fileURLWithPath: path)) == 0o600
                }
            }
            #expect(private600())
            // The first page after its header (where the tables are found) and what follows, in the file and in its
            // log, turned to noise.
            for file in [index.path, index.path + "-wal"] {
                guard let handle = FileHandle(forWritingAtPath: file) else { continue }
                let size = try handle.seekToEnd()
                try handle.seek(toOffset: 100)
                handle.write(Data((0..<max(0, Int(size) - 100)).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) }))
                try handle.close()
            }
            try Data("made while the index was damaged\n".utf8).write(to: folders[1].appendingPathComponent("new.txt"))
            let agent = try devices.start(1)
            #expect(
                waitUntil(timeout: 60) {
                    treeOf(folders[0])["new.txt"] != nil && self.state(devices, 1) == "up to date"
                        && self.state(devices, 0) == "up to date"
                }, "\(self.state(devices, 1))\n\(devices.logs)")
            #expect(treeOf(folders[0]) == treeOf(folders[1]), "\(treeOf(folders[0]))\n\(treeOf(folders[1]))")
            #expect(!treeOf(folders[1]).keys.contains { $0.contains(".sync-conflict-") })
            #expect(
                agent.stderr.text.contains("index") && agent.stderr.text.contains("damaged"), "\(agent.stderr.text)")
            #expect(FileManager.default.fileExists(atPath: index.path + ".damaged"))
            #expect(private600())
            // A place that cannot be opened at all: the folder is stopped and says why.
            devices.stop(1)
            try FileManager.default.removeItem(at: folders[1])
            try Data("a file where the folder was\n".utf8).write(to: folders[1])
            try devices.start(1)
            #expect(
                waitUntil(timeout: 30) {
                    self.state(devices, 1).hasPrefix("stopped")
                        && self.state(devices, 1).contains("a file stands where a folder is expected")
                },
                "\(self.state(devices, 1))")
        }

        /// A file rewritten in place to other content of its size, its modification time put back to the very
        /// nanosecond (what a clock set back can do): no scan can tell it changed. When the desk asks for the
        /// version the laptop's index names, the laptop finds other bytes, leaves the file out and reads it again;
        /// the desk then gets what the laptop holds (the desk's pulls once failed on it for ever).
        @Test func aFileChangedUnderTheStampItHadIsReadAgainWhenAnotherDeviceAsksForIt() throws {
            let devices = try SyncDevices(["laptop", "desk"])
            let folders = try (0..<2).map { try devices[$0].folder("docs") }
            let file = folders[0].appendingPathComponent("f.txt")
            try Data("first version\n".utf8).write(to: file)
            var then = [timespec(tv_sec: time(nil) - 3600, tv_nsec: 123_456_789), timespec()]
            then[1] = then[0]
            #expect(utimensat(AT_FDCWD, file.path, then, 0) == 0)
            let id = try devices.share(0, folders[0], with: [1])
            #expect(
                waitUntil(timeout: 30) { devices.listing(0).folders.first?["files"] as? Int == 1 },
                "\(devices.listing(0).folders)")
            var before = stat()
            #expect(stat(file.path, &before) == 0)
            let fd = open(file.path, O_WRONLY)
            #expect(fd >= 0)
            let later = Array("later version\n".utf8)
            #expect(pwrite(fd, later, later.count, 0) == later.count)
            // The time put back before the file is closed: no look the watch asks for can see it in between.
            #expect(futimens(fd, then) == 0)
            close(fd)
            var after = stat()
            #expect(stat(file.path, &after) == 0)
            #expect(after.st_ino == before.st_ino && after.st_size == before.st_size)
            #expect(after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec)
            try devices.accept(1, id, into: folders[1])
            let copy = folders[1].appendingPathComponent("f.txt")
            #expect(
                waitUntil(timeout: 60) { (try? String(contentsOf: copy, encoding: .utf8)) == "later version\n" },
                "\(treeOf(folders[1]))\n\(devices.logs)")
            #expect(devices.agents[0]?.stderr.text.contains("are read again") == true, "\(devices.logs)")
            #expect(devices.settled(), "\(devices.logs)")
            #expect(treeOf(folders[0]) == treeOf(folders[1]))
        }

        @Test func aMassDeletionIsHeldUntilThePersonLetsItGo() throws {
            let (devices, folders, id) = try twoSharing(files: 20)
            for n in 0..<15 { #expect(unlink(folders[0].appendingPathComponent("f\(n).txt").path) == 0) }
            // One burst, normally one scan: all 15 held. A machine that stalls the loop for longer than the watch's
            // quarter of a second splits it: when the first scan finds under ten, those go before the rest are held;
            // when it finds ten or more, they are held and what later scans find joins them.
            func holding() -> Int? {
                let now = state(devices, 0)
                guard now.hasPrefix("holding ") else { return nil }
                return Int(now.split(separator: " ")[1])
            }
            var held = 0
            #expect(
                waitUntil(timeout: 30) {
                    guard let count = holding() else { return false }
                    held = count
                    return true
                }, "\(state(devices, 0))\n\(devices.logs)")
            #expect(held >= 10 && held <= 15, "\(state(devices, 0))")
            // Held: the desk keeps everything held while the laptop asks. The new file comes after the deletions,
            // so when the desk has it every deletion has been scanned and the count held is final.
            try Data("still syncing\n".utf8).write(to: folders[0].appendingPathComponent("other.txt"))
            #expect(
                waitUntil(timeout: 30) {
                    guard treeOf(folders[1])["other.txt"] == "still syncing\n", let count = holding() else {
                        return false
                    }
                    held = count
                    return treeOf(folders[1]).count == 21 - (15 - held)
                }, "\(state(devices, 0)): \(treeOf(folders[1]).keys.sorted())\n\(devices.logs)")
            #expect(held >= 10 && held <= 15, "\(state(devices, 0))")
            let allowed = devices[0].run(["sync", "allow-deletes", id])
            #expect(allowed.status == 0, "\(allowed.stderr)")
            #expect(
                waitUntil(timeout: 30) { treeOf(folders[1]).count == 6 }, "\(treeOf(folders[1]))\n\(devices.logs)")
            #expect(devices.settled())
            let unknown = devices[0].run(["sync", "allow-deletes", "nope-nope-nope"])
            #expect(unknown.status != 0 && unknown.stderr.split(separator: "\n").count == 1, "\(unknown.stderr)")
        }

        /// What a device lists as out of sync in its first folder: path → why.
        func problemsByPath(_ devices: SyncDevices, _ index: Int) -> [String: String] {
            var found: [String: String] = [:]
            for problem in (devices.listing(index).folders.first?["problems"] as? [[String: Any]]) ?? [] {
                found[problem["path"] as? String ?? "?"] = problem["reason"] as? String
            }
            return found
        }

        func problems(_ devices: SyncDevices, _ index: Int) -> [String] {
            ((devices.listing(index).folders.first?["problems"] as? [[String: Any]]) ?? []).map {
                "\($0["path"] as? String ?? "?"): \($0["reason"] as? String ?? "?")"
            }
        }

        /// Two devices; the desk accepts the laptop's folder as `kind` (send-only or receive-only).
        func sharing(deskAs kind: String) throws -> (SyncDevices, [URL], String) {
            let devices = try SyncDevices(["laptop", "desk"])
            let folders = try (0..<2).map { try devices[$0].folder("docs") }
            // A send-only folder takes nothing from the others (Syncthing's rule): the desk starts with the same files.
            for n in 0..<3 {
                for folder in kind == "send-only" ? folders : [folders[0]] {
                    let file = folder.appendingPathComponent("f\(n).txt")
                    try Data("file \(n)\n".utf8).write(to: file)
                    try FileManager.default.setAttributes(
                        [.modificationDate: Date(timeIntervalSince1970: 1_700_000_000)], ofItemAtPath: file.path)
                }
            }
            let id = try devices.share(0, folders[0], with: [1])
            #expect(waitUntil(timeout: 30) { devices.listing(1).offers.contains { $0["id"] as? String == id } })
            let accepted = devices[1].run(["sync", "accept", id, "--into", folders[1].path, "--" + kind])
            #expect(accepted.status == 0, "\(accepted.stderr)")
            #expect(devices.settled(), "the first sync did not settle\n\(devices.logs)")
            return (devices, folders, id)
        }

        @Test func aSendOnlyFolderKeepsItsFilesAndOverridePushesThemAgain() throws {
            let (devices, folders, id) = try sharing(deskAs: "send-only")
            // Written whole at once: a file seen truncated and then written is two versions of the laptop's, and
            // the second, coming after the override, would be a newer edit than the desk's (rightly kept).
            try Data("the laptop's edit\n".utf8).write(
                to: folders[0].appendingPathComponent("f0.txt"), options: .atomic)
            #expect(
                waitUntil(timeout: 30) { problems(devices, 1).contains { $0.hasPrefix("f0.txt: changed elsewhere") } },
                "\(problems(devices, 1))\n\(devices.logs)")
            #expect(treeOf(folders[1])["f0.txt"] == "file 0\n")
            // A change of its own still goes out.
            try Data("from the desk\n".utf8).write(to: folders[1].appendingPathComponent("desk.txt"))
            #expect(waitUntil(timeout: 30) { treeOf(folders[0])["desk.txt"] == "from the desk\n" })
            let overridden = devices[1].run(["sync", "override", id])
            #expect(overridden.status == 0, "\(overridden.stderr)")
            #expect(
                waitUntil(timeout: 30) { treeOf(folders[0])["f0.txt"] == "file 0\n" },
                "\(treeOf(folders[0]))\n\(devices.logs)")
            #expect(waitUntil(timeout: 30) { problems(devices, 1).isEmpty }, "\(problems(devices, 1))")
            let wrong = devices[0].run(["sync", "override", id])
            #expect(wrong.status != 0 && wrong.stderr.contains("not send-only"), "\(wrong.stderr)")
        }

        /// A receive-only desk edits a file while the laptop deletes it (the desk paused meanwhile, so neither saw
        /// the other's change): the deletion holds on the desk too, and the desk's edit is kept there as a conflict
        /// copy (it went to the versions, out of sight, before); nothing of it reaches the laptop.
        @Test func aReceiveOnlyFoldersEditOfAFileDeletedElsewhereIsKeptAsACopy() throws {
            let (devices, folders, id) = try sharing(deskAs: "receive-only")
            #expect(devices[1].run(["sync", "pause", id]).status == 0)
            try FileManager.default.removeItem(at: folders[0].appendingPathComponent("f1.txt"))
            try Data("edited on the desk\n".utf8).write(to: folders[1].appendingPathComponent("f1.txt"))
            #expect(
                waitUntil(timeout: 30) { devices.listing(0).folders.first?["state"] as? String == "up to date" },
                "\(devices.logs)")
            #expect(devices[1].run(["sync", "resume", id]).status == 0)
            func copies(_ index: Int) -> [String] {
                treeOf(folders[index]).keys.filter { $0.hasPrefix("f1.sync-conflict-") }
            }
            #expect(
                waitUntil(timeout: 30) { treeOf(folders[1])["f1.txt"] == nil && copies(1).count == 1 },
                "\(treeOf(folders[1]))\n\(devices.logs)")
            if let copy = copies(1).first { #expect(treeOf(folders[1])[copy] == "edited on the desk\n") }
            #expect(
                waitUntil(timeout: 30) { devices.listing(1).folders.first?["state"] as? String != "syncing" },
                "\(devices.logs)")
            #expect(treeOf(folders[0])["f1.txt"] == nil && copies(0).isEmpty, "\(treeOf(folders[0]))")
        }

        @Test func aReceiveOnlyFolderListsWhatChangedHereAndRevertBringsTheOthersBack() throws {
            let (devices, folders, id) = try sharing(deskAs: "receive-only")
            try Data("edited on the desk\n".utf8).write(to: folders[1].appendingPathComponent("f1.txt"))
            try Data("added on the desk\n".utf8).write(to: folders[1].appendingPathComponent("added.txt"))
            #expect(
                waitUntil(timeout: 30) {
                    let listed = problems(devices, 1)
                    return listed.contains { $0.hasPrefix("f1.txt: changed here") }
                        && listed.contains { $0.hasPrefix("added.txt: changed here") }
                }, "\(problems(devices, 1))\n\(devices.logs)")
            // What changes elsewhere still comes; what changed here never leaves.
            try Data("the laptop's edit\n".utf8).write(to: folders[0].appendingPathComponent("f2.txt"))
            #expect(waitUntil(timeout: 30) { treeOf(folders[1])["f2.txt"] == "the laptop's edit\n" })
            #expect(treeOf(folders[0])["f1.txt"] == "file 1\n" && treeOf(folders[0])["added.txt"] == nil)
            let reverted = devices[1].run(["sync", "revert", id])
            #expect(reverted.status == 0, "\(reverted.stderr)")
            #expect(
                waitUntil(timeout: 30) {
                    treeOf(folders[1])["f1.txt"] == "file 1\n" && treeOf(folders[1])["added.txt"] == nil
                }, "\(treeOf(folders[1]))\n\(devices.logs)")
            #expect(waitUntil(timeout: 30) { problems(devices, 1).isEmpty }, "\(problems(devices, 1))")
        }

        func versions(_ devices: SyncDevices, _ index: Int, _ id: String) -> [[String: Any]] {
            let result = devices[index].run(["sync", "versions", id, "--json"])
            return ((try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))) as? [[String: Any]]) ?? []
        }

        @Test func filesReplacedOrRemovedByAnotherDeviceAreKeptAndPutBack() throws {
            let (devices, folders, id) = try twoSharing(files: 3)
            let (laptop, desk) = (folders[0], folders[1])
            // One change, written whole (a temporary file renamed over it): written in place, the laptop's scan can
            // catch the file truncated and not yet written, a version of its own that the desk then keeps too (seen
            // beside stress-ng: three versions of f0.txt, and the newest, put back, empty).
            try Data("edited on the laptop\n".utf8).write(to: laptop.appendingPathComponent("f0.txt"), options: .atomic)
            try FileManager.default.removeItem(at: laptop.appendingPathComponent("f1.txt"))
            #expect(
                waitUntil(timeout: 30) {
                    treeOf(desk)["f0.txt"] == "edited on the laptop\n" && treeOf(desk)["f1.txt"] == nil
                }, "\(treeOf(desk))\n\(devices.logs)")
            let kept = versions(devices, 1, id)
            #expect(Set(kept.compactMap { $0["path"] as? String }) == ["f0.txt", "f1.txt"], "\(kept)")
            // Only what another device changed is kept: the laptop's own edits are not.
            #expect(versions(devices, 0, id).isEmpty)
            let listed = devices[1].run(["sync", "versions", id, "f1.txt"])
            #expect(listed.status == 0 && listed.stdout.contains("f1.txt") && !listed.stdout.contains("f0.txt"))
            // Put back on the desk: it syncs like a change made there.
            let restored = devices[1].run(["sync", "restore", id, "f1.txt"])
            #expect(restored.status == 0, "\(restored.stderr)")
            #expect(
                waitUntil(timeout: 30) { treeOf(laptop)["f1.txt"] == "file 1\n" }, "\(treeOf(laptop))\n\(devices.logs)")
            let again = devices[1].run(["sync", "restore", id, "f0.txt"])
            #expect(again.status == 0, "\(again.stderr)")
            #expect(waitUntil(timeout: 30) { treeOf(laptop)["f0.txt"] == "file 0\n" }, "\(devices.logs)")
            // The edit it replaced is kept in turn.
            #expect(versions(devices, 1, id).filter { $0["path"] as? String == "f0.txt" }.count == 2)
            let missing = devices[1].run(["sync", "restore", id, "none.txt"])
            #expect(missing.status != 0 && missing.stderr.split(separator: "\n").count == 1, "\(missing.stderr)")
            let badTime = devices[1].run(["sync", "restore", id, "f0.txt", "--at", "yesterday"])
            #expect(badTime.status == 64 && badTime.stderr.contains("--at"), "\(badTime.stderr)")
        }

        static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures")

        /// A session bus of the test's own (`dbus-daemon --session`) with a notification server on it that records
        /// what it is sent; the bus's address, the record, and both processes (stopped by the caller).
        func notificationBus(in directory: URL) throws -> (String, URL, [Spawned]) {
            let daemon = try Spawned(
                "/usr/bin/dbus-daemon",
                ["--session", "--nofork", "--print-address", "--address=unix:path=\(directory.path)/bus"])
            let address = try #require(daemon.waitForLine(containing: "unix:path="), "\(daemon.output)")
                .trimmingCharacters(in: .whitespaces)
            let record = directory.appendingPathComponent("notifications.jsonl")
            let server = try Spawned(
                "/usr/bin/python3", [Self.fixtures.appendingPathComponent("notification_server.py").path, record.path],
                environment: ["DBUS_SESSION_BUS_ADDRESS": address])
            #expect(server.waitForLine(containing: "ready") != nil, "\(server.output)")
            return (address, record, [server, daemon])
        }

        func notifications(_ record: URL) -> [[String: Any]] {
            ((try? String(contentsOf: record, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
                (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
            }
        }

        /// Concurrent edits while the desk is off, its version the newer: the laptop's is kept as a conflict copy.
        func conflict(_ devices: SyncDevices, _ folders: [URL], _ n: Int) throws {
            devices.stop(1)
            try Data("the laptop's edit \(n)\n".utf8).write(to: folders[0].appendingPathComponent("notes.txt"))
            let later = Date().addingTimeInterval(5)
            let deskFile = folders[1].appendingPathComponent("notes.txt")
            try Data("the desk's edit \(n)\n".utf8).write(to: deskFile)
            try FileManager.default.setAttributes([.modificationDate: later], ofItemAtPath: deskFile.path)
            try devices.start(1)
            #expect(
                waitUntil(timeout: 60) {
                    folders.allSatisfy { folder in
                        let tree = treeOf(folder)
                        return tree["notes.txt"] == "the desk's edit \(n)\n"
                            && tree.contains {
                                $0.key.contains("sync-conflict") && $0.value == "the laptop's edit \(n)\n"
                            }
                    }
                }, "\(folders.map { treeOf($0) })\n\(devices.logs)")
        }

        @Test func conflictsReachThePersonOnEveryDeviceAndAFileKeepsAtMostItsLimitOfCopies() throws {
            let scratch = try Scratch()
            let (address, record, processes) = try notificationBus(in: scratch.url)
            defer { for process in processes { process.stop() } }
            let devices = try SyncDevices(["laptop", "desk"], environment: ["DBUS_SESSION_BUS_ADDRESS": address])
            let folders = try (0..<2).map { try devices[$0].folder("docs") }
            try Data("first\n".utf8).write(to: folders[0].appendingPathComponent("notes.txt"))
            let id = try devices.share(0, folders[0], with: [1], extra: ["--max-conflicts", "1"])
            try devices.accept(1, id, into: folders[1])
            #expect(devices.settled())
            try conflict(devices, folders, 1)
            // Each device tells its person once: the laptop made the copy, the desk received it.
            #expect(
                waitUntil(timeout: 30) {
                    notifications(record).filter { ($0["summary"] as? String)?.contains("a conflict in docs") == true }
                        .count >= 2
                }, "\(notifications(record))\n\(devices.logs)")
            let told = notifications(record)
            #expect(
                told.allSatisfy {
                    $0["app"] as? String == "share" && ($0["body"] as? String)?.contains("notes.txt") == true
                })
            // Both versions' device and time, on both devices.
            for index in 0..<2 {
                let conflicts = (devices.listing(index).folders.first?["conflicts"] as? [[String: Any]]) ?? []
                #expect(conflicts.count == 1 && conflicts.first?["path"] as? String == "notes.txt", "\(conflicts)")
                #expect(conflicts.first?["loserTime"] != nil && conflicts.first?["winnerTime"] != nil)
                // Each device by the name it has on this one: the laptop's version is the one set aside.
                #expect(
                    conflicts.first?["loserName"] as? String == "laptop"
                        && conflicts.first?["winnerName"] as? String == "desk", "\(conflicts)")
                let listed = devices[index].run(["sync"]).stdout
                #expect(listed.contains("conflict: notes.txt — laptop's of "), "\(listed)")
            }
            #expect(
                told.contains { ($0["body"] as? String)?.contains("notes.txt: laptop's version of") == true },
                "\(told)")
            // A second conflict: the laptop keeps one copy of the file (the newer), and so does the desk.
            try conflict(devices, folders, 2)
            #expect(
                waitUntil(timeout: 30) {
                    folders.allSatisfy { treeOf($0).keys.filter { $0.contains("sync-conflict") }.count == 1 }
                }, "\(folders.map { treeOf($0) })")
            #expect(treeOf(folders[1]).values.contains("the laptop's edit 2\n"))
            #expect(
                waitUntil(timeout: 30) { notifications(record).count >= 3 }, "\(notifications(record))\n\(devices.logs)"
            )
        }
    }
}
