/// The kind of a frame; the byte on the wire.
public enum FrameType: UInt8, Sendable, CaseIterable {
    case hello = 0x01
    case error = 0x02
    case ping = 0x03
    case pong = 0x04
    case pairDecision = 0x05
    /// Pairing: a commitment to a nonce, before either side reveals its own.
    case pairCommit = 0x06
    /// Pairing: the nonce, sent only once the other side's commitment has arrived.
    case pairReveal = 0x07
    /// Signed trust notices (a revocation, a key rotation) carried between the owner's devices.
    case trustNotices = 0x08
    /// How many of them were new to the receiver.
    case trustNoticesTaken = 0x09
    case offer = 0x10
    case select = 0x11
    case resume = 0x12
    case data = 0x13
    case chunk = 0x14
    case done = 0x15
    case ack = 0x16
    /// A chunk whose data is one zstd frame (the digest is of the decompressed bytes).
    case zchunk = 0x17
    /// The receiver's answer to an offer its user must accept first: held as pending, to be offered again.
    case held = 0x18
    /// Asks an agent for its clipboard item: the agent answers as a sender (offer, chunks, done), or, with `peek`,
    /// with one `clipboardInfo`.
    /// Delta transfer (see `Delta`): the receiver's index of the basis it holds for an item (before its `resume`),
    /// the sender's question for the chunks of some basis groups and the receiver's answer, a chunk sent as a patch
    /// against the basis, the end of an item's patches and the receiver's answer (chunks to send whole).
    case basis = 0x19
    case basisQuery = 0x1A
    case basisDetail = 0x1B
    case patch = 0x1C
    case deltaEnd = 0x1D
    case deltaResult = 0x1E
    /// Delta transfer: the sender's question for block sums of some basis ranges, and the receiver's answer.
    case blockQuery = 0x22
    case blockSums = 0x23
    /// Shared folders: the folders each side shares and where its index stands (the first frame of a folder link,
    /// each way), entries of an index since a sequence, and a pull of files (the first frame of a pull session).
    case folderHello = 0x30
    case indexUpdate = 0x31
    case folderPull = 0x32
    /// On a folder link: "send me these" (`FolderPull`), when the asking side cannot open a session to the other
    /// (the other opened the link); the other then opens a session to it whose first frame is `folderPush`.
    case folderAsk = 0x33
    /// The first frame of a session that brings files asked for with `folderAsk` (`FolderPull`: what follows).
    case folderPush = 0x34
    /// A pull's small files, whole, several to a frame (`FolderFiles`, binary), before its larger files' transfer;
    /// then `folderFilesEnd` (`FolderFilesEnd`): whether a transfer follows.
    case folderFiles = 0x35
    case folderFilesEnd = 0x36
    case clipboardRequest = 0x20
    case clipboardInfo = 0x21
    case bye = 0x1F

    /// Binary frames carry bytes; every other frame carries one JSON object.
    public var isBinary: Bool { self == .data || self == .chunk || self == .zchunk || self == .patch }

    /// The largest payload a peer may send in a frame of this type.
    public var maxPayload: Int {
        switch self {
        case .data, .chunk, .zchunk, .patch, .folderFiles: return Limits.maxChunkPayload
        case .basis, .basisDetail, .blockSums: return Delta.maxPayload
        case .indexUpdate: return Limits.maxIndexPayload
        case .offer, .select, .folderPull, .folderAsk, .folderPush: return Limits.maxOfferPayload
        default: return Limits.maxControlPayload
        }
    }
}

/// One length-prefixed frame: `type (1) | length (4, big endian) | payload`.
public struct Frame: Sendable, Equatable {
    public var type: FrameType
    public var payload: [UInt8]

    public init(type: FrameType, payload: [UInt8]) {
        self.type = type
        self.payload = payload
    }

    /// Whether the payload is within its type's limit (a peer would refuse the frame otherwise).
    public var isWithinLimit: Bool { payload.count <= type.maxPayload }

    /// The frame's bytes on the wire.
    public func encoded() -> [UInt8] {
        var bytes = Frame.header(type: type, length: payload.count)
        bytes += payload
        return bytes
    }

    /// A frame header for `length` bytes of payload (callers check `length` against `type.maxPayload`).
    public static func header(type: FrameType, length: Int) -> [UInt8] {
        let n = UInt32(clamping: length)
        return [type.rawValue, UInt8(n >> 24), UInt8((n >> 16) & 0xFF), UInt8((n >> 8) & 0xFF), UInt8(n & 0xFF)]
    }
}

extension Frame {
    /// Validates a 5-byte header: known type, length within that type's limit.
    public static func parseHeader(_ header: ArraySlice<UInt8>) throws(ProtocolError) -> (FrameType, Int) {
        let bytes = Array(header)
        precondition(bytes.count == Limits.frameHeaderSize)
        guard let type = FrameType(rawValue: bytes[0]) else {
            throw ProtocolError(.badFrame, "unknown frame type 0x\(String(bytes[0], radix: 16))")
        }
        let length = Int(bytes[1]) << 24 | Int(bytes[2]) << 16 | Int(bytes[3]) << 8 | Int(bytes[4])
        guard length <= type.maxPayload else {
            throw ProtocolError(
                .frameTooLarge, "\(type) frame of \(length) bytes exceeds the limit of \(type.maxPayload)")
        }
        return (type, length)
    }
}
