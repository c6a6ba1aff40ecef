import CShareArchive
import FoundationEssentials

/// A libarchive writer: tar (pax) or zip, optionally zstd-compressed, into a file or a byte sink.
///
/// The sink is called with each block libarchive produces; writing through it is unbuffered, so stream bytes go
/// straight to the consumer (a connection) with no temporary file. One owner per `archive *`; confined to one thread.
public final class ArchiveWriter {
    public enum Format: Sendable {
        /// POSIX pax (ustar plus extended headers only when needed), the default.
        case pax
        /// zip: only as a file format (streamed zip loses symlinks and permissions on read).
        case zip
    }

    public enum Compression: Sendable, Equatable {
        case none
        case zstd(level: Int)
    }

    /// The consumer of the stream; throwing stops the archive.
    public typealias Sink = (UnsafeRawBufferPointer) throws -> Void

    private let handle: OpaquePointer
    private let context: SinkContext?
    private let entry: OpaquePointer
    private var finished = false

    /// Writes to `sink`, unbuffered.
    public init(format: Format = .pax, compression: Compression = .none, sink: @escaping Sink) throws {
        _ = ArchiveLocale.ready
        guard let handle = archive_write_new(), let entry = archive_entry_new() else {
            throw ArchiveError(.io, "libarchive could not allocate a writer")
        }
        self.handle = handle
        self.entry = entry
        context = SinkContext(sink: sink)
        try configure(format: format, compression: compression)
        archive_write_set_bytes_per_block(handle, 0)
        archive_write_set_bytes_in_last_block(handle, 1)
        let opened = archive_write_open2(
            handle, Unmanaged.passUnretained(context!).toOpaque(), nil, writeCallback, nil, nil)
        guard opened == ARCHIVE_OK else {
            throw ArchiveError(.io, archiveMessage(handle, "cannot start the archive"))
        }
    }

    /// Writes to the file at `path` (created or truncated).
    public init(file path: String, format: Format, compression: Compression = .none) throws {
        _ = ArchiveLocale.ready
        guard let handle = archive_write_new(), let entry = archive_entry_new() else {
            throw ArchiveError(.io, "libarchive could not allocate a writer")
        }
        self.handle = handle
        self.entry = entry
        context = nil
        try configure(format: format, compression: compression)
        guard archive_write_open_filename(handle, path) == ARCHIVE_OK else {
            throw ArchiveError(.io, archiveMessage(handle, "cannot create \(path)"))
        }
    }

    private func configure(format: Format, compression: Compression) throws {
        var status: Int32
        switch format {
        case .pax: status = archive_write_set_format_pax_restricted(handle)
        case .zip: status = archive_write_set_format_zip(handle)
        }
        guard status == ARCHIVE_OK else { throw ArchiveError(.io, archiveMessage(handle, "unsupported format")) }
        if case .zstd(let level) = compression {
            guard archive_write_add_filter_zstd(handle) == ARCHIVE_OK,
                archive_write_set_filter_option(handle, "zstd", "compression-level", String(level)) == ARCHIVE_OK
            else { throw ArchiveError(.io, archiveMessage(handle, "zstd is not available")) }
        }
    }

    deinit {
        if !finished {
            // An archive abandoned half way (its consumer failed, or the transfer was interrupted). libarchive 3.6
            // frees its output state only in close, and `archive_write_free` skips close once the archive is marked
            // failed: close it here, its last bytes dropped rather than sent.
            context?.abandoned = true
            archive_write_fail(handle)
            archive_write_close(handle)
        }
        archive_write_free(handle)
        archive_entry_free(entry)
    }

    /// Writes one entry's header; a file's data follows through `writeData`.
    public func writeHeader(_ info: ArchiveEntryInfo) throws {
        archive_entry_clear(entry)
        archive_entry_set_pathname_utf8(entry, info.path)
        switch info.kind {
        case .file:
            archive_entry_set_filetype(entry, cshare_ae_ifreg())
            archive_entry_set_size(entry, la_int64_t(info.size ?? 0))
        case .directory:
            archive_entry_set_filetype(entry, cshare_ae_ifdir())
        case .symlink(let target):
            archive_entry_set_filetype(entry, cshare_ae_iflnk())
            archive_entry_set_symlink_utf8(entry, target)
        case .hardlink(let target):
            archive_entry_set_filetype(entry, cshare_ae_ifreg())
            archive_entry_set_hardlink_utf8(entry, target)
        case .special(let what):
            throw ArchiveError(.unsafeEntry, "\(info.path): share does not archive \(what)")
        }
        archive_entry_set_perm(entry, mode_t(info.mode & 0o777))
        if let modified = info.modified { archive_entry_set_mtime(entry, time_t(modified), 0) }
        let status = archive_write_header(handle, entry)
        if status != ARCHIVE_OK { try fail(status, "cannot write the header of \(info.path)") }
    }

    public func writeData(_ bytes: UnsafeRawBufferPointer) throws {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        let written = archive_write_data(handle, base, bytes.count)
        if written < 0 { try fail(Int32(written), "cannot write archive data") }
    }

    /// Ends the archive (trailer blocks, compressor flush) and closes it.
    public func finish() throws {
        guard !finished else { return }
        let status = archive_write_close(handle)
        finished = true
        if status != ARCHIVE_OK { try fail(status, "cannot finish the archive") }
    }

    private func fail(_ status: Int32, _ what: String) throws {
        if let error = context?.error { throw error }
        if status == ARCHIVE_WARN { return }
        throw ArchiveError(.io, "\(what): \(archiveMessage(handle, "libarchive error \(status)"))")
    }
}

/// The sink and the first error it threw (libarchive sees only -1).
private final class SinkContext {
    let sink: ArchiveWriter.Sink
    var error: Error?
    /// Set when the archive is abandoned: whatever libarchive still writes goes nowhere.
    var abandoned = false
    init(sink: @escaping ArchiveWriter.Sink) { self.sink = sink }
}

private func writeCallback(
    _ archive: OpaquePointer?, _ client: UnsafeMutableRawPointer?, _ buffer: UnsafeRawPointer?, _ length: Int
) -> la_ssize_t {
    guard let client else { return -1 }
    let context = Unmanaged<SinkContext>.fromOpaque(client).takeUnretainedValue()
    if context.abandoned { return -1 }
    do {
        try context.sink(UnsafeRawBufferPointer(start: buffer, count: length))
        return la_ssize_t(length)
    } catch {
        context.error = error
        return -1
    }
}
