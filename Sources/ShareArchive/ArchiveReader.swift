import CShareArchive
import FoundationEssentials
import Glibc

/// A libarchive reader over a file (any format and compression libarchive knows) or over a byte source fed in
/// whatever sizes arrive (tar only: the network form). One owner per `archive *`; confined to one thread.
public final class ArchiveReader {
    /// Fills the buffer with the next bytes of the stream; returns how many (0 at the end). Throwing stops reading.
    public typealias Source = (UnsafeMutableRawBufferPointer) throws -> Int

    private let handle: OpaquePointer
    private let context: SourceContext?
    private var current: OpaquePointer?
    /// Size of the input in bytes, when known (a file), for the expansion-ratio limit.
    public let inputSize: UInt64?

    /// Reads the file at `path`: tar in any variant, zip, cpio, 7z… with any compression filter.
    public init(file path: String) throws {
        _ = ArchiveLocale.ready
        guard let handle = archive_read_new() else { throw ArchiveError(.io, "libarchive could not allocate a reader") }
        self.handle = handle
        context = nil
        var info = stat()
        inputSize = stat(path, &info) == 0 ? UInt64(info.st_size) : nil
        archive_read_support_filter_all(handle)
        archive_read_support_format_all(handle)
        guard archive_read_open_filename(handle, path, 1 << 16) == ARCHIVE_OK else {
            let message = archiveMessage(handle, "cannot open \(path)")
            throw ArchiveError(errno == ENOENT ? .io : .corrupt, "\(path): \(message)")
        }
    }

    /// Reads a tar stream (pax, ustar, GNU), uncompressed or zstd, from `source`. `window` bytes of the latest input
    /// stay readable through `recentBytes` (headers are recovered from it for resumable extraction).
    public init(stream source: @escaping Source, blockSize: Int = 1 << 20) throws {
        _ = ArchiveLocale.ready
        guard let handle = archive_read_new() else { throw ArchiveError(.io, "libarchive could not allocate a reader") }
        self.handle = handle
        inputSize = nil
        let context = SourceContext(source: source, blockSize: blockSize)
        self.context = context
        archive_read_support_filter_none(handle)
        archive_read_support_filter_zstd(handle)
        archive_read_support_format_tar(handle)
        let opened = archive_read_open(
            handle, Unmanaged.passUnretained(context).toOpaque(), nil, readCallback, nil)
        guard opened == ARCHIVE_OK else {
            if let error = context.error { throw error }
            throw ArchiveError(.corrupt, "not a tar stream: \(archiveMessage(handle, "unknown format"))")
        }
    }

    deinit {
        archive_read_free(handle)
    }

    /// The next entry's metadata, or nil at the end of the archive.
    public func nextEntry() throws -> ArchiveEntryInfo? {
        var entry: OpaquePointer?
        let status = archive_read_next_header(handle, &entry)
        if status == ARCHIVE_EOF { return nil }
        guard status == ARCHIVE_OK || status == ARCHIVE_WARN, let entry else { throw readError("a header") }
        current = entry
        let path =
            archive_entry_pathname_utf8(entry).map { String(cString: $0) }
            ?? archive_entry_pathname(entry).map { String(cString: $0) } ?? ""
        let type = UInt32(archive_entry_filetype(entry)) & cshare_ae_ifmt()
        let kind: ArchiveEntryInfo.Kind
        if let hard = archive_entry_hardlink_utf8(entry) ?? archive_entry_hardlink(entry) {
            kind = .hardlink(String(cString: hard))
        } else if type == cshare_ae_ifreg() {
            kind = .file
        } else if type == cshare_ae_ifdir() {
            kind = .directory
        } else if type == cshare_ae_iflnk() {
            let target = archive_entry_symlink_utf8(entry) ?? archive_entry_symlink(entry)
            kind = .symlink(target.map { String(cString: $0) } ?? "")
        } else {
            kind = .special(Self.describe(type))
        }
        let size: UInt64? = archive_entry_size_is_set(entry) != 0 ? UInt64(max(0, archive_entry_size(entry))) : nil
        let modified: Int64? = archive_entry_mtime_is_set(entry) != 0 ? Int64(archive_entry_mtime(entry)) : nil
        return ArchiveEntryInfo(
            path: path, kind: kind, size: size, mode: UInt32(archive_entry_perm(entry)), modified: modified)
    }

    private static func describe(_ type: UInt32) -> String {
        switch type {
        case 0o020000: return "a character device"
        case 0o060000: return "a block device"
        case 0o010000: return "a FIFO"
        case 0o140000: return "a socket"
        default: return "a special file"
        }
    }

    /// The next block of the current entry's data and its offset in the entry, or nil at the entry's end.
    public func nextBlock() throws -> (bytes: UnsafeRawBufferPointer, offset: Int64)? {
        var buffer: UnsafeRawPointer?
        var size = 0
        var offset: la_int64_t = 0
        let status = archive_read_data_block(handle, &buffer, &size, &offset)
        if status == ARCHIVE_EOF { return nil }
        guard status == ARCHIVE_OK || status == ARCHIVE_WARN else { throw readError("data") }
        return (UnsafeRawBufferPointer(start: buffer, count: size), Int64(offset))
    }

    /// Where the current entry's header began in the (uncompressed) stream.
    public var headerPosition: Int64 { Int64(archive_read_header_position(handle)) }

    /// Input bytes consumed so far (compressed bytes, for a compressed archive).
    public var bytesRead: UInt64 { UInt64(max(0, archive_filter_bytes(handle, -1))) }

    /// Whether the input is compressed (a filter other than none).
    public var isCompressed: Bool { archive_filter_count(handle) > 1 }

    /// Up to `limit` input bytes from stream offset `start`, as far as the reader's recent window reaches; nil when
    /// `start` is no longer in it.
    public func recentBytes(from start: Int64, limit: Int) -> [UInt8]? {
        context?.recent(from: start, to: start + Int64(limit))
    }

    private func readError(_ what: String) -> Error {
        if let error = context?.error { return error }
        let message = archiveMessage(handle, "unreadable \(what)")
        return ArchiveError(.corrupt, "the archive is damaged or truncated (\(what)): \(message)")
    }
}

/// The source, two alternating buffers (the previous block stays readable while libarchive may still point into
/// it), and the first error the source threw.
private final class SourceContext {
    let source: ArchiveReader.Source
    var buffers: [UnsafeMutableRawBufferPointer]
    var starts: [Int64] = [0, 0]
    var lengths: [Int] = [0, 0]
    var which = 1
    var position: Int64 = 0
    var error: Error?

    init(source: @escaping ArchiveReader.Source, blockSize: Int) {
        self.source = source
        buffers = (0..<2).map { _ in
            UnsafeMutableRawBufferPointer.allocate(byteCount: blockSize, alignment: 16)
        }
    }

    deinit { buffers.forEach { $0.deallocate() } }

    func next() -> UnsafeRawBufferPointer? {
        which ^= 1
        do {
            let count = try source(buffers[which])
            starts[which] = position
            lengths[which] = count
            position += Int64(count)
            return UnsafeRawBufferPointer(rebasing: buffers[which][0..<count])
        } catch {
            self.error = error
            return nil
        }
    }

    func recent(from start: Int64, to end: Int64) -> [UInt8]? {
        guard start <= end else { return nil }
        var out: [UInt8] = []
        var cursor = start
        // Older block first, then the newer one.
        for index in [which ^ 1, which] where lengths[index] > 0 {
            let blockStart = starts[index]
            let blockEnd = blockStart + Int64(lengths[index])
            guard cursor >= blockStart, cursor < blockEnd, cursor < end else { continue }
            let upTo = min(end, blockEnd)
            out += buffers[index][Int(cursor - blockStart)..<Int(upTo - blockStart)]
            cursor = upTo
        }
        return cursor > start || start == end ? out : nil
    }
}

private func readCallback(
    _ archive: OpaquePointer?, _ client: UnsafeMutableRawPointer?, _ buffer: UnsafeMutablePointer<UnsafeRawPointer?>?
) -> la_ssize_t {
    guard let client, let buffer else { return -1 }
    let context = Unmanaged<SourceContext>.fromOpaque(client).takeUnretainedValue()
    guard let block = context.next() else { return -1 }
    buffer.pointee = block.baseAddress
    return la_ssize_t(block.count)
}
