// Delta benchmark: how fast a basis index is built, on one core, and how much memory it takes.
//   share-bench-delta index FILE
// Prints one line: bytes, seconds, GB/s, groups, index bytes, peak RSS in KiB (the file is read once to warm the page
// cache first, so the figure is the chunking and naming, not the disk). With PARTS=1 it first prints how long the
// chunking alone and the naming alone take.
import Foundation
import ShareProtocol

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("share-bench-delta: \(message)\n".utf8))
    exit(1)
}

let args = Array(CommandLine.arguments.dropFirst())
guard args.first == "index", args.count >= 2 else { fail("usage: share-bench-delta index FILE") }
let path = args[1]
let fd = open(path, O_RDONLY)
guard fd >= 0 else { fail("cannot open \(path)") }
var info = stat()
fstat(fd, &info)
let size = UInt64(info.st_size)
let read = { (buffer: UnsafeMutableRawBufferPointer, offset: UInt64) throws -> Int in
    var filled = 0
    while filled < buffer.count {
        let n = pread(fd, buffer.baseAddress! + filled, buffer.count - filled, off_t(offset) + off_t(filled))
        if n <= 0 { break }
        filled += n
    }
    return filled
}
let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
var offset: UInt64 = 0
while offset < size { offset += UInt64(try read(buffer, offset)) }
if getenv("PARTS") != nil {
    let t0 = ContinuousClock.now
    var chunker = ContentChunker(.forSize(size))
    var cuts = 0
    offset = 0
    while offset < size {
        let n = try read(buffer, offset)
        chunker.feed(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) { _, _ in cuts += 1 }
        offset += UInt64(n)
    }
    let t1 = ContinuousClock.now
    var sum: UInt64 = 0
    offset = 0
    while offset < size {
        let n = try read(buffer, offset)
        for piece in stride(from: 0, to: n, by: 4096) {
            sum ^= XXH64.hash(UnsafeRawBufferPointer(rebasing: buffer[piece..<min(n, piece + 4096)]))
        }
        offset += UInt64(n)
    }
    let t2 = ContinuousClock.now
    print(
        "chunking \((t1 - t0) / .seconds(1)) s (\(cuts) chunks), naming 4 KiB pieces \((t2 - t1) / .seconds(1)) s (\(sum & 1))"
    )
}
buffer.deallocate()
let start = ContinuousClock.now
let index = try BasisIndex.build(item: "bench", size: size, read: read)
let seconds = (ContinuousClock.now - start) / .seconds(1)
var usage = rusage()
getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
print(
    String(
        format: "%llu %.3f %.2f %d %d %ld", size, seconds, Double(size) / seconds / 1e9, index.groups.count,
        index.encoded().count, usage.ru_maxrss))
