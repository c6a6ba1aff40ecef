import CoreTransferable
import Foundation
import ShareKit
import Testing
import UniformTypeIdentifiers
import ShareTrust
import ShareReach
import ShareProtocol
import ShareEngine
import ShareAgent

extension UTType {
    fileprivate static let recipe = UTType(exportedAs: "com.example.recipe", conformingTo: .json)
    fileprivate static let diary = UTType(exportedAs: "com.example.diary", conformingTo: .data)
    fileprivate static let sketch = UTType(exportedAs: "com.example.sketch", conformingTo: .data)
}

/// A developer's own type: its Codable form where the receiver knows it, its title as text elsewhere.
private struct Recipe: Codable, Equatable, Transferable {
    var title: String
    var steps: [String]

    static var transferRepresentation: some TransferRepresentation {
        CodableRepresentation(contentType: .recipe)
        ProxyRepresentation(exporting: \.title)
    }
}

/// Its raw form only for the owner's devices; a CSV only when the value allows it; its text for anyone.
private struct Diary: Transferable {
    var text: String
    var csvAllowed: Bool

    static var transferRepresentation: some TransferRepresentation {
        DataRepresentation(exportedContentType: .diary) { Data($0.text.utf8) }
            .visibility(.team)
        DataRepresentation(exportedContentType: .commaSeparatedText) { Data("entry,\($0.text)\n".utf8) }
            .exportingCondition { $0.csvAllowed }
        ProxyRepresentation(exporting: \.text)
    }
}

/// Imports only a type nobody here sends.
private struct Sketch: Transferable {
    var data: Data

    static var transferRepresentation: some TransferRepresentation {
        DataRepresentation(contentType: .sketch) {
            $0.data
        } importing: {
            Sketch(data: $0)
        }
    }
}

/// What one receiver saw offered, item by item (by position in the offer).
private final class OfferLog: @unchecked Sendable {  // guarded by `lock`
    private let lock = NSLock()
    private var offered: [Int: [String]] = [:]

    func record(_ event: TransferEvent) {
        guard case .chosen(let item, _, let types, _, _) = event else { return }
        lock.withLock { offered[item] = types }
    }

    subscript(item: Int) -> [String] { lock.withLock { offered[item] ?? [] } }
}

/// The library in one process: `ShareClient` on both sides, the receiver listening itself.
@Suite struct LibraryTests {
    /// Collects `count` items, or fails after `timeout` seconds; the receive ends with the iteration.
    private func collect(_ incoming: IncomingItems, count: Int, timeout: Double = 30) async throws -> [IncomingItem] {
        try await withThrowingTaskGroup(of: [IncomingItem]?.self) { group in
            group.addTask {
                var items: [IncomingItem] = []
                for try await item in incoming {
                    items.append(item)
                    if items.count == count { break }
                }
                return items
            }
            group.addTask {
                try await Task.sleep(for: .seconds(timeout))
                return nil
            }
            defer { group.cancelAll() }
            guard let items = try await group.next() ?? nil else {
                throw TestFailure("fewer than \(count) item(s) arrived within \(Int(timeout)) s")
            }
            return items
        }
    }

    private func listening(_ options: ShareClient.ReceiveOptions = ShareClient.ReceiveOptions())
        -> ShareClient.ReceiveOptions
    {
        var options = options
        options.mode = .listen(host: "127.0.0.1", port: 0)
        return options
    }

    private func port(_ incoming: IncomingItems) throws -> Int {
        guard case .listening(let port) = incoming.source else { throw TestFailure("not listening") }
        return port
    }

    @Test func aCustomTypeArrivesAsItselfWithItsPreviewAndAsTextWhereOnlyTextIsAccepted() async throws {
        let (desk, laptop) = try TestDevice.pair("desk", "laptop")
        let sender = try ShareClient(configDirectory: desk.config.path)
        let receiver = try ShareClient(configDirectory: laptop.config.path)
        let paella = Recipe(title: "Paella", steps: ["rice", "saffron", "patience"])

        var folder: URL?
        do {
            let rich = try receiver.receive(accepting: [Recipe.self, String.self], options: listening())
            folder = rich.directory
            let delivery = try await sender.send(
                paella, preview: SharePreview("Paella for six"), to: "127.0.0.1:\(port(rich))")
            #expect(delivery.delivered.map(\.outcome) == ["received"])
            let item = try #require(try await collect(rich, count: 1).first)
            #expect(item.contentType == .recipe)
            #expect(item.preview.title == "Paella for six")
            #expect(item.from == "desk")
            #expect(item.canLoad(Recipe.self))
            // The loop has ended; the item it handed over is still there to load.
            #expect(try await item.load(Recipe.self) == paella)
        }
        // The receive's own folder goes once nothing holds it.
        #expect(folder.map { !FileManager.default.fileExists(atPath: $0.path) } == true)

        let plain = try receiver.receive(accepting: [String.self], options: listening())
        try await sender.send(paella, to: "127.0.0.1:\(port(plain))")
        let text = try #require(try await collect(plain, count: 1).first)
        #expect(text.contentType == .utf8PlainText)
        #expect(!text.canLoad(Recipe.self))
        #expect(try await text.load(String.self) == "Paella")
        await #expect(throws: TransferableSupportError.self) { try await text.load(Recipe.self) }
    }

    /// `for try await item in try client.receive(…)`: nothing but the loop holds the receive.
    @Test func aLoopAloneKeepsTheReceiveAndItsFolder() async throws {
        let (desk, laptop) = try TestDevice.pair("desk", "laptop")
        let sender = try ShareClient(configDirectory: desk.config.path)
        let receiver = try ShareClient(configDirectory: laptop.config.path)
        let paella = Recipe(title: "Paella", steps: ["rice"])
        let options = listening()
        let received = try await withThrowingTaskGroup(of: (IncomingItem, URL)?.self) { group in
            group.addTask {
                var incoming: IncomingItems? = try receiver.receive(accepting: [Recipe.self], options: options)
                guard case .listening(let port) = incoming?.source, let folder = incoming?.directory else {
                    return nil
                }
                var loop = try #require(incoming).makeAsyncIterator()
                incoming = nil
                try await sender.send(paella, to: "127.0.0.1:\(port)")
                return try await loop.next().map { ($0, folder) }
            }
            group.addTask {
                try await Task.sleep(for: .seconds(30))
                throw TestFailure("the item did not reach the loop within 30 s")
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
        let (item, folder) = try #require(received)
        #expect(try await item.load(Recipe.self) == paella)
        #expect(item.fileURL.path.hasPrefix(folder.path))
    }

    /// Values of unknown size start in memory on the receiver and move to a partial file past 64 KiB; both kinds
    /// arrive whole, kept as files for the program.
    @Test func smallValuesStayInMemoryAndLargeOnesMoveToDiskWhole() async throws {
        let (desk, laptop) = try TestDevice.pair("desk", "laptop")
        let sender = try ShareClient(configDirectory: desk.config.path)
        let receiver = try ShareClient(configDirectory: laptop.config.path)
        let incoming = try receiver.receive(accepting: [Sketch.self], options: listening())
        let sizes = [10, 64 << 10, (64 << 10) + 1, 3 << 20]
        let sketches = sizes.map { size in Sketch(data: Data((0..<size).map { UInt8(truncatingIfNeeded: $0 * 7 + 3) }))
        }
        // Small chunks: the item just past 64 KiB has four chunks in memory before it moves to a file.
        var options = ShareClient.SendOptions()
        options.chunkSize = 16 << 10
        let delivery = try await sender.send(
            sketches.map { ShareItem($0) }, to: "127.0.0.1:\(try port(incoming))", options: options)
        #expect(delivery.delivered.count == sizes.count, "\(delivery.refused)")
        let items = try await collect(incoming, count: sizes.count)
        let loaded = try await items.asyncMap { try await $0.load(Sketch.self).data.count }
        #expect(loaded.sorted() == sizes)
        for item in items {
            let data = try await item.load(Sketch.self).data
            #expect(data == sketches.first { $0.data.count == data.count }?.data)
        }
    }

    @Test func teamOnlyRepresentationsNeverReachAGroupAndConditionsAreEvaluatedPerValue() async throws {
        let desk = try TestDevice("desk")
        let laptop = try TestDevice("laptop")
        let friend = try TestDevice("friend")
        desk.trust(laptop, flags: ["--team"])
        desk.trust(friend, flags: ["--group", "family"])
        laptop.trust(desk, flags: ["--team"])
        friend.trust(desk, flags: ["--group", "family"])
        let sender = try ShareClient(configDirectory: desk.config.path)
        let open = Diary(text: "monday", csvAllowed: true)
        let closed = Diary(text: "tuesday", csvAllowed: false)
        let items = [
            ShareItem(open, preview: SharePreview("open")), ShareItem(closed, preview: SharePreview("closed")),
        ]

        for (device, seesTeam) in [(laptop, true), (friend, false)] {
            let log = OfferLog()
            var options = listening()
            options.events = { log.record($0) }
            let incoming = try ShareClient(configDirectory: device.config.path)
                .receive(accepting: [String.self], options: options)
            let delivery = try await sender.send(items, to: "127.0.0.1:\(port(incoming))")
            #expect(delivery.delivered.count == 2)
            let received = try await collect(incoming, count: 2)
            #expect(Set(try await received.asyncMap { try await $0.load(String.self) }) == ["monday", "tuesday"])
            let team = seesTeam ? ["com.example.diary"] : []
            #expect(log[0] == team + ["public.comma-separated-values-text", "public.utf8-plain-text"])
            #expect(log[1] == team + ["public.utf8-plain-text"])
        }
    }

    @Test func aValueTheReceiverCannotTakeIsRefusedOnBothSides() async throws {
        let (desk, laptop) = try TestDevice.pair("desk", "laptop")
        let refusals = RefusalLog()
        var options = listening()
        options.refused = { refusals.add($0) }
        let incoming = try ShareClient(configDirectory: laptop.config.path)
            .receive(accepting: [Sketch.self], options: options)
        defer { incoming.stop() }
        let sender = try ShareClient(configDirectory: desk.config.path)
        let error = await #expect(throws: ShareFailure.self) {
            try await sender.send(Recipe(title: "Paella", steps: []), to: "127.0.0.1:\(port(incoming))")
        }
        #expect(error?.code == .refused)
        #expect(
            error?.message.contains("no common representation: offered com.example.recipe, public.utf8-plain-text")
                == true, "\(error?.message ?? "")")
        #expect(waitUntil(timeout: 10) { !refusals.all.isEmpty })
        #expect(refusals.all.first?.from == "desk")
        #expect(refusals.all.first?.reason.contains("receiver accepts com.example.sketch") == true)
    }

    @Test func typesThatImportNothingAreAUsageError() throws {
        let laptop = try TestDevice("laptop")
        let error = #expect(throws: ShareFailure.self) {
            _ = try ShareClient(configDirectory: laptop.config.path).receive(accepting: [Diary.self])
        }
        #expect(error?.code == .usage)
    }

    /// A program names its own earlier version of an offered file: the new one arrives as a delta against it, and
    /// the earlier file is left as it was.
    @Test func aProgramsEarlierVersionMakesTheFileADelta() async throws {
        let (desk, laptop) = try TestDevice.pair("desk", "laptop")
        let receiver = try ShareClient(configDirectory: laptop.config.path)
        let kept = try laptop.folder("kept").appendingPathComponent("model.bin")
        try makeFile(kept, size: 4 << 20)
        let file = try desk.folder("src").appendingPathComponent("model.bin")
        var bytes = try Data(contentsOf: kept)
        bytes.replaceSubrange(2_000_000..<2_004_096, with: Data(repeating: 9, count: 4096))
        try bytes.write(to: file)
        let asked = Box<[String]>([])
        var options = listening()
        options.earlierVersion = { query in
            asked.value.append("\(query.fileName) \(query.size) \(query.from)")
            return query.fileName == "model.bin" ? kept : nil
        }
        let incoming = try receiver.receive(accepting: [Data.self], options: options)
        let sent = desk.run(["send", file.path, "--to", "127.0.0.1:\(try port(incoming))", "--json"])
        #expect(sent.status == 0, "\(sent.stderr)")
        let report = try #require(summary(sent.stdout))
        #expect((report["bytesFromEarlierVersion"] as? Int ?? 0) > 4_000_000, "\(report)")
        #expect((report["wireBytes"] as? Int ?? .max) < 64 << 10, "\(report)")
        let item = try #require(try await collect(incoming, count: 1).first)
        #expect(try await item.load(Data.self) == bytes)
        #expect(asked.value == ["model.bin \(4 << 20) desk"])
        #expect(try Data(contentsOf: kept) != bytes)
    }
}

private final class RefusalLog: @unchecked Sendable {  // guarded by `lock`
    private let lock = NSLock()
    private var items: [RefusedItem] = []

    func add(_ item: RefusedItem) { lock.withLock { items.append(item) } }
    var all: [RefusedItem] { lock.withLock { items } }
}

extension Array where Element: Sendable {
    fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}

/// A value a callback on another thread writes and the test reads after.
private final class Box<Value>: @unchecked Sendable {  // guarded by `lock`
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}
