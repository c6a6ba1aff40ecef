/// One chunk of the new version, as basis ranges and literal bytes: `copy (1) | offset (8) | length (4)` or
/// `literal (2) | length (4) | bytes`.
public enum PatchOp: Sendable, Equatable {
    case copy(offset: UInt64, length: Int)
    case literal(length: Int)

    static let copyTag: UInt8 = 1
    static let literalTag: UInt8 = 2
}

public enum Patch {
    /// Builds a chunk of `length` bytes from a patch: every copy must lie inside the basis (`basisSize` bytes; nil:
    /// there is none), every literal inside the patch, and together they must make exactly `length` bytes.
    public static func apply(
        _ patch: UnsafeRawBufferPointer, basisSize: UInt64?, length: Int, into output: UnsafeMutableRawBufferPointer,
        read: (UnsafeMutableRawBufferPointer, UInt64) throws -> Int
    ) throws -> (copied: Int, literal: Int) {
        var at = 0
        var filled = 0
        var copied = 0
        func take(_ n: Int) throws(ProtocolError) -> UnsafeRawBufferPointer {
            guard n >= 0, patch.count - at >= n else { throw ProtocolError(.badMessage, "a patch ends in an op") }
            defer { at += n }
            return UnsafeRawBufferPointer(rebasing: patch[at..<(at + n)])
        }
        func number(_ bytes: Int) throws(ProtocolError) -> UInt64 {
            var value: UInt64 = 0
            for byte in try take(bytes) { value = value << 8 | UInt64(byte) }
            return value
        }
        guard length <= output.count else { throw ProtocolError(.badMessage, "a patched chunk is too long") }
        while at < patch.count {
            let tag = try take(1)[0]
            switch tag {
            case PatchOp.copyTag:
                let offset = try number(8)
                let n = Int(try number(4))
                guard let basisSize else {
                    throw ProtocolError(.badMessage, "a patch copies from a basis this receiver did not offer")
                }
                guard n > 0, n <= length - filled, offset <= basisSize, UInt64(n) <= basisSize - offset else {
                    throw ProtocolError(
                        .badMessage, "a patch copies \(n) bytes at \(offset), outside the \(basisSize)-byte basis")
                }
                let destination = UnsafeMutableRawBufferPointer(rebasing: output[filled..<(filled + n)])
                let got = try read(destination, offset)
                guard got == n else { throw DeltaBasisChanged() }
                filled += n
                copied += n
            case PatchOp.literalTag:
                let n = Int(try number(4))
                guard n > 0, n <= length - filled else {
                    throw ProtocolError(.badMessage, "a patch's literal of \(n) bytes overruns its chunk")
                }
                let bytes = try take(n)
                UnsafeMutableRawBufferPointer(rebasing: output[filled..<(filled + n)]).copyMemory(from: bytes)
                filled += n
            default:
                throw ProtocolError(.badMessage, "a patch op of unknown kind \(tag)")
            }
        }
        guard filled == length else {
            throw ProtocolError(.badMessage, "a patch makes \(filled) bytes of a \(length)-byte chunk")
        }
        return (copied, length - copied)
    }
}

extension Patch {
    /// The basis offset of a patch that is one copy of the whole chunk (`length` bytes), nil for any other.
    public static func wholeCopy(_ patch: UnsafeRawBufferPointer, length: Int) -> UInt64? {
        guard patch.count == 13, patch[0] == PatchOp.copyTag else { return nil }
        var offset: UInt64 = 0
        for byte in patch[1..<9] { offset = offset << 8 | UInt64(byte) }
        var n = 0
        for byte in patch[9..<13] { n = n << 8 | Int(byte) }
        return n == length ? offset : nil
    }
}

/// The basis could not be read as indexed (it became shorter): the chunk is redone whole.
public struct DeltaBasisChanged: Error {
    public init() {}
}
