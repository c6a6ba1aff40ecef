/// XXH64 (Yann Collet's xxHash, 64-bit, seed 0): the ids of chunks and groups. Ids only find bytes the other end may
/// already hold; every chunk made from them is checked against its digest, so a collision costs a chunk sent again,
/// never a wrong byte kept — and this hash runs at several GB/s where a cryptographic one would halve the index's
/// speed.
public enum XXH64 {
    static let p1: UInt64 = 0x9E37_79B1_85EB_CA87
    static let p2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    static let p3: UInt64 = 0x1656_67B1_9E37_79F9
    static let p4: UInt64 = 0x85EB_CA77_C2B2_AE63
    static let p5: UInt64 = 0x27D4_EB2F_1656_67C5

    @inline(__always) static func rotl(_ x: UInt64, _ r: UInt64) -> UInt64 { (x &<< r) | (x &>> (64 - r)) }

    @inline(__always) static func round(_ acc: UInt64, _ input: UInt64) -> UInt64 {
        rotl(acc &+ input &* p2, 31) &* p1
    }

    @inline(__always) static func merge(_ acc: UInt64, _ value: UInt64) -> UInt64 {
        (acc ^ round(0, value)) &* p1 &+ p4
    }

    public static func hash(_ bytes: UnsafeRawBufferPointer, seed: UInt64 = 0) -> UInt64 {
        let count = bytes.count
        guard let base = bytes.baseAddress else { return avalanche(seed &+ p5) }
        var at = 0
        var h: UInt64
        if count >= 32 {
            var v1 = seed &+ p1 &+ p2
            var v2 = seed &+ p2
            var v3 = seed
            var v4 = seed &- p1
            while at + 32 <= count {
                v1 = round(v1, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: at, as: UInt64.self)))
                v2 = round(v2, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: at + 8, as: UInt64.self)))
                v3 = round(v3, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: at + 16, as: UInt64.self)))
                v4 = round(v4, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: at + 24, as: UInt64.self)))
                at += 32
            }
            h = rotl(v1, 1) &+ rotl(v2, 7) &+ rotl(v3, 12) &+ rotl(v4, 18)
            h = merge(h, v1)
            h = merge(h, v2)
            h = merge(h, v3)
            h = merge(h, v4)
        } else {
            h = seed &+ p5
        }
        h = h &+ UInt64(count)
        while at + 8 <= count {
            h ^= round(0, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: at, as: UInt64.self)))
            h = rotl(h, 27) &* p1 &+ p4
            at += 8
        }
        if at + 4 <= count {
            h ^= UInt64(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: at, as: UInt32.self))) &* p1
            h = rotl(h, 23) &* p2 &+ p3
            at += 4
        }
        while at < count {
            h ^= UInt64(base.load(fromByteOffset: at, as: UInt8.self)) &* p5
            h = rotl(h, 11) &* p1
            at += 1
        }
        return avalanche(h)
    }

    @inline(__always) static func avalanche(_ value: UInt64) -> UInt64 {
        var h = value
        h ^= h >> 33
        h = h &* p2
        h ^= h >> 29
        h = h &* p3
        h ^= h >> 32
        return h
    }
}
