import ShareSync
import Testing

/// What a device lists of the changes other devices made (`SyncFolder.applied`, shown by `share sync changes`): a
/// rename as one change naming where the file was, and a change that set this device's concurrent version aside as
/// a change of what was here, naming the conflict copy it went to.
@Suite struct AppliedChangesTests {
    @Test func aRenameIsOneChangeNamingWhereTheFileWas() {
        let sim = Simulation(deviceCount: 2)
        let (laptop, desk) = (sim.devices[0], sim.devices[1])
        _ = laptop.disk.write("a.txt", Array("hello".utf8))
        #expect(sim.settle())
        _ = laptop.disk.rename("a.txt", "b.txt")
        #expect(sim.settle())
        #expect(desk.disk.nodes["b.txt"]?.content == Array("hello".utf8) && desk.disk.nodes["a.txt"] == nil)
        let applied = desk.folder.applied
        #expect(applied.map(\.path) == ["a.txt", "b.txt"], "\(applied)")
        let rename = applied.last
        #expect(
            rename?.from == "a.txt" && rename?.deleted == false && rename?.existed == false
                && rename?.by == laptop.id, "\(applied)")
        #expect(laptop.folder.applied.isEmpty, "\(laptop.folder.applied)")
    }

    /// One device deletes a file while another makes a new one of the same content: the third moves the file it
    /// has (nothing crosses) and lists a deletion and an addition, each by its device, not a rename.
    @Test func anotherDevicesDeletionThatFreesTheContentIsNoRename() {
        let sim = Simulation(deviceCount: 3)
        _ = sim.devices[0].disk.write("a.txt", Array("the same content".utf8))
        #expect(sim.settle())
        // The third device hears of both at once.
        sim.run(.link(a: 0, b: 2, up: false))
        sim.run(.link(a: 1, b: 2, up: false))
        _ = sim.devices[0].disk.delete("a.txt")
        _ = sim.devices[1].disk.write("b.txt", Array("the same content".utf8))
        #expect(sim.settle())
        let third = sim.devices[2]
        #expect(
            third.disk.nodes["b.txt"]?.content == Array("the same content".utf8) && third.disk.nodes["a.txt"] == nil)
        let applied = third.folder.applied.suffix(2)
        #expect(
            applied.contains { $0.path == "a.txt" && $0.deleted && $0.by == sim.devices[0].id }
                && applied.contains {
                    $0.path == "b.txt" && !$0.deleted && $0.from == nil && $0.by == sim.devices[1].id
                },
            "\(third.folder.applied)")
    }

    @Test func aConflictIsAChangeOfWhatWasHereAndNamesTheCopy() {
        let sim = Simulation(deviceCount: 2)
        _ = sim.devices[0].disk.write("c.txt", Array("from the laptop".utf8))
        _ = sim.devices[1].disk.write("c.txt", Array("from the desk".utf8))
        #expect(sim.settle())
        // The device whose version lost took the other's at the path.
        let losers = sim.devices.filter { device in device.folder.applied.contains { $0.path == "c.txt" } }
        #expect(losers.count == 1, "\(sim.devices.map(\.folder.applied))")
        guard let loser = losers.first, let change = loser.folder.applied.first(where: { $0.path == "c.txt" })
        else { return }
        #expect(change.existed && !change.deleted && change.from == nil, "\(change)")
        let copy = change.keptAs ?? ""
        #expect(copy.hasPrefix("c.sync-conflict-") && copy.hasSuffix(".txt"), "\(change)")
        #expect(loser.disk.nodes[copy]?.kind == .file, "\(loser.disk.nodes.keys.sorted())")
        // The winner takes the copy as something new (the loser made it).
        let winner = sim.devices.first { $0 !== loser }!
        #expect(
            winner.folder.applied.contains { $0.path == copy && !$0.existed && $0.by == loser.id },
            "\(winner.folder.applied)")
    }
}
