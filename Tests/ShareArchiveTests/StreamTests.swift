import Foundation
import Glibc
import ShareTestSupport
import Synchronization
import Testing

@testable import ShareArchive

@Suite struct StreamTests {
    @Test func folderRoundTripsThroughAStreamFedInArbitraryPieces() throws {
        let scratch = Scratch()
        let root = try sampleFolder(in: scratch)
        let plan = try ArchivePlan.folder(root)
        #expect(plan.skipped.map(\.path) == ["outside"])
        let bytes = try streamBytes(plan)
        #expect(UInt64(bytes.count) == plan.streamSize)
        #expect(try streamBytes(ArchivePlan.folder(root)) == bytes, "the stream is deterministic")
        for pieces in [1, 997, 512, 65_536, 1 << 20] {
            let target = scratch.path("out-\(pieces)")
            let extraction = try StreamExtraction(rootPath: target.path)
            var offset = 0
            while offset < bytes.count {
                let n = min(pieces == 1 ? Int.random(in: 1...4096) : pieces, bytes.count - offset)
                try extraction.push(bytes[offset..<(offset + n)])
                offset += n
            }
            try extraction.finish()
            var expected = tree(root)
            expected["outside"] = nil
            #expect(tree(target) == expected, "pieces of \(pieces)")
        }
    }

    /// Links that each stay inside but lead out through one another once unpacked (`d -> .`, `chain -> d/..`, in
    /// either order in the stream) are left out of the plan, with the reason; a link through an inside link stays.
    @Test func linkChainsThatLeaveTheFolderAreLeftOut() throws {
        let scratch = Scratch()
        let root = scratch.url.appendingPathComponent("Trip")
        try FileManager.default.createDirectory(
            at: root.appendingPathComponent("sub"), withIntermediateDirectories: true)
        try Data("x".utf8).write(to: root.appendingPathComponent("sub/file.txt"))
        let links = ["d": ".", "chain": "d/..", "a-first": "z/..", "z": "sub/..", "fine": "d/sub/file.txt"]
        for (name, target) in links {
            try FileManager.default.createSymbolicLink(
                atPath: root.appendingPathComponent(name).path, withDestinationPath: target)
        }
        let plan = try ArchivePlan.folder(root)
        let kept = Set(
            plan.entries.compactMap { entry -> String? in
                if case .symlink = entry.kind { return entry.path } else { return nil }
            })
        #expect(kept == ["d", "z", "fine"], "\(kept)")
        #expect(Set(plan.skipped.map(\.0)) == ["chain", "a-first"], "\(plan.skipped)")
    }

    @Test func interruptedExtractionResumesFromItsCheckpoint() throws {
        let scratch = Scratch()
        let root = try sampleFolder(in: scratch, bigFile: 5 << 20)
        var expected = tree(root)
        expected["outside"] = nil
        try checkResumes(root, expected: expected, in: scratch)
    }

    /// A file whose headers (an extended header naming its path, then its own) take more than 4 KiB: the checkpoint
    /// still holds them, and a resume starts within its bytes, not from the start.
    @Test func interruptedExtractionResumesInAFileWithLongHeaders() throws {
        let scratch = Scratch()
        let root = scratch.path("long")
        let path = (0..<16).map { String(repeating: Character(UnicodeScalar(UInt8(97 + $0))), count: 240) }
        var big = [UInt8](repeating: 0, count: 5 << 20)
        for i in big.indices { big[i] = UInt8(truncatingIfNeeded: i &* 2_654_435_761 >> 11) }
        let file = path.reduce(root) { $0.appendingPathComponent($1) }
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(big).write(to: file)
        #expect(path.joined(separator: "/").utf8.count > 3800)
        try checkResumes(root, expected: tree(root), in: scratch, resumesInside: true)
    }

    /// An entry whose headers take more than a megabyte (a sender may write any extended header) cannot be resumed
    /// into: while it is written the checkpoint is none, or the last one kept, never the entry before it marked
    /// with this one's bytes (which once sent a resume past the end of that entry). Every resume gives the tree.
    @Test func anEntryWhoseHeadersCannotBeKeptLeavesNoWrongCheckpoint() throws {
        let scratch = Scratch()
        let archive = scratch.path("long-header.tar")
        // Before b.bin, a global extended header and its own of 900 KiB each (each under libarchive's limit):
        // its headers take 1.8 MB, more than the extraction keeps.
        let script = """
            import io, sys, tarfile
            def contents(size):
                return io.BytesIO((bytes(range(256)) * (size // 256 + 2))[size % 7:][:size])
            with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
                for name, size in (("a.bin", 1 << 20), ("b.bin", 4 << 20)):
                    info = tarfile.TarInfo(name)
                    info.size, info.mode, info.mtime = size, 0o644, 1600000000
                    if name == "b.bin":
                        comment = {"comment": "x" * (900 << 10)}
                        header = tarfile.TarInfo._create_pax_generic_header(comment, tarfile.XGLTYPE, "utf-8")
                        t.fileobj.write(header)
                        t.offset += len(header)
                        info.pax_headers = comment
                    t.addfile(info, contents(size))
            """
        let (status, output) = try run("/usr/bin/python3", ["-c", script, archive.path])
        #expect(status == 0, "\(output)")
        let bytes = [UInt8](try Data(contentsOf: archive))
        let whole = scratch.path("whole")
        let all = try StreamExtraction(rootPath: whole.path)
        try all.push(bytes[...])
        try all.finish()
        let expected = tree(whole)
        #expect(expected["b.bin"] != nil && expected["a.bin"] != nil, "\(expected)")
        try checkResumes(bytes, expected: expected, in: scratch) { checkpoint, cut in
            #expect(checkpoint.path != "a.bin" || checkpoint.written <= 1 << 20, "cut after \(cut) chunks")
        }
    }

    /// Interrupts the extraction of `root`'s stream after every possible number of chunks and resumes from the
    /// checkpoint's chunk boundary. `resumesInside`: past the first two chunks, a resume never starts from the
    /// beginning.
    private func checkResumes(_ root: URL, expected: [String: String], in scratch: Scratch, resumesInside: Bool = false)
        throws
    {
        try checkResumes(
            try streamBytes(try ArchivePlan.folder(root)), expected: expected, in: scratch,
            resumesInside: resumesInside)
    }

    /// As above for the stream `bytes`; `check` looks at each checkpoint (and the chunks that arrived before it).
    private func checkResumes(
        _ bytes: [UInt8], expected: [String: String], in scratch: Scratch, resumesInside: Bool = false,
        check: (ExtractionCheckpoint, Int) -> Void = { _, _ in }
    ) throws {
        let chunk = 1 << 20
        // Interrupt after every possible number of chunks; resume from the checkpoint's chunk boundary.
        for cut in 1..<((bytes.count + chunk - 1) / chunk) {
            let target = scratch.path("cut-\(cut)")
            let first = try StreamExtraction(rootPath: target.path, queuedChunks: 1)
            for index in 0..<cut { try first.push(bytes[(index * chunk)..<min(bytes.count, (index + 1) * chunk)]) }
            // Let the extractor take what it was given, then stop it as a dropped connection would.
            first.drain()
            first.cancel()
            let checkpoint = first.checkpoint
            var start: Int64 = 0
            if let checkpoint {
                check(checkpoint, cut)
                start = StreamExtraction.resumeOffset(for: checkpoint, chunkSize: chunk)
                #expect(Int(start) <= cut * chunk, "never ahead of what arrived")
                #expect(cut * chunk - Int(start) <= 2 * chunk, "resends at most about a chunk")
            }
            if resumesInside && cut > 2 { #expect(start > 0, "cut after \(cut) chunks") }
            let second = try StreamExtraction(rootPath: target.path, resuming: checkpoint, inputOffset: start)
            var offset = Int(start)
            while offset < bytes.count {
                let n = min(chunk, bytes.count - offset)
                try second.push(bytes[offset..<(offset + n)])
                offset += n
            }
            try second.finish()
            #expect(tree(target) == expected, "cut after \(cut) chunks")
        }
    }

}

/// The extraction's progress reaches its watcher once per step, however many steps there were: a handler kept where
/// each look wrapped it once more would make every call walk all the earlier ones (a folder of 5,000 files took 3x as
/// long) and finally overflow the stack.
@Suite struct ExtractionMarkTests {
    @Test func aWatcherIsCalledOncePerStepAcrossManySteps() {
        let mark = ExtractionMark()
        mark.state.withLock { $0.progress = ("a", [0], 0, 0, 0, 0, 0) }
        let calls = Mutex(0)
        mark.whenAdvanced { _ in calls.withLock { $0 += 1 } }
        for _ in 0..<300_000 { mark.advanced() }
        #expect(calls.withLock { $0 } == 300_000)
    }
}
