/// Small files edited where they are (a shared folder's pull): the puller describes the version it holds in blocks
/// — rsync's rolling sum folded to 16 bits and 32 bits of XXH64 each, 6 bytes a block — and the holder names, for
/// every byte of the new version, a block of that version or a literal byte. The result is a `Patch` (the ops of
/// delta transfer), built by the puller with `Patch.apply` from its own file and checked against the content digest
/// its index names. A file of up to `FolderFiles.largest` bytes costs its signature and about the bytes that
/// changed, with no round trip of its own.
///
/// The block size follows the file's size (about √(6 × size), a multiple of 16, from 64 to 1,024 bytes): an edit
/// costs about its own length plus one block of literal bytes, and the signature about one block, so this size makes
/// their sum least (a 10 KiB file: 256-byte blocks, a 1 KiB edit in place crosses in about 1.6 KiB with its
/// signature, against 2.1 KiB with fixed 1 KiB blocks). Signatures of fixed 1 KiB blocks with 32-bit sums (the
/// earlier form) are still read.
public enum SmallDelta {
    /// The earlier form's block size.
    public static let blockSize = 1024

    /// The block size for a version of `size` bytes.
    public static func blockSize(for size: Int) -> Int {
        let root = Int(Double(6 * max(size, 1)).squareRoot().rounded(.up))
        return min(1024, max(64, (root + 15) / 16 * 16))
    }

    /// The blocks of one version: the last may be shorter.
    public struct Signature: Sendable, Equatable {
        public var size: Int
        /// Bytes per block.
        public var block: Int
        /// Each block's rolling sum (folded to 16 bits when `folded`).
        public var weak: [UInt32]
        public var strong: [UInt32]
        /// Whether the rolling sums are folded to 16 bits (the current form) or whole (the earlier one).
        public var folded: Bool

        public init(of bytes: UnsafeRawBufferPointer) {
            size = bytes.count
            block = SmallDelta.blockSize(for: bytes.count)
            folded = true
            weak = []
            strong = []
            var start = 0
            while start < bytes.count {
                let part = UnsafeRawBufferPointer(rebasing: bytes[start..<min(start + block, bytes.count)])
                weak.append(Self.fold(RollingSum(part).value))
                strong.append(BlockQuery.sum(part))
                start += block
            }
        }

        init(size: Int, block: Int, weak: [UInt32], strong: [UInt32], folded: Bool) {
            self.size = size
            self.block = block
            self.weak = weak
            self.strong = strong
            self.folded = folded
        }

        static func fold(_ value: UInt32) -> UInt32 { (value ^ value >> 16) & 0xFFFF }

        /// What a block of the new version is looked up by.
        func key(_ sum: RollingSum) -> UInt32 { folded ? Self.fold(sum.value) : sum.value }

        /// The flag in the first word that says the current form.
        static let currentForm: UInt32 = 1 << 31

        /// `size | 1 << 31 (4) | block (2) | per block: weak (2), strong (4)`, big endian.
        public func encoded() -> [UInt8] {
            var out = WireWriter()
            out.u32(UInt32(size) | Self.currentForm)
            out.u16(UInt16(block))
            for (w, s) in zip(weak, strong) {
                out.u16(UInt16(truncatingIfNeeded: w))
                out.u32(s)
            }
            return out.bytes
        }

        /// Reads a signature from a peer: a size of at most `FolderFiles.largest`, a block of 16 to 65,535 bytes
        /// (the current form) or `size (4) | per 1 KiB block: weak (4), strong (4)` (the earlier one), one entry per
        /// block of that size.
        public static func decode(_ bytes: [UInt8]) throws(ProtocolError) -> Signature {
            var reader = WireReader(bytes, what: "block signature")
            let first = try reader.u32()
            let current = first & currentForm != 0
            let size = Int(first & ~currentForm)
            let block = current ? Int(try reader.u16()) : SmallDelta.blockSize
            let blocks = (size + block - 1) / max(block, 1)
            guard size <= FolderFiles.largest, block >= 16, reader.remaining == blocks * (current ? 6 : 8) else {
                throw ProtocolError(.badMessage, "a block signature that breaks its rules")
            }
            var weak: [UInt32] = []
            var strong: [UInt32] = []
            for _ in 0..<blocks {
                weak.append(current ? UInt32(try reader.u16()) : try reader.u32())
                strong.append(try reader.u32())
            }
            return Signature(size: size, block: block, weak: weak, strong: strong, folded: current)
        }
    }

    /// The patch that makes `new` from the version `signature` describes: copies of its blocks where `new` holds
    /// them (at any offset), literal bytes elsewhere.
    public static func patch(_ new: UnsafeRawBufferPointer, against signature: Signature) -> [UInt8] {
        let blockSize = signature.block
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
                if let blocks = byWeak[signature.key(sum)] {
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
            if signature.key(RollingSum(bytes)) == signature.weak[full], BlockQuery.sum(bytes) == signature.strong[full]
            {
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
