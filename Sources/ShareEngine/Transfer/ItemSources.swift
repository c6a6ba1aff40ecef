import ShareThreads
import CoreTransferable
import FoundationEssentials
import ShareArchive
import ShareDisk
import ShareProtocol
import ShareTLS
import ShareTrust
import UniformTypeIdentifiers

/// An `OutgoingItem` as the sender driver sees it: its offer, and its representations produced on request.
final class OutgoingItemSource: ItemSource {
    let item: OutgoingItem
    let offer: OfferItem

    init(_ item: OutgoingItem) {
        self.item = item
        offer = item.offerItem
    }

    func produce(representation index: Int) throws -> ProducedChunks {
        let produced = try blockingAwait(item.representations[index].produce)
        switch produced {
        case .data(let data):
            return .positional(MemorySource(Array(data)))
        case .file(let url, let original):
            // A value's own file is checked again after its last chunk (it must not have changed meanwhile); a file
            // made for the transfer, or kept for it, is not anyone else's to change.
            return .positional(try FileChunks(url, version: original ? item.version : nil, label: item.label))
        case .archive(let plan):
            return .sequential(ArchiveChunks(plan, label: item.label))
        }
    }
}

/// A file read at chunk positions. The chunks a receiver already holds are hashed on a thread of their own while
/// the missing ones are sent; the file's version is checked again after the last chunk.
final class FileChunks: PositionalSource, Sendable {
    let file: OpenFile
    let url: URL
    let version: String?
    let label: String
    let size: UInt64
    var fileName: String? { url.lastPathComponent }

    init(_ url: URL, version: String?, label: String) throws {
        do {
            let folder = try Directory.open(url.deletingLastPathComponent().path)
            file = try folder.openFile(url.lastPathComponent, .read)
        } catch let error as DiskError {
            throw ShareFailure(.noInput, "cannot read \(url.path): \(error.message)")
        }
        self.url = url
        self.version = version
        self.label = label
        size = try file.size
        file.adviseSequential()
    }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws -> Int {
        do {
            return try file.read(into: buffer, at: offset)
        } catch let error as DiskError {
            throw ShareFailure(.noInput, "cannot read \(label): \(error.message)")
        }
    }

    func hashHeld(_ indices: [Int], chunkSize: Int, hasher: ChunkHasher) -> HeldDigests {
        ThreadedDigests(source: self, indices: indices, chunkSize: chunkSize, hasher: hasher)
    }

    func checkUnchanged() throws {
        guard let version, OutgoingItem.currentVersion(of: url) != version else { return }
        throw ProtocolError(
            .sourceChanged, "\(label) changed while it was being sent; run the command again to send the new version")
    }

    func close() { file.close() }
}

/// Hashes the chunks a receiver already holds, on its own thread, while the missing ones are sent.
final class ThreadedDigests: HeldDigests, Sendable {
    private struct State {
        var result: Result<[(index: Int, digest: [UInt8])], Error>?
        var cancelled = false
    }
    private let state = Guarded(State())

    /// `hasher` is used by the hashing thread alone.
    init(source: PositionalSource & Sendable, indices: [Int], chunkSize: Int, hasher: ChunkHasher) {
        // The hasher is the hashing thread's alone from here on.
        nonisolated(unsafe) let hasher = hasher
        Threads.start(name: "share-held") { [self] in
            var buffer = [UInt8](repeating: 0, count: chunkSize)
            var out: [(index: Int, digest: [UInt8])] = []
            do {
                for index in indices {
                    if state.withLock({ $0.cancelled }) { throw CancellationError() }
                    let n = try buffer.withUnsafeMutableBytes {
                        try source.read(into: $0, at: UInt64(index) * UInt64(chunkSize))
                    }
                    out.append(
                        (index, buffer.withUnsafeBytes { hasher.digest(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }))
                }
                finish(.success(out))
            } catch {
                finish(.failure(error))
            }
        }
    }

    private func finish(_ value: Result<[(index: Int, digest: [UInt8])], Error>) {
        state.withLock { $0.result = value }
    }

    /// Stops hashing (after the chunk in progress) and waits until the thread is done with the source: OpenSSL's
    /// exit-time cleanup under a running hash crashes, and a closed descriptor could be reused.
    func cancel() {
        state.withLock { $0.cancelled = true }
        state.wait { $0.result != nil }
    }

    func wait() throws -> [(index: Int, digest: [UInt8])] {
        try state.withLock(when: { $0.result != nil }) { state, _ in try state.result!.get() }
    }
}

/// A tar stream produced by libarchive as it is sent, from a plan fixed at offer time.
final class ArchiveChunks: SequentialSource {
    let plan: ArchivePlan
    let label: String

    init(_ plan: ArchivePlan, label: String) {
        self.plan = plan
        self.label = label
    }

    var size: UInt64? { plan.streamSize }

    func produce(_ emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { readBuffer.deallocate() }
        do {
            try withoutActuallyEscaping(emit) { emit in
                let writer = try ArchiveWriter { try emit($0) }
                try plan.write(to: writer, buffer: readBuffer)
            }
        } catch let error as ArchiveError {
            switch error.kind {
            case .sourceChanged:
                throw ProtocolError(.sourceChanged, "\(error.message); run the command again to send the new version")
            default:
                throw ShareFailure(.noInput, "cannot archive \(label): \(error.message)")
            }
        }
    }

    func close() {}
}

/// zstd for chunks in transit (libzstd), one context per sending or receiving session.
package final class ZstdChunkCodec: ChunkCodec {
    private let zstd = ZstdCodec()

    package init() {}

    package func compress(_ bytes: UnsafeRawBufferPointer, level: Int32, minSaving: Double) -> [UInt8]? {
        zstd.compress(bytes, level: Int(level), worthIt: minSaving)
    }

    package func decompress(
        _ compressed: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer, expected: Int
    )
        throws
    {
        do {
            try zstd.decompress(compressed, into: output, expected: expected)
        } catch let error as ArchiveError {
            throw ProtocolError(.badMessage, error.message)
        }
    }
}
