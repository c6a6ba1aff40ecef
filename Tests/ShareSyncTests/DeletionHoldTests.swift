import ShareProtocol
import ShareSync
import Testing

/// A mass deletion is held (more than half of a folder gone, at least ten files) however the scans that find it fall:
/// a watch settles in windows, so the files of one `rm` can be found by several scans.
@Suite struct DeletionHoldTests {
    /// One device's folder of `files` files, scanned and recorded, that holds mass deletions (with the simulation
    /// that keeps its clock).
    func folder(files: Int) -> (Simulation, Simulation.Device) {
        let simulation = Simulation(deviceCount: 1)
        let device = simulation.devices[0]
        device.folder.deletionShare = 0.5
        for n in 0..<files { #expect(device.disk.write("f\(n)", Array("file \(n)".utf8))) }
        device.folder.scan()
        return (simulation, device)
    }

    func deleted(_ device: Simulation.Device, _ path: String) -> Bool {
        device.store.local(path)?.entry.deleted ?? false
    }

    @Test func deletionsFoundBySeveralScansAreHeldTogetherUntilThePersonLetsThemGo() {
        let (simulation, device) = folder(files: 40)
        defer { withExtendedLifetime(simulation) {} }
        let sync = device.folder
        let first = Set((0..<21).map { "f\($0)" })
        let then = Set((21..<31).map { "f\($0)" })
        for path in first.union(then) { #expect(device.disk.delete(path)) }
        // The watch's first window holds 21; its second finds ten more, which join the hold (ten of forty alone
        // would have gone through, and taken the hold of the others with them).
        #expect(sync.scan(paths: first).isEmpty)
        #expect(sync.heldDeletions == 21)
        #expect(sync.scan(paths: then).isEmpty)
        #expect(sync.heldDeletions == 31)
        // Other changes are recorded meanwhile; a scan of the whole folder holds the same deletions.
        #expect(device.disk.write("other", Array("other".utf8)))
        #expect(sync.scan(paths: ["other"]).map(\.path) == ["other"])
        #expect(sync.scan().isEmpty)
        #expect(sync.heldDeletions == 31)
        #expect(!first.union(then).contains { deleted(device, $0) })
        // A file put back is no longer held.
        #expect(device.disk.write("f0", Array("file 0".utf8)))
        sync.scan(paths: ["f0"])
        #expect(sync.heldDeletions == 30)
        // Let go: whichever scans find them next record them, in any number of parts.
        let letGo = sync.allowHeldDeletions()
        #expect(letGo == first.union(then).subtracting(["f0"]))
        #expect(sync.heldDeletions == 0)
        let part = Set(letGo.sorted().prefix(5))
        #expect(sync.scan(paths: part).filter(\.deleted).count == 5)
        #expect(sync.scan().filter(\.deleted).count == 25)
        #expect(sync.heldDeletions == 0)
        #expect(letGo.allSatisfy { deleted(device, $0) } && !deleted(device, "f0"))
        // The person's word was for those deletions only: the next mass deletion is held again.
        for n in 31..<40 { #expect(device.disk.delete("f\(n)")) }
        for path in ["f0", "other"] { #expect(device.disk.delete(path)) }
        #expect(device.disk.write("new", Array("new".utf8)))
        // Eleven of the twelve left go at once (with one new file): held.
        #expect(sync.scan().map(\.path) == ["new"])
        #expect(sync.heldDeletions == 11)
    }

    @Test func aFewDeletionsGoAtOnce() {
        let (simulation, device) = folder(files: 20)
        defer { withExtendedLifetime(simulation) {} }
        for n in 0..<9 { #expect(device.disk.delete("f\(n)")) }
        #expect(device.folder.scan().filter(\.deleted).count == 9)
        #expect(device.folder.heldDeletions == 0)
        // A tenth, alone, is not "at once" with the nine before it.
        #expect(device.disk.delete("f9"))
        #expect(device.folder.scan(paths: ["f9"]).filter(\.deleted).count == 1)
    }
}
