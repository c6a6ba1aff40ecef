import ShareSync
import Testing

@testable import ShareFolders

/// The queue of pulls: offered in path order (neighbours are pulled, recorded and announced together), what was
/// queued lately first, and nothing queued ever passed over.
@Suite struct PullQueueTests {
    func entry(_ path: String, size: UInt64 = 1) -> FileEntry { FileEntry(path: path, kind: .file, size: size) }

    /// Everything `look` is offered until it has taken `limit` (each taken is removed afterwards, as pulls do).
    func take(_ queue: inout PullQueue, _ limit: Int, skipping: Set<String> = []) -> [String] {
        var taken: [String] = []
        queue.look { path, _ in
            if skipping.contains(path) { return true }
            guard taken.count < limit else { return false }
            taken.append(path)
            return true
        }
        for path in taken { queue[path] = nil }
        return taken
    }

    @Test func aWholeFolderQueuedAtOnceIsOfferedInPathOrder() {
        var queue = PullQueue()
        let paths = (0..<1000).map { String(format: "d%02d/f%04d", $0 % 37, $0) }
        for path in paths.shuffled() { queue[path] = entry(path) }
        var taken: [String] = []
        for _ in 0..<12 { taken += take(&queue, 100) }
        #expect(taken == paths.sorted())
        #expect(queue.isEmpty)
    }

    @Test func whatCameLaterIsOfferedFirstAndWhatIsSkippedIsOfferedAgain() {
        var queue = PullQueue()
        let first = (0..<500).map { String(format: "a/%04d", $0) }
        for path in first.shuffled() { queue[path] = entry(path) }
        // A path no device can bring now is passed over, not lost.
        #expect(take(&queue, 100, skipping: ["a/0003"]) == Array(first.prefix(101)).filter { $0 != "a/0003" })
        queue["z/new"] = entry("z/new")
        let next = take(&queue, 10)
        #expect(next.first == "z/new")
        #expect(next.dropFirst() == ["a/0003"] + first[101..<109])
        // Taken off the queue meanwhile (planned again): never offered; queued again: offered once.
        queue["a/0200"] = nil
        queue["a/0300"] = nil
        queue["a/0300"] = entry("a/0300")
        var rest: [String] = []
        for _ in 0..<20 { rest += take(&queue, 50) }
        #expect(rest.count == Set(rest).count)
        #expect(Set(rest) == Set(first[109...]).subtracting(["a/0200"]))
        #expect(queue.isEmpty && queue.count == 0)
    }

    @Test func aLookThatReachesTheEndStartsOverWithEverythingStillQueued() {
        var queue = PullQueue()
        for path in ["c", "a", "b"] { queue[path] = entry(path) }
        // Nothing can be brought: every look sees all three, in order, and the queue keeps them.
        for _ in 0..<3 {
            var seen: [String] = []
            queue.look { path, _ in
                seen.append(path)
                return true
            }
            #expect(seen == ["a", "b", "c"])
        }
        #expect(queue.count == 3)
        queue.removeAll()
        #expect(queue.isEmpty)
        #expect(take(&queue, 5).isEmpty)
    }

    /// An index arriving in batches while pulls take from the front (in order, and a batch of earlier paths
    /// between them, and paths queued again): each queued path offered once, in path order among what was there,
    /// and the bytes still to come kept as paths come and go.
    @Test func batchesMergedWhilePullsTakeKeepPathOrderAndBytes() {
        var queue = PullQueue()
        var expected: [String] = []
        var offered: [String] = []
        var bytes: UInt64 = 0
        func add(_ paths: [String]) {
            for path in paths {
                let size = UInt64(path.utf8.count)
                if queue[path] == nil { bytes += size }
                queue[path] = entry(path, size: size)
            }
        }
        for batch in 0..<20 {
            let paths = (0..<300).map { String(format: "b%02d/f%03d", batch, $0) }
            add(paths.shuffled())
            expected += paths
            if batch == 10 {
                // Earlier paths, some already taken: queued again, merged among the rest.
                add((0..<300).map { String(format: "b03/g%03d", $0) })
                expected += (0..<300).map { String(format: "b03/g%03d", $0) }
            }
            let taken = take(&queue, 200)
            #expect(taken == taken.sorted())
            offered += taken
            bytes -= taken.reduce(0) { $0 + UInt64($1.utf8.count) }
            #expect(queue.bytes == bytes)
        }
        while !queue.isEmpty {
            let taken = take(&queue, 500)
            #expect(!taken.isEmpty)
            offered += taken
        }
        #expect(offered.count == Set(offered).count)
        #expect(Set(offered) == Set(expected))
        #expect(queue.bytes == 0)
    }
}
