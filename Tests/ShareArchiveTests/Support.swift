import Foundation
import ShareArchive

/// The whole stream of `plan` in memory.
func streamBytes(_ plan: ArchivePlan) throws -> [UInt8] {
    var out: [UInt8] = []
    let writer = try ArchiveWriter { out += $0 }
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 16)
    defer { buffer.deallocate() }
    try plan.write(to: writer, buffer: buffer)
    return out
}
