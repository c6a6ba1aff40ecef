import CShareArchive
import Foundation

/// zstd for single chunks in transit, through libarchive's zstd filter over its raw format (libarchive is linked
/// with libzstd; no other compression library is needed). One frame per chunk, so every chunk stays independently
/// verifiable and a resumed transfer never needs an earlier chunk to decode a later one.
public enum ZstdCodec {
    /// Compresses `bytes` at `level`; nil when the result would not be at least `worthIt` smaller (as a fraction of
    /// the input), so incompressible chunks go as they are.
    public static func compress(_ bytes: UnsafeRawBufferPointer, level: Int = 1, worthIt: Double = 0.05) -> [UInt8]? {
        _ = ArchiveLocale.ready
        guard !bytes.isEmpty, let handle = archive_write_new(), let entry = archive_entry_new() else { return nil }
        defer {
            archive_write_free(handle)
            archive_entry_free(entry)
        }
        let limit = Int(Double(bytes.count) * (1 - worthIt))
        var output = [UInt8](repeating: 0, count: limit + 64)
        var used = 0
        let ok = output.withUnsafeMutableBytes { out -> Bool in
            guard archive_write_set_format_raw(handle) == ARCHIVE_OK,
                archive_write_add_filter_zstd(handle) == ARCHIVE_OK,
                archive_write_set_filter_option(handle, "zstd", "compression-level", String(level)) == ARCHIVE_OK,
                archive_write_set_bytes_per_block(handle, 0) == ARCHIVE_OK,
                archive_write_open_memory(handle, out.baseAddress, out.count, &used) == ARCHIVE_OK
            else { return false }
            archive_entry_set_filetype(entry, cshare_ae_ifreg())
            archive_entry_set_pathname(entry, "chunk")
            archive_entry_set_size(entry, la_int64_t(bytes.count))
            guard archive_write_header(handle, entry) == ARCHIVE_OK,
                archive_write_data(handle, bytes.baseAddress, bytes.count) == bytes.count,
                archive_write_close(handle) == ARCHIVE_OK
            else { return false }
            return true
        }
        guard ok, used > 0, used <= limit else { return nil }
        output.removeSubrange(used...)
        return output
    }

    /// Decompresses one chunk into `output`, which must end up holding exactly `expected` bytes; anything else
    /// (a bad frame, more or fewer bytes) is an error.
    public static func decompress(
        _ bytes: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer, expected: Int
    ) throws {
        _ = ArchiveLocale.ready
        guard let handle = archive_read_new() else { throw ArchiveError(.io, "libarchive could not allocate a reader") }
        defer { archive_read_free(handle) }
        archive_read_support_filter_zstd(handle)
        archive_read_support_format_raw(handle)
        var entry: OpaquePointer?
        guard expected <= output.count, archive_read_open_memory(handle, bytes.baseAddress, bytes.count) == ARCHIVE_OK,
            archive_read_next_header(handle, &entry) == ARCHIVE_OK,
            archive_filter_code(handle, 0) == ARCHIVE_FILTER_ZSTD
        else { throw ArchiveError(.corrupt, "a compressed chunk is not a zstd frame") }
        var filled = 0
        while true {
            // One byte of room past the expected end, to notice a frame that decodes to more.
            let room = min(output.count - filled, expected - filled + 1)
            if room <= 0 { throw ArchiveError(.corrupt, "a compressed chunk decodes to more than its length") }
            let n = archive_read_data(handle, output.baseAddress! + filled, room)
            if n == 0 { break }
            guard n > 0 else {
                throw ArchiveError(.corrupt, "a compressed chunk is damaged: \(archiveMessage(handle, "zstd error"))")
            }
            filled += n
            if filled > expected { throw ArchiveError(.corrupt, "a compressed chunk decodes to more than its length") }
        }
        guard filled == expected else {
            throw ArchiveError(.corrupt, "a compressed chunk decodes to \(filled) bytes, not \(expected)")
        }
    }
}
