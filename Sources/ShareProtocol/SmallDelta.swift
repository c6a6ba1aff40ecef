/// Small files edited where they are (a shared folder's pull): the puller describes the version it holds in 1 KiB
/// blocks — rsync's rolling sum and 32 bits of XXH64 each, 8 bytes a block — and the holder names, for every byte
/// of the new version, a block of that version or a literal byte. The result is a `Patch` (the ops of delta
/// transfer), built by the puller with `Patch.apply` from its own file and checked against the content digest its
/// index names. A file of up to `FolderFiles.largest` bytes costs its signature (at most 512 bytes) and about the
/// bytes that changed, with no round trip of its own.
public enum SmallDelta {
    public static let blockSize = 1024

    /// The blocks of one version: the last may be shorter.
    public struct Signature: Sendable, Equatable {
        public var size: Int
        public var weak: [UInt32]
        public var strong: [UInt32]

        public init(of bytes: UnsafeRawBufferPointer) {
            size = bytes.count
            weak = []
            strong = []
            var start = 0
            while start < bytes.count {
                let block = UnsafeRawBufferPointer(rebasing: bytes[start..<min(start + blockSize, bytes.count)])
                weak.append(RollingSum(block).value)
                strong.append(BlockQuery.sum(block))
                start += blockSize
            }
        }

        init(size: Int, weak: [UInt32], strong: [UInt32]) {
            self.size = size
            self.weak = weak
            self.strong = strong
        }

        /// `size (4) | per block: weak (4), strong (4)`, big endian.
        public func encoded() -> [UInt8] {
            var out = WireWriter()
            out.u32(UInt32(size))
            for (w, s) in zip(weak, strong) {
                out.u32(w)
                out.u32(s)
            }
            return out.bytes
        }

        /// Reads a signature from a peer: a size of at most `FolderFiles.largest`, one entry per block of it.
        public static func decode(_ bytes: [UInt8]) throws(ProtocolError) -> Signature {
            var reader = WireReader(bytes, what: "block signature")
            let size = Int(try reader.u32())
            let blocks = (size + blockSize - 1) / blockSize
            guard size <= FolderFiles.largest, reader.remaining == blocks * 8 else {
                throw ProtocolError(.badMessage, "a block signature that breaks its rules")
            }
            var weak: [UInt32] = []
            var strong: [UInt32] = []
            for _ in 0..<blocks {
                weak.append(try reader.u32())
                strong.append(try reader.u32())
            }
            return Signature(size: size, weak: weak, strong: strong)
        }
    }

    /// The patch that makes `new` from the version `signature` describes: copies of its blocks where `new` holds
    /// them (at any offset), literal bytes elsewhere.
    public static func patch(_ new: UnsafeRawBufferPointer, against signature: Signature) -> [UInt8] {
        var out = WireWriter()
        var literalFrom = 0
        // The last copy, grown while the blocks it copies follow each other.
        var pending: (offset: Int, length: Int)?
        func flushCopy() {
            guard let copy = pending else { return }
            out.u8(PatchOp.copyTag)
            out.u64(UInt64(copy.offset))
            out.u32(UInt32(copy.length))
            pending = nil
        }
        func literal(upTo end: Int) {
            guard end > literalFrom else { return }
            flushCopy()
            out.u8(PatchOp.literalTag)
            out.u32(UInt32(end - literalFrom))
            out.bytes += UnsafeRawBufferPointer(rebasing: new[literalFrom..<end])
        }
        func copy(block: Int, at position: Int, length: Int) {
            literal(upTo: position)
            let offset = block * blockSize
            if let last = pending, last.offset + last.length == offset {
                pending = (last.offset, last.length + length)
            } else {
                flushCopy()
                pending = (offset, length)
            }
            literalFrom = position + length
        }
        // Full blocks by their rolling sum.
        let full = signature.size / blockSize
        var byWeak: [UInt32: [Int]] = [:]
        for block in 0..<full { byWeak[signature.weak[block], default: []].append(block) }
        var position = 0
        if !byWeak.isEmpty, new.count >= blockSize {
            var sum = RollingSum(UnsafeRawBufferPointer(rebasing: new[0..<blockSize]))
            while true {
                var matched = false
                if let blocks = byWeak[sum.value] {
                    let strong = BlockQuery.sum(UnsafeRawBufferPointer(rebasing: new[position..<position + blockSize]))
                    if let block = blocks.first(where: { signature.strong[$0] == strong }) {
                        copy(block: block, at: position, length: blockSize)
                        position += blockSize
                        matched = true
                        guard position + blockSize <= new.count else { break }
                        sum = RollingSum(UnsafeRawBufferPointer(rebasing: new[position..<position + blockSize]))
                    }
                }
                if !matched {
                    guard position + blockSize < new.count else { break }
                    sum.roll(out: new[position], in: new[position + blockSize])
                    position += 1
                }
            }
        }
        // The last, shorter block, when the new version ends with it.
        let tail = signature.size - full * blockSize
        if tail > 0, new.count - tail >= literalFrom {
            let start = new.count - tail
            let bytes = UnsafeRawBufferPointer(rebasing: new[start..<new.count])
            if RollingSum(bytes).value == signature.weak[full], BlockQuery.sum(bytes) == signature.strong[full] {
                copy(block: full, at: start, length: tail)
            }
        }
        literal(upTo: new.count)
        flushCopy()
        return out.bytes
    }
}

/// rsync's weak checksum of a block: `a` the sum of its bytes, `b` the sum of each byte times its distance from
/// the end, both modulo 2^16; rolled a byte at a time.
struct RollingSum {
    var a: UInt32 = 0
    var b: UInt32 = 0
    let length: UInt32

    init(_ block: UnsafeRawBufferPointer) {
        length = UInt32(block.count)
        for (index, byte) in block.enumerated() {
            a &+= UInt32(byte)
            b &+= (length - UInt32(index)) &* UInt32(byte)
        }
        a &= 0xFFFF
        b &= 0xFFFF
    }

    var value: UInt32 { a | b << 16 }

    mutating func roll(out old: UInt8, in new: UInt8) {
        a = (a &- UInt32(old) &+ UInt32(new)) & 0xFFFF
        b = (b &- length &* UInt32(old) &+ a) & 0xFFFF
    }
}
