/// Named limits; every length read from a peer is checked against one of these before anything is allocated.
public enum Limits {
    /// The newest protocol version this build speaks.
    public static let protocolVersion = 4
    /// The oldest protocol version this build still speaks: two peers talk when their ranges overlap, at the newer
    /// version both speak. (Version 1 paired without commitments and is not spoken any more; version 3 added
    /// previews and held offers; version 4 pipelines items: a receiver announces many items ahead and a sender streams
    /// each as soon as it may, without waiting for the acknowledgement of the one before.)
    public static let oldestProtocolVersion = 2
    /// Largest control message (JSON): hello, offer, select, resume, done, error.
    public static let maxControlPayload = 1 << 20
    /// Largest offer (JSON): up to 10,000 items with their representations and declarations.
    public static let maxOfferPayload = 16 << 20
    /// Largest binary frame: one chunk of file data plus its small header.
    public static let maxChunkPayload = (4 << 20) + 64
    /// Frame header: type (1 byte) + payload length (4 bytes, big endian).
    public static let frameHeaderSize = 5
    /// Largest item size a peer may announce (1 PiB): keeps every size computation far from overflow.
    public static let maxItemSize: UInt64 = 1 << 50
    /// Longest device name accepted from a peer.
    public static let maxDeviceName = 128
    /// Most entries in an accept list, and most declarations in one message.
    public static let maxAcceptEntries = 256
    public static let maxDeclarations = 256
    /// Shared folders: most folders in a hello, devices sharing one (and counters in a version), and bytes in a path
    /// or a link's target.
    public static let maxFolders = 1024
    public static let maxFolderDevices = 64
    public static let maxPathBytes = 4096
    /// Largest counter of a version a peer may send: a device raises its counter to the clock's seconds or by one,
    /// so none comes near it, and one at the top of the range could not be raised again.
    public static let maxVersionCounter: UInt64 = 1 << 62
    /// Largest index update (binary): a few thousand entries; a larger index crosses as several.
    public static let maxIndexPayload = 4 << 20
}
