/// The receiving side of a delta round (`ReceiverMachine` holds its order and checks): chunks made from patches
/// against the earlier version, and the answers about that version the sender asks for.
extension ReceiverDriver {
    /// A chunk sent as a patch against the basis: made from the basis and the patch's literal bytes, compared with
    /// its digest here (a mismatch means the basis changed since it was indexed: the chunk is asked for whole at the
    /// end of the patches), then written as any chunk.
    func patched(
        header: ChunkHeader, length: Int, target: ChunkBuffer, large: Bool, machine: inout ReceiverMachine,
        ownPlain: inout ChunkBuffer?
    ) throws {
        guard let item = machine.currentItem, let expected = machine.expectedLength(of: header.index) else {
            throw ProtocolError(.badMessage, "patch \(header.index) is outside an item of known size")
        }
        let basis = bases[item]
        let plain = try plainBuffer(large: large, own: &ownPlain)
        var matched = true
        var copied = 0
        do {
            copied = try Patch.apply(
                UnsafeRawBufferPointer(rebasing: target.bytes[0..<length]), basisSize: basis?.index.size,
                length: expected, into: plain.bytes
            ) { buffer, offset in
                guard let reader = try openBasis(item: item, basis: basis) else { throw DeltaBasisChanged() }
                return try reader.read(into: buffer, at: offset)
            }.copied
        } catch is DeltaBasisChanged {
            matched = false
        } catch let error as ProtocolError {
            throw error
        } catch {
            // The basis could not be read: the chunk is redone whole.
            matched = false
        }
        // A chunk that is one range of the basis, whole: its blocks may be shared rather than copied.
        let whole = Patch.wholeCopy(UnsafeRawBufferPointer(rebasing: target.bytes[0..<length]), length: expected)
        if large { writer!.giveBack(target) }
        let data = UnsafeRawBufferPointer(rebasing: plain.bytes[0..<expected])
        if matched { matched = itemHasher.digest(data) == header.digest }
        var origin: ChunkOrigin?
        if matched, let whole { origin = try? openBasis(item: item, basis: basis)?.origin(at: whole, length: expected) }
        let actions = try machine.receivedPatch(index: header.index, length: expected, matched: matched)
        guard case .write(let index)? = actions.first, let payload = incoming else {
            if large { writer!.giveBack(plain) }
            return
        }
        if large {
            try writer!.submit(
                index: index, buffer: plain, length: expected, digest: header.digest, payload: payload,
                hasher: writerHasher, checked: true, origin: origin)
        } else {
            if let origin {
                try payload.write(index: index, bytes: data, digest: header.digest, origin: origin)
            } else {
                try payload.write(index: index, bytes: data, digest: header.digest)
            }
            digests.record(index, header.digest)
        }
        summary.bytes += UInt64(expected)
        if matched { summary.patchedBytes += UInt64(copied) }
        events(.progress(bytes: expected))
    }

    /// The basis of `item`, opened on its first use (nil when it changed or went away).
    func openBasis(item: Int, basis: ItemBasis?) throws -> BasisReader? {
        if let open = basisReader, open.item == item { return open.reader }
        closeBasis()
        let reader = basis.flatMap { try? $0.open() }
        basisReader = (item, reader)
        return reader
    }

    func closeBasis() {
        basisReader?.reader?.close()
        basisReader = nil
    }

    /// The sender asks for the chunks of some groups of the current item's basis: they are cut again from the
    /// basis (nothing of them is kept between the index and this question).
    func answer(query frame: Frame, machine: inout ReceiverMachine) throws {
        guard let current = machine.currentItem, let basis = bases[current] else {
            throw ProtocolError(.badMessage, "a basis query for an item without a basis")
        }
        let query = try BasisQuery.decode(
            frame.payload, groupCount: basis.index.groups.count, parameters: basis.index.parameters)
        let item = try machine.asked(.groups, about: query.item)
        let offsets = basis.index.offsets()
        let parameters = basis.index.parameters
        let reader = try openBasis(item: item, basis: basis)
        var buffer = [UInt8](repeating: 0, count: parameters.maxGroupLength)
        var groups: [[DeltaEntry]] = []
        for range in query.groups {
            for group in range.start..<range.end {
                let length = Int(basis.index.groups[group].length)
                var chunks: [DeltaEntry]?
                if let reader {
                    let n = try? buffer.withUnsafeMutableBytes { raw in
                        try reader.read(
                            into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<length]), at: offsets[group])
                    }
                    if n == length {
                        chunks = buffer.withUnsafeBytes { raw in
                            DeltaIndexer.chunks(
                                parameters: parameters,
                                bytes: UnsafeRawBufferPointer(rebasing: raw[0..<length]))
                        }
                    }
                }
                // A basis that changed is described by chunks that match nothing: its bytes come as literals.
                if chunks.map({ $0.reduce(0) { $0 + Int($1.length) } != length || $0.count > parameters.maxGroupChunks }
                )
                    ?? true
                {
                    chunks = stride(from: 0, to: length, by: parameters.maximum).map {
                        DeltaEntry(length: UInt32(min(parameters.maximum, length - $0)), id: 0)
                    }
                }
                groups.append(chunks!)
            }
        }
        try channel.send(Frame(type: .basisDetail, payload: BasisDetail(item: query.item, groups: groups).encoded()))
    }

    /// The sender asks for the sums of some blocks of the current item's basis (see `BlockQuery`). Blocks the basis no
    /// longer holds get a sum of 0: whatever the sender makes of it is checked against the chunk's digest.
    func answer(blocks frame: Frame, machine: inout ReceiverMachine) throws {
        guard let current = machine.currentItem, let basis = bases[current] else {
            throw ProtocolError(.badMessage, "a block query for an item without a basis")
        }
        let query = try BlockQuery.decode(frame.payload, basisSize: basis.index.size)
        let item = try machine.asked(.blockSums, about: query.item)
        let reader = try openBasis(item: item, basis: basis)
        var sums: [UInt32] = []
        sums.reserveCapacity(query.ranges.reduce(0) { $0 + $1.blocks })
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        for range in query.ranges {
            let size = 1 << range.blockBits
            var offset = range.firstBlock
            var left = range.blocks
            while left > 0 {
                let count = min(left, buffer.count / size)
                let want = count * size
                let got = reader.flatMap {
                    try? $0.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: offset)
                }
                for block in 0..<count {
                    if got == want {
                        sums.append(
                            BlockQuery.sum(
                                UnsafeRawBufferPointer(rebasing: buffer[(block * size)..<((block + 1) * size)])))
                    } else {
                        sums.append(0)
                    }
                }
                offset += UInt64(want)
                left -= count
            }
        }
        try channel.send(Frame(type: .blockSums, payload: BlockSums(item: query.item, sums: sums).encoded()))
    }
}
