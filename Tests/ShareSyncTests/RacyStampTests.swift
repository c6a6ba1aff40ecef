import ShareSync
import Testing

/// A change that leaves a file's size, time and inode as they were is still found: a stamp recorded within the
/// file system's timestamp granularity of the file's last change is not trusted by the next scan, and a file whose
/// content is found not to be what its index names is read again.
@Suite struct RacyStampTests {
    @Test func aSecondWriteInTheSameTickAsTheScanIsFoundByTheNextScan() {
        let simulation = Simulation(deviceCount: 1)
        defer { withExtendedLifetime(simulation) {} }
        let device = simulation.devices[0]
        #expect(device.disk.write("x", Array("one".utf8)))
        #expect(device.folder.scan().map(\.path) == ["x"])
        // The clock has not moved: the same size, time and inode, other content.
        #expect(device.disk.write("x", Array("two".utf8)))
        let found = device.folder.scan(paths: ["x"])
        #expect(found.map(\.path) == ["x"])
        #expect(found.first?.digest == SimDisk.digest(Array("two".utf8)))
        // Once a scan comes later than the granularity, the stamp is trusted again (nothing read, nothing found).
        simulation.time += 3_000_000_000
        #expect(device.folder.scan().isEmpty)
        #expect(device.store.local("x")?.stamp?.racy == false)
        #expect(device.folder.scan().isEmpty)
    }

    @Test func aFileWhoseTimeIsNotYetWellPastIsReadByEveryScan() {
        let simulation = Simulation(deviceCount: 1)
        defer { withExtendedLifetime(simulation) {} }
        let device = recordedAndTrusted(simulation)
        // The clock set back to the file's time (or a time another device stamped it with, ahead of this clock):
        // a rewrite of the same size now leaves size, time and inode as recorded, and is still found while the
        // clock has not passed the file's time by the granularity.
        device.offset -= 3_000_000_000
        #expect(device.disk.write("x", Array("two".utf8)))
        let found = device.folder.scan()
        #expect(found.first?.digest == SimDisk.digest(Array("two".utf8)))
        #expect(device.folder.scan().isEmpty)
    }

    @Test func aFileFoundHoldingOtherContentUnderTheSameStampIsReadAgainWhenDistrusted() {
        let simulation = Simulation(deviceCount: 1)
        defer { withExtendedLifetime(simulation) {} }
        let device = recordedAndTrusted(simulation)
        // The clock set back to the very time of the last write: a rewrite no stamp can tell from it.
        device.offset -= 3_000_000_000
        #expect(device.disk.write("x", Array("two".utf8)))
        device.offset += 3_000_000_000
        #expect(device.folder.scan().isEmpty)
        device.folder.distrust(["x", "not-there"])
        let found = device.folder.scan(paths: ["x"])
        #expect(found.first?.digest == SimDisk.digest(Array("two".utf8)))
    }

    /// What a first scan read ahead (outside the folder's lock) stands only while the file's stamp is the one it was
    /// read under: a file changed since is read again.
    @Test func whatWasReadAheadStandsOnlyWhileItsStampDoes() throws {
        let simulation = Simulation(deviceCount: 1)
        defer { withExtendedLifetime(simulation) {} }
        let device = simulation.devices[0]
        #expect(device.disk.write("x", Array("one".utf8)))
        #expect(device.disk.write("y", Array("why".utf8)))
        let x = try #require(device.disk.stamp("x"))
        let y = try #require(device.disk.stamp("y"))
        let readAhead: [String: (DiskStamp, Scanner.Content)] = [
            "x": (x, Scanner.Content(digest: SimDisk.digest(Array("one".utf8)))),
            // Taken as read while its stamp holds (the scan does not read it again).
            "y": (y, Scanner.Content(digest: SimDisk.digest(Array("read ahead".utf8)))),
        ]
        simulation.time += 3_000_000_000
        #expect(device.disk.write("x", Array("three".utf8)))
        let found = device.folder.scan(paths: ["x", "y"], readAhead: readAhead)
        #expect(found.first { $0.path == "x" }?.digest == SimDisk.digest(Array("three".utf8)))
        #expect(found.first { $0.path == "y" }?.digest == SimDisk.digest(Array("read ahead".utf8)))
    }

    /// `x` written, scanned, and scanned again once the clock is past the granularity: its stamp trusted.
    private func recordedAndTrusted(_ simulation: Simulation) -> Simulation.Device {
        let device = simulation.devices[0]
        #expect(device.disk.write("x", Array("one".utf8)))
        device.folder.scan()
        simulation.time += 3_000_000_000
        device.folder.scan()
        #expect(device.store.local("x")?.stamp?.racy == false)
        return device
    }
}
