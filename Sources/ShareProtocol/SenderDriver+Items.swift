import CoreTransferable

/// Streaming an item whole: from a positional source (read, hashed and compressed ahead on a thread of its own when
/// it is large) or a sequential one (an archive's stream), the chunks the receiver does not hold.
extension SenderDriver {
    /// Items with more chunks to send than this are read, hashed and compressed on a thread of their own (see
    /// `ChunkProducer`); smaller ones on the sending thread, where a thread would cost more than it saves.
    static let producerThreshold = 2

    func streamPositional(
        _ source: PositionalSource, item: OfferItem, index: Int, offered: OfferedRepresentation,
        held verified: Set<Int>, number: Int, hasher: ChunkHasher
    ) throws -> Done {
        let size = source.size
        if let expected = offered.size, expected != size {
            throw ProtocolError(
                .sourceChanged,
                "\(item.label) changed size since it was offered; run the command again to send the new version")
        }
        try checkNotURLToAFile(offered, source: source)
        if let basis = takeBasis(for: item.id), offered.size != nil {
            return try streamDelta(
                .positional(source), size: size, basis: basis, item: item, index: index, held: verified,
                number: number, hasher: hasher)
        }
        let chunks = ChunkMath.count(size: size, chunkSize: chunkSize)
        let held = verified.filter { $0 < chunks }.sorted()
        let heldBytes = held.reduce(UInt64(0)) { $0 + UInt64(length(of: $1, size: size)) }
        summary.held += heldBytes
        events(.started(item: index, label: item.label, number: number, total: size, held: heldBytes))
        let background = held.isEmpty ? nil : source.hashHeld(held, chunkSize: chunkSize, hasher: hasher.another())
        // Whatever ends this item, the hashing of held chunks stops before the source closes.
        defer { background?.cancel() }
        let compressor = offered.size != nil ? self.compressor : nil
        let heldSet = Set(held)
        var digests = ItemDigest(chunks: chunks)
        let size64 = size
        let chunkSize = chunkSize
        let label = item.label
        let read = { (chunk: Int, buffer: UnsafeMutableRawBufferPointer) throws -> Int in
            let start = UInt64(chunk) * UInt64(chunkSize)
            let wanted = Int(min(UInt64(chunkSize), size64 - min(size64, start)))
            let got = try source.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<wanted]), at: start)
            guard got == wanted else {
                throw ProtocolError(
                    .sourceChanged, "\(label) became shorter while it was being sent; run the command again")
            }
            return got
        }
        if chunks - held.count > Self.producerThreshold {
            let producer = ChunkProducer(
                chunkSize: chunkSize, depth: readAhead, hasher: hasher.another(), compressor: compressor,
                held: { heldSet.contains($0) }
            ) { emitter in
                for chunk in 0..<chunks where !heldSet.contains(chunk) {
                    try emitter.chunk(chunk) { try read(chunk, $0) }
                }
            }
            defer { producer.stop() }
            _ = try consume(producer, into: &digests, limit: chunks, label: label)
        } else {
            for chunk in 0..<chunks where !heldSet.contains(chunk) {
                let count = try buffer.withUnsafeMutableBytes { try read(chunk, $0) }
                try hashAndSend(
                    count, index: chunk, into: &digests, send: true, compressor: compressor, hasher: hasher)
            }
        }
        if let background {
            for (chunk, digest) in try background.wait() { digests.record(chunk, digest) }
        }
        events(.finished(item: index))
        try source.checkUnchanged()
        guard let root = digests.root(using: hasher) else {
            throw ProtocolError(.internalError, "a digest of \(item.label) is missing")
        }
        return Done(item: item.id, size: size, chunks: chunks, digest: root)
    }

    func streamSequential(
        _ source: SequentialSource, item: OfferItem, index: Int, offered: OfferedRepresentation,
        held verified: Set<Int>, number: Int, hasher: ChunkHasher
    ) throws -> Done {
        if let expected = offered.size, let size = source.size, expected != size {
            throw ProtocolError(
                .sourceChanged, "\(item.label) changed since it was offered; run the command again to send it")
        }
        let size = offered.size ?? source.size
        if let basis = takeBasis(for: item.id), let size, offered.size != nil {
            return try streamDelta(
                .sequential(source), size: size, basis: basis, item: item, index: index, held: verified,
                number: number, hasher: hasher)
        }
        let chunks = size.map { ChunkMath.count(size: $0, chunkSize: chunkSize) }
        let held = chunks.map { count in verified.filter { $0 < count } } ?? []
        let heldBytes = size.map { size in held.reduce(UInt64(0)) { $0 + UInt64(length(of: $1, size: size)) } } ?? 0
        summary.held += heldBytes
        events(.started(item: index, label: item.label, number: number, total: size, held: heldBytes))
        let compressor = size != nil ? self.compressor : nil
        var digests = ItemDigest(chunks: chunks ?? 0)
        let sent: (chunks: Int, bytes: UInt64)
        if let chunks, chunks - held.count > Self.producerThreshold {
            let producer = ChunkProducer(
                chunkSize: chunkSize, depth: readAhead, hasher: hasher.another(), compressor: compressor,
                held: { held.contains($0) }
            ) { emitter in
                try source.produce { try emitter.append($0) }
                try emitter.flush()
            }
            defer { producer.stop() }
            sent = try consume(producer, into: &digests, limit: chunks, label: item.label)
        } else {
            var fill = 0
            var next = 0
            var total: UInt64 = 0
            func emitChunk() throws {
                if let chunks, next >= chunks { throw Self.grew(item.label) }
                try hashAndSend(
                    fill, index: next, into: &digests, send: !held.contains(next), compressor: compressor,
                    hasher: hasher)
                next += 1
                fill = 0
            }
            try source.produce { bytes in
                var offset = 0
                while offset < bytes.count {
                    let n = min(chunkSize - fill, bytes.count - offset)
                    buffer.withUnsafeMutableBytes { destination in
                        destination.baseAddress!.advanced(by: fill).copyMemory(
                            from: bytes.baseAddress!.advanced(by: offset), byteCount: n)
                    }
                    fill += n
                    offset += n
                    total += UInt64(n)
                    if fill == chunkSize { try emitChunk() }
                }
            }
            if fill > 0 || next == 0 { try emitChunk() }
            sent = (next, total)
        }
        if let size, sent.bytes != size || sent.chunks != chunks {
            throw ProtocolError(
                .sourceChanged, "\(item.label) changed while it was being sent; run the command again to send it")
        }
        events(.finished(item: index))
        guard let root = digests.root(using: hasher) else {
            throw ProtocolError(.internalError, "a digest of \(item.label) is missing")
        }
        return Done(item: item.id, size: sent.bytes, chunks: sent.chunks, digest: root)
    }

    static func grew(_ label: String) -> ProtocolError {
        ProtocolError(.sourceChanged, "\(label) grew after it was offered; run the command again to send it")
    }

    /// Sends what a producer made, in order, recording every digest (of held chunks too); returns how many chunks
    /// and bytes it made.
    func consume(_ producer: ChunkProducer, into digests: inout ItemDigest, limit: Int, label: String)
        throws -> (chunks: Int, bytes: UInt64)
    {
        var chunks = 0
        var bytes: UInt64 = 0
        while let chunk = try producer.next() {
            guard chunk.index < limit else { throw Self.grew(label) }
            digests.record(chunk.index, chunk.digest)
            if chunk.send {
                try sendChunk(
                    UnsafeRawBufferPointer(rebasing: chunk.buffer.bytes[0..<chunk.count]), index: chunk.index,
                    digest: chunk.digest, packed: chunk.packed)
            }
            chunks = chunk.index + 1
            bytes += UInt64(chunk.count)
            producer.recycle(chunk.buffer)
        }
        return (chunks, bytes)
    }

    /// Hashes the first `count` bytes of the buffer as chunk `index` (each byte is hashed once, here), records the
    /// digest and, unless the receiver holds the chunk, sends it.
    func hashAndSend(
        _ count: Int, index: Int, into digests: inout ItemDigest, send: Bool, compressor: AdaptiveCompressor?,
        hasher: ChunkHasher
    ) throws {
        try buffer.withUnsafeBytes { raw in
            let bytes = UnsafeRawBufferPointer(rebasing: raw[0..<count])
            let digest = hasher.digest(bytes)
            digests.record(index, digest)
            if send { try sendChunk(bytes, index: index, digest: digest, packed: compressor?.compress(bytes)) }
        }
    }

    /// The engine's rule: no representation that crosses to another machine is a `file:` URL. Such a URL names a
    /// file on this machine only, and tells the receiver where the sender keeps it.
    func checkNotURLToAFile(_ offered: OfferedRepresentation, source: PositionalSource) throws {
        guard source.size <= 1 << 16, URLRule.mayBeURL(offered.contentType) else { return }
        var head = [UInt8](repeating: 0, count: 16)
        let n = try head.withUnsafeMutableBytes { try source.read(into: $0, at: 0) }
        if URLRule.isFileURL(Array(head[0..<n])) {
            throw ProtocolError(.refused, "a file: URL names a file on this machine only; it is never sent")
        }
    }
}

/// `file:` URLs never leave the machine.
public enum URLRule {
    /// Whether a representation of this type might carry a URL.
    public static func mayBeURL(_ contentType: String) -> Bool {
        let lower = contentType.lowercased()
        return lower == "public.url" || lower == "public.file-url" || lower.hasSuffix("url")
    }

    /// Whether the bytes start a `file:` URL (ignoring case and leading white space).
    public static func isFileURL(_ bytes: [UInt8]) -> Bool {
        let text = String(decoding: bytes, as: UTF8.self).drop { $0.isWhitespace }.lowercased()
        return text.hasPrefix("file:")
    }
}
