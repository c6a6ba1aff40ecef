import Foundation
import ShareEngine
@testable import ShareFolders
import Testing

/// What a folder's status says of what is to come, from the rates of the last seconds.
@Suite struct FolderStatusTests {
    func status(files: Int, bytes: UInt64, rate: Double?, fileRate: Double?) -> FolderStatus {
        var status = FolderStatus(
            settings: SharedFolderSettings(id: "abcde-fghij-klmno", label: "thesis", path: "/tmp/thesis", devices: []),
            state: "syncing", files: 0, bytes: 0, neededFiles: files, neededBytes: bytes, rate: rate,
            bytesReceived: 0, bytesFromLocal: 0, peers: [], conflicts: [], problems: [], lastScan: nil)
        status.fileRate = fileRate
        return status
    }

    /// Many small files go at the pace of their number: 10,000 files of 1 MiB in all, at 10 MiB/s but 500 files a
    /// second, are 20 s away, not 0.1 s; one large file goes at the pace of its bytes.
    @Test func theTimeLeftIsTheLongerOfTheBytesAndTheFiles() {
        #expect(status(files: 10_000, bytes: 1 << 20, rate: 10 * 1024 * 1024, fileRate: 500).secondsLeft == 20)
        #expect(status(files: 1, bytes: 100 << 20, rate: 10 * 1024 * 1024, fileRate: 2).secondsLeft == 10)
        // No file placed in the last seconds (a large file arriving): its bytes alone.
        #expect(status(files: 1, bytes: 50 << 20, rate: 10 * 1024 * 1024, fileRate: nil).secondsLeft == 5)
        // Nothing coming in, or nothing to come: nothing said.
        #expect(status(files: 3, bytes: 30, rate: nil, fileRate: 5).secondsLeft == nil)
        #expect(status(files: 0, bytes: 0, rate: 100, fileRate: 5).secondsLeft == nil)
        // Said as it crosses (`--json`, the page).
        let object =
            try? JSONSerialization.jsonObject(
                with: JSONEncoder().encode(status(files: 2, bytes: 20, rate: 10, fileRate: 1.5))) as? [String: Any]
        #expect(object?["fileRate"] as? Double == 1.5)
    }

    /// A rate is what came in the last five seconds over the time since the first of it (at least a second): a
    /// transfer two seconds old is not said to go at two fifths of its pace; what came before is not counted.
    @Test func aRateIsOverTheTimeItsAmountsCameIn() {
        let now = Date()
        let two = [(now.addingTimeInterval(-2), 100.0), (now.addingTimeInterval(-1), 100.0), (now, 100.0)]
        #expect(FolderService.rate(two, now: now) == 150)
        let old =
            [(now.addingTimeInterval(-9), 1000.0)] + (0..<10).map { (now.addingTimeInterval(-Double($0) / 2), 10.0) }
        #expect(FolderService.rate(old, now: now) == 100.0 / 4.5)
        #expect(FolderService.rate([(now, 7.0)], now: now) == 7)
        #expect(FolderService.rate([(now.addingTimeInterval(-6), 7.0)], now: now) == nil)
    }

    /// The book of shared folders: one written by an earlier version (without the lists added since) is read
    /// whole; one that is damaged is kept aside, never overwritten by the next change.
    @Test func theFolderBookReadsEarlierVersionsAndKeepsADamagedOneAside() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("book-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("folders.json")
        let earlier =
            #"{"folders":[{"id":"abcde-fghij-klmno","label":"thesis","path":"/tmp/thesis","kind":"send-receive","devices":[],"created":"2026-11-01T10:00:00Z"}],"offers":[]}"#
        try Data(earlier.utf8).write(to: file)
        let book = try FolderBook(directory: directory)
        #expect(book.folders.map(\.id) == ["abcde-fghij-klmno"] && book.snapshot.removed.isEmpty)
        try Data("{\"folders\": [".utf8).write(to: file)
        let fresh = try FolderBook(directory: directory)
        #expect(fresh.folders.isEmpty)
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        let aside = try #require(names.first { $0.hasPrefix("folders.json.unreadable-") }, "\(names)")
        #expect(try String(contentsOf: directory.appendingPathComponent(aside), encoding: .utf8) == "{\"folders\": [")
    }
}
