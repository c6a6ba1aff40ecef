import Foundation
import ShareArchive

// share-bench-archive DIR: writes the folder's tar stream (exactly what `share send DIR` streams) to standard
// output, so a script can time it beside `tar -cf - DIR` and `bsdtar -cf - DIR | zstd -1`.
let arguments = CommandLine.arguments
guard arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: share-bench-archive DIR > stream.tar\n".utf8))
    exit(64)
}
do {
    let plan = try ArchivePlan.folder(URL(fileURLWithPath: arguments[1]))
    let writer = try ArchiveWriter { bytes in
        var offset = 0
        while offset < bytes.count {
            let n = write(1, bytes.baseAddress! + offset, bytes.count - offset)
            guard n > 0 else { throw ArchiveError(.io, "standard output: \(String(cString: strerror(errno)))") }
            offset += n
        }
    }
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
    defer { buffer.deallocate() }
    try plan.write(to: writer, buffer: buffer)
} catch {
    FileHandle.standardError.write(Data("share-bench-archive: \(error)\n".utf8))
    exit(1)
}
