/// Delta transfer: a receiver that already holds an earlier version of an item (the basis) describes it, and the
/// sender sends each missing chunk of the new version as a patch — ranges to copy from the basis and the bytes the
/// basis lacks — instead of the chunk's bytes. The chunk grid, the chunk digests, the whole-item digest, the ledger
/// and the resume are those of every transfer: a patched chunk is checked against its digest before it is written.
///
/// Both ends cut their bytes the same way, into content-defined chunks (FastCDC: a Gear hash, normalized chunking),
/// grouped by the same content into groups of about 16 chunks. The receiver sends the groups of the basis (length and
/// a 6-byte id each: 9 bytes per ~64 KiB); the sender finds which of its own groups the basis holds, asks for the
/// chunks of the basis groups it did not find (the changed regions only), and names, for every byte of the new
/// version, a basis range or a literal. The literal regions left are then narrowed with fixed-size block sums of the
/// basis bytes around them (`BlockQuery`): an edit costs about what it changed whatever the chunk size. See
/// docs/PROTOCOL.md ("Delta transfer").
public enum Delta {
    /// The hello feature that says a device speaks delta transfer.
    public static let feature = "delta-2"
    /// Items smaller than this are always sent whole (a basis index would cost more than it saves).
    public static let minimumSize: UInt64 = 16 << 10
    /// The most groups a basis index holds (at 64 KiB a group, about 32 GiB): a larger basis is not used.
    public static let maxGroups = 1 << 19
    /// The most basis groups a sender asks the chunks of, for one item: as many as fit one detail frame however
    /// many chunks each holds (6 bytes a chunk), and at most 16 Ki.
    public static func maxQueriedGroups(_ parameters: DeltaParameters) -> Int {
        min(16 << 10, (maxPayload - 1024) / (parameters.maxGroupChunks * 6 + 2))
    }
    /// The most basis ranges one block query names, and the most block sums its answer holds (4 bytes each).
    public static let maxBlockRanges = 64 << 10
    public static let maxBlockSums = 1 << 20
    /// The most bytes of basis indexes a sender keeps for items not streamed yet; a basis beyond it is not used (the
    /// item goes whole).
    public static let maxHeldBases = 32 << 20
    /// The most chunks one group holds, whatever its parameters.
    public static let maxGroupChunks = 256
    /// Largest basis index or basis detail frame.
    public static let maxPayload = 8 << 20
}

/// How bytes are cut: the average chunk is 2^`fineBits` bytes (minimum a quarter, maximum four times), a group
/// ends at a chunk boundary whose hash also has `groupBits` more zero bits (about 2^`groupBits` chunks), or after
/// four times that many chunks.
public struct DeltaParameters: Sendable, Equatable {
    public var fineBits: Int
    public var groupBits: Int

    public init(fineBits: Int, groupBits: Int = 4) {
        self.fineBits = fineBits
        self.groupBits = groupBits
    }

    /// The valid values of `fineBits` and `groupBits`.
    public static let allowedFineBits = 9...12
    public static let allowedGroupBits = 3...6

    /// For a file: chunks of about 1 KiB under 1 MiB, 2 KiB under 64 MiB, 4 KiB above, in groups of about 16 — a
    /// small edit costs about what it changed, and the index (9 bytes a group) stays small. For a folder's tar
    /// stream, of many small files: 2 KiB chunks in groups of about 32, so that the index and the chunks of the
    /// changed groups stay small (an edit's bytes are narrowed down by block sums after the chunks are matched).
    public static func forSize(_ size: UInt64, archive: Bool = false) -> DeltaParameters {
        if archive { return DeltaParameters(fineBits: 11, groupBits: 5) }
        return DeltaParameters(fineBits: size < 1 << 20 ? 10 : size < 64 << 20 ? 11 : 12)
    }

    /// The most chunks one group holds.
    public var maxGroupChunks: Int { 4 << groupBits }

    public var average: Int { 1 << fineBits }
    public var minimum: Int { average / 4 }
    public var maximum: Int { average * 4 }
    /// The largest group: `maxGroupChunks` chunks of the largest size.
    public var maxGroupLength: Int { maxGroupChunks * maximum }
}
