// Delta benchmark: how fast a basis index is built, on one core, and how much memory it takes.
//   share-bench-delta index FILE [--digest blake3|sha256]
// Prints one line: bytes, seconds, GB/s, groups, index bytes, peak RSS in KiB (the file is read once to warm the page
// cache first, so the figure is the chunking and hashing, not the disk).
import Foundation
import ShareNet
import ShareProtocol

func option(_ name: String) -> String? {
    let args = CommandLine.arguments
    guard let index = args.firstIndex(of: name), index + 1 < args.count else { return nil }
    return args[index + 1]
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("share-bench-delta: \(message)\n".utf8))
    exit(1)
}

let args = Array(CommandLine.arguments.dropFirst())
guard args.first == "index", args.count >= 2 else {
    fail("usage: share-bench-delta index FILE [--digest blake3|sha256]")
}
let path = args[1]
let digest = DigestAlgorithm(rawValue: option("--digest") ?? "blake3") ?? .blake3
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
// Warm the page cache.
let warm = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
var offset: UInt64 = 0
while offset < size {
    offset += UInt64(try read(warm, offset))
}
warm.deallocate()
let start = ContinuousClock.now
let index = try BasisIndex.build(item: "bench", size: size, hasher: chunkHasher(digest), read: read)
let seconds = (ContinuousClock.now - start) / .seconds(1)
var usage = rusage()
getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
print(
    String(
        format: "%llu %.3f %.2f %d %d %ld", size, seconds, Double(size) / seconds / 1e9, index.groups.count,
        index.encoded().count, usage.ru_maxrss))
