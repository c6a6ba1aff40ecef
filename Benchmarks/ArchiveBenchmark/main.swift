import Foundation
import ShareArchive

// share-bench-archive DIR: writes the folder's tar stream (exactly what `share send DIR` streams) to standard
// output, so a script can time it beside `tar -cf - DIR` and `bsdtar -cf - DIR | zstd -1`. Output goes in 16 KiB
// writes, close to tar's 10 KiB records: on this machine the size of the writes into a pipe dominates such a
// measurement (`dd bs=10k | cat` moves 150 MiB in 0.10 s, `bs=64k` in 0.19 s, `bs=1M` in 0.24 s), and the point is
// to measure the bundler, not the pipe. Files are read in 16 KiB pieces for the same reason.
let arguments = CommandLine.arguments
guard arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: share-bench-archive DIR > stream.tar\n".utf8))
    exit(64)
}

/// Gathers headers and padding into 16 KiB pieces; file data goes straight to standard output.
final class ChunkedOutput {
    let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 << 10, alignment: 16)
    var fill = 0

    func append(_ bytes: UnsafeRawBufferPointer) throws {
        // Whole 16 KiB blocks of file data are written as they are (no copy); headers, padding and small files are
        // gathered into 16 KiB writes.
        if bytes.count >= chunk.count {
            try flush()
            try writeAll(bytes)
            return
        }
        var offset = 0
        while offset < bytes.count {
            let n = min(chunk.count - fill, bytes.count - offset)
            (chunk.baseAddress! + fill).copyMemory(from: bytes.baseAddress! + offset, byteCount: n)
            fill += n
            offset += n
            if fill == chunk.count { try flush() }
        }
    }

    func flush() throws {
        try writeAll(UnsafeRawBufferPointer(rebasing: chunk[0..<fill]))
        fill = 0
    }

    func writeAll(_ bytes: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < bytes.count {
            let n = write(1, bytes.baseAddress! + offset, bytes.count - offset)
            guard n > 0 else { throw ArchiveError(.io, "standard output: \(String(cString: strerror(errno)))") }
            offset += n
        }
    }
}

do {
    // The stream's size matters only to a sender's offer (computed there while nothing else happens); bundling
    // alone is the walk and the stream.
    let plan = try ArchivePlan.folder(URL(fileURLWithPath: arguments[1]), measure: false)
    let output = ChunkedOutput()
    let writer = try ArchiveWriter { try output.append($0) }
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 << 10, alignment: 16)
    defer { buffer.deallocate() }
    try plan.write(to: writer, buffer: buffer)
    try output.flush()
} catch {
    FileHandle.standardError.write(Data("share-bench-archive: \(error)\n".utf8))
    exit(1)
}
