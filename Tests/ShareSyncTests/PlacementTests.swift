import ShareSync
import Testing

/// A version pulled from another device never replaces what a person made at its path meanwhile: the path is
/// scanned instead, as a change made here.
@Suite struct PlacementTests {
    /// Device 0 holds device 1's entry for `x` and nothing of its own there; answers that entry.
    private func pending(_ simulation: Simulation) throws -> FileEntry {
        let (here, there) = (simulation.devices[0], simulation.devices[1])
        #expect(there.disk.write("x", Array("theirs".utf8)))
        let entry = try #require(there.folder.scan().first)
        here.store.applyRemote(there.id, indexID: there.store.indexID, reset: true, entries: [entry], have: 1)
        return entry
    }

    @Test(arguments: [false, true])
    func aFileMadeAtThePathWhileItsVersionCameIsKept(exclusive: Bool) throws {
        let simulation = Simulation(deviceCount: 2)
        defer { withExtendedLifetime(simulation) {} }
        let here = simulation.devices[0]
        let entry = try pending(simulation)
        // Made before the placement looks: found by the look, or (exclusive) by the put, which must not replace it.
        #expect(here.disk.write("x", Array("mine".utf8)))
        var told: Bool?
        let outcome = try here.folder.placing {
            try here.folder.place(entry, exclusive: exclusive) { free in
                told = free
                guard here.disk.stamp(entry.path) == nil else { throw SyncFolder.PathTaken() }
                try here.disk.put(entry.path, content: Array("theirs".utf8), mode: 0o644, modified: entry.modified)
                return nil
            }
        }
        #expect(outcome == .changedHere)
        // Looked at first, the put is never asked; told the path is free, it finds it taken.
        #expect(told == (exclusive ? true : nil))
        #expect(here.disk.nodes["x"]?.content == Array("mine".utf8))
        #expect(here.store.local("x") == nil)
    }

    @Test func aFreePathIsToldFreeAndRecordedAsPlaced() throws {
        let simulation = Simulation(deviceCount: 2)
        defer { withExtendedLifetime(simulation) {} }
        let here = simulation.devices[0]
        let entry = try pending(simulation)
        let outcome = try here.folder.placing {
            try here.folder.place(entry, exclusive: true) { free in
                #expect(free)
                try here.disk.put(entry.path, content: Array("theirs".utf8), mode: 0o644, modified: entry.modified)
                return nil
            }
        }
        guard case .placed(let recorded) = outcome else {
            Issue.record("not placed: \(outcome)")
            return
        }
        #expect(recorded.map(\.path) == ["x"])
        #expect(here.store.local("x")?.entry.version == entry.version)
    }
}

extension PlacementTests {
    /// On a receive-only device a change made there stays there: the others' version that a pull asked for before
    /// the change, arriving after it, is not put in place over a change that saw it (a deletion that would come back,
    /// an edit that would be undone). Found by the randomized check (seed 20261220 of three devices).
    @Test(arguments: [false, true])
    func aChangeKeptHereIsNotUndoneByAVersionItSaw(deleted: Bool) throws {
        let simulation = Simulation(deviceCount: 2)
        defer { withExtendedLifetime(simulation) {} }
        let here = simulation.devices[0]
        let entry = try pending(simulation)
        here.folder.mode = .receiveOnly(revertLocal: false)
        // Their version is here (the pull of a later one is under way), then changed here.
        _ = try here.folder.placing {
            try here.folder.place(entry) {
                try here.disk.put(entry.path, content: Array("theirs".utf8), mode: 0o644, modified: entry.modified)
            }
        }
        if deleted {
            try here.disk.remove("x")
        } else {
            #expect(here.disk.write("x", Array("mine, after theirs".utf8)))
        }
        _ = here.folder.scan()
        let kept = try #require(here.store.local("x"))
        #expect(kept.entry.localOnly && kept.entry.deleted == deleted)
        #expect(kept.entry.version.compare(entry.version) == .greater)
        // Their version arrives again (a pull asked for it before the change).
        var put = false
        let outcome = try here.folder.placing {
            try here.folder.place(entry, exclusive: deleted) { _ in
                put = true
                return nil
            }
        }
        #expect(outcome == .notWanted)
        #expect(!put)
        #expect(here.store.local("x") == kept)
        #expect(here.disk.nodes["x"]?.content == (deleted ? nil : Array("mine, after theirs".utf8)))
        #expect(here.folder.plan().isEmpty)
    }
    /// A folder a scan cannot read (no right to, no descriptor left): what it holds is not in the listing, and is
    /// not taken for deleted; read again, it is as it was.
    @Test func whatAFolderThatCannotBeReadHoldsIsNotTakenForDeleted() throws {
        let simulation = Simulation(deviceCount: 2)
        defer { withExtendedLifetime(simulation) {} }
        let here = simulation.devices[0]
        #expect(here.disk.mkdir("d") && here.disk.write("d/a.txt", Array("a".utf8)) && here.disk.write("b.txt", [1]))
        _ = here.folder.scan()
        #expect(here.store.local("d/a.txt")?.entry.deleted == false)
        here.disk.unreadable = ["d"]
        let recorded = here.folder.scan()
        #expect(!recorded.contains { $0.path == "d/a.txt" }, "\(recorded)")
        #expect(here.store.local("d/a.txt")?.entry.deleted == false)
        // A file beside it that is gone is still taken for deleted.
        #expect(here.disk.delete("b.txt"))
        here.disk.unreadable = []
        _ = here.folder.scan()
        #expect(here.store.local("d/a.txt")?.entry.deleted == false)
        #expect(here.store.local("b.txt")?.entry.deleted == true)
    }

    /// The same for the looks the watch asks for: a folder's own entries (a change seen inside it) and single
    /// paths, when the folder cannot be opened (made unreadable just after a change in it, no descriptor left).
    @Test func whatAWatchedLookCannotReachIsNotTakenForDeleted() throws {
        let simulation = Simulation(deviceCount: 2)
        defer { withExtendedLifetime(simulation) {} }
        let here = simulation.devices[0]
        #expect(here.disk.mkdir("d") && here.disk.write("d/a.txt", Array("a".utf8)))
        #expect(here.disk.mkdir("d/e") && here.disk.write("d/e/b.txt", Array("b".utf8)))
        _ = here.folder.scan()
        here.disk.unreadable = ["d"]
        let looked = here.folder.scan(under: "d", recursive: false)
        #expect(!looked.contains { $0.deleted }, "\(looked)")
        let deep = here.folder.scan(under: "d/e", recursive: true)
        #expect(!deep.contains { $0.deleted }, "\(deep)")
        let paths = here.folder.scan(paths: ["d/a.txt", "d/e/b.txt"])
        #expect(!paths.contains { $0.deleted }, "\(paths)")
        #expect(here.store.local("d/a.txt")?.entry.deleted == false)
        #expect(here.store.local("d/e/b.txt")?.entry.deleted == false)
        // Readable again, and the file gone: taken for deleted.
        here.disk.unreadable = []
        #expect(here.disk.delete("d/a.txt"))
        _ = here.folder.scan(under: "d", recursive: false)
        #expect(here.store.local("d/a.txt")?.entry.deleted == true)
    }
}
