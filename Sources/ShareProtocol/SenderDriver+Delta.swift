/// Streaming an item as patches against the receiver's earlier version (see `Delta`): the driver's half of
/// `SenderDeltaRound`, which holds the round's order and checks.
extension SenderDriver {
    /// The bytes of an item, chunk by chunk, as many times as a delta needs them: read from a positional source,
    /// or made again by a sequential one (an archive's stream is the same bytes every time).
    enum DeltaBytes {
        case positional(PositionalSource)
        case sequential(SequentialSource)
    }

    /// Calls `body` with each chunk of `bytes` in order (`wanted` says which: the others are skipped where they can
    /// be); throws `sourceChanged` when the item is not `size` bytes any more.
    func eachChunk(
        _ bytes: DeltaBytes, size: UInt64, label: String, wanted: (Int) -> Bool,
        _ body: (Int, UnsafeRawBufferPointer) throws -> Void
    ) throws {
        let chunks = ChunkMath.count(size: size, chunkSize: chunkSize)
        let chunkSize = chunkSize
        switch bytes {
        case .positional(let source):
            try buffer.withUnsafeMutableBytes { raw in
                for chunk in 0..<chunks where wanted(chunk) {
                    let count = length(of: chunk, size: size)
                    let got = try source.read(
                        into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<count]),
                        at: UInt64(chunk) * UInt64(chunkSize))
                    guard got == count else {
                        throw ProtocolError(
                            .sourceChanged, "\(label) became shorter while it was being sent; run the command again")
                    }
                    try body(chunk, UnsafeRawBufferPointer(rebasing: raw[0..<count]))
                }
            }
        case .sequential(let source):
            var fill = 0
            var next = 0
            var total: UInt64 = 0
            try buffer.withUnsafeMutableBytes { raw in
                try source.produce { piece in
                    var offset = 0
                    while offset < piece.count {
                        let n = min(chunkSize - fill, piece.count - offset)
                        raw.baseAddress!.advanced(by: fill).copyMemory(
                            from: piece.baseAddress!.advanced(by: offset), byteCount: n)
                        fill += n
                        offset += n
                        total += UInt64(n)
                        if fill == chunkSize {
                            guard next < chunks else { throw Self.grew(label) }
                            if wanted(next) { try body(next, UnsafeRawBufferPointer(rebasing: raw[0..<fill])) }
                            next += 1
                            fill = 0
                        }
                    }
                }
                if fill > 0 || next == 0 {
                    guard next < chunks else { throw Self.grew(label) }
                    if wanted(next) { try body(next, UnsafeRawBufferPointer(rebasing: raw[0..<fill])) }
                    next += 1
                }
            }
            guard total == size, next == chunks else {
                throw ProtocolError(
                    .sourceChanged, "\(label) changed while it was being sent; run the command again to send it")
            }
        }
    }

    /// Streams the missing chunks of an item as patches against the receiver's basis (see `Delta`): the new version
    /// is read once, cut and named as the basis was; the chunks of the basis groups it did not find are asked for,
    /// then the sums of the basis blocks around what is still literal; then each missing chunk goes as basis ranges
    /// and literal bytes (the chunk's own bytes, read again). The receiver checks each chunk it makes against its
    /// digest and names those to send whole (its basis changed), which go before `done`.
    func streamDelta(
        _ bytes: DeltaBytes, size: UInt64, basis: BasisIndex, item: OfferItem, index: Int, held verified: Set<Int>,
        number: Int, hasher: ChunkHasher
    ) throws -> Done {
        let chunks = ChunkMath.count(size: size, chunkSize: chunkSize)
        let held = verified.filter { $0 < chunks }
        let heldBytes = held.reduce(UInt64(0)) { $0 + UInt64(length(of: $1, size: size)) }
        summary.held += heldBytes
        events(.started(item: index, label: item.label, number: number, total: size, held: heldBytes))
        var round = SenderDeltaRound(basis: basis, size: size, chunkSize: chunkSize, item: item.id)
        var digests = ItemDigest(chunks: chunks)
        // One pass over the new version: every chunk's digest, and its groups (with their chunks where the basis
        // has no such group).
        var indexer = DeltaIndexer(parameters: basis.parameters, keepChunks: true)
        try eachChunk(bytes, size: size, label: item.label, wanted: { _ in true }) { chunk, data in
            digests.record(chunk, hasher.digest(data))
            indexer.feed(data) { offset, group, parts in round.add(offset: offset, group: group, chunks: parts) }
        }
        indexer.finish { offset, group, parts in round.add(offset: offset, group: group, chunks: parts) }
        // The questions the basis leaves (its groups' chunks, then block sums around what is still literal).
        var question = round.indexed()
        while let asked = question, let answer = round.awaiting {
            try send { try channel.send(asked) }
            question = try round.answered(awaitFrame(answer))
        }
        let chunkSize = chunkSize
        try eachChunk(bytes, size: size, label: item.label, wanted: { !held.contains($0) }) { chunk, data in
            let start = UInt64(chunk) * UInt64(chunkSize)
            let (patch, literal) = round.patch(start: start, data: data)
            // A chunk that changed since its digest was taken makes the receiver ask for it again (below).
            guard let digest = digests.chunks[chunk] else {
                throw ProtocolError(.internalError, "a digest of \(item.label) is missing")
            }
            if literal == data.count || patch.count > chunkSize {
                // Nothing to copy: the chunk goes as it is (compressed when that pays).
                try sendChunk(data, index: chunk, digest: digest, packed: compressor?.compress(data))
                return
            }
            try readAnswers()
            try send {
                try patch.withUnsafeBytes {
                    try channel.sendBinary(.patch, header: ChunkHeader(index: chunk, digest: digest), data: $0)
                }
            }
            summary.wireBytes += UInt64(patch.count)
            summary.bytes += UInt64(data.count)
            summary.patchedBytes += UInt64(data.count - literal)
            events(.progress(bytes: data.count))
        }
        try send { try channel.send(.deltaEnd, round.end()) }
        let redo = try round.result(awaitFrame(.deltaResult), held: held)
        if !redo.isEmpty {
            try eachChunk(bytes, size: size, label: item.label, wanted: { redo.contains($0) }) { chunk, data in
                let digest = hasher.digest(data)
                guard digest == digests.chunks[chunk] else {
                    throw ProtocolError(
                        .sourceChanged, "\(item.label) changed while it was being sent; run the command again")
                }
                try sendChunk(data, index: chunk, digest: digest, packed: compressor?.compress(data))
            }
        }
        summary.redone += redo.count
        events(.finished(item: index))
        if case .positional(let source) = bytes { try source.checkUnchanged() }
        guard let root = digests.root(using: hasher) else {
            throw ProtocolError(.internalError, "a digest of \(item.label) is missing")
        }
        return Done(item: item.id, size: size, chunks: chunks, digest: root)
    }
}
