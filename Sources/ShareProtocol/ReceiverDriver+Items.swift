/// Opening where each item goes and carrying out the machine's actions (the choice, the announcement with what is
/// held, the verification of the whole item, the acknowledgement).
extension ReceiverDriver {
    /// Opens where the current item goes, when its first chunk (or its `done`, when every chunk was held) arrives.
    /// What it holds now must still include what its `resume` announced: another session may have changed it.
    func openCurrent(machine: ReceiverMachine, sink: ItemSink) throws {
        guard let index = machine.currentItem, incomingItem != index, let offer = machine.offer else { return }
        let item = offer.items[index]
        let chosen = item.representations[machine.choices[index].representation!]
        let digest = itemDigests.removeValue(forKey: index) ?? hasher.algorithm
        let opened = try sink.open(item: item, representation: chosen, chunkSize: offer.chunkSize, digest: digest)
        // A new pair only when the digest changes: the writer has drained the previous item before this one opens.
        if itemHasher.algorithm != digest {
            itemHasher = digest == hasher.algorithm ? hasher : hasher.make(digest)
            writerHasher = itemHasher.another()
        }
        let promised = announced.removeValue(forKey: index) ?? [:]
        for (chunk, digest) in promised where opened.held[chunk] != digest {
            opened.suspend()
            throw ProtocolError(
                .refused, "\(item.label) changed in another session while this one waited; send it again")
        }
        incoming = opened
        incomingItem = index
        let expected = chosen.size.map { ChunkMath.count(size: $0, chunkSize: offer.chunkSize) }
        digests = ItemDigest(chunks: expected ?? 0)
        for (chunk, digest) in promised { digests.record(chunk, digest) }
        let heldBytes = promised.keys.reduce(UInt64(0)) { total, chunk in
            let start = UInt64(chunk) * UInt64(offer.chunkSize)
            return total + (chosen.size.map { min($0, start + UInt64(offer.chunkSize)) - start } ?? 0)
        }
        summary.held += heldBytes
        events(.started(item: index, label: item.label, number: index + 1, total: chosen.size, held: heldBytes))
    }

    /// Performs actions; true when the batch is complete.
    func perform(_ actions: [ReceiverMachine.Action], machine: inout ReceiverMachine, sink: ItemSink) throws
        -> Bool
    {
        var queue = actions
        while !queue.isEmpty {
            let action = queue.removeFirst()
            switch action {
            case .sendSelect(let select):
                let offer = machine.offer!
                var total: UInt64 = 0
                for (index, (item, choice)) in zip(offer.items, select.choices).enumerated() {
                    let types = item.representations.map(\.contentType)
                    if let chosen = choice.representation {
                        total += item.representations[chosen].size ?? 0
                        events(
                            .chosen(
                                item: index, label: item.label, offered: types,
                                contentType: item.representations[chosen].contentType, reason: choice.reason))
                    } else {
                        summary.refused.append((item.label, choice.reason))
                        events(.refused(item: index, label: item.label, offered: types, reason: choice.reason))
                    }
                }
                events(.selected(count: select.choices.filter { $0.representation != nil }.count, totalBytes: total))
                try channel.send(.select, select)
            case .prepare(let index, let representation):
                let offer = machine.offer!
                let item = offer.items[index]
                let chosen = item.representations[representation]
                let expected = chosen.size.map { ChunkMath.count(size: $0, chunkSize: offer.chunkSize) }
                let found = try expected.map { _ in
                    try sink.held(item: item, representation: chosen, chunkSize: offer.chunkSize)
                }
                var held = expected.map { count in found?.digests.filter { $0.key < count } ?? [:] } ?? [:]
                // A partial recorded with SHA-256 (by an earlier version, or from an older peer) resumes with it:
                // every sender computes SHA-256. One recorded with a digest this session does not use starts over.
                var digest = hasher.algorithm
                if let found, !held.isEmpty, found.algorithm != digest {
                    if found.algorithm == .sha256 { digest = .sha256 } else { held = [:] }
                }
                announced[index] = held
                itemDigests[index] = digest
                var basis: ItemBasis?
                if delta, let size = chosen.size, size >= Delta.minimumSize, let expected, held.count < expected,
                    let found = sink.basis(item: item, representation: chosen, hasher: hasher)
                {
                    basis = found
                    bases[index] = found
                    var index = found.index
                    index.item = item.id
                    try channel.send(Frame(type: .basis, payload: index.encoded()))
                }
                queue =
                    try machine.prepared(
                        verified: Set(held.keys), digest: digest == hasher.algorithm ? nil : digest,
                        basis: basis != nil)
                    + queue
            case .sendResume(let resume):
                try channel.send(.resume, resume)
            case .write:
                break
            case .verify(let index, let done):
                let item = machine.offer!.items[index]
                events(.finished(item: index))
                guard let payload = incoming, incomingItem == index else {
                    throw ProtocolError(.internalError, "no item in progress")
                }
                // Every chunk of the item is written and checked before its whole digest is compared.
                if let writer {
                    for (chunk, digest) in try writer.drain() { digests.record(chunk, digest) }
                }
                incoming = nil
                incomingItem = nil
                bases[index] = nil
                guard digests.chunks.count == done.chunks, let root = digests.root(using: itemHasher),
                    root == done.digest.lowercased()
                else {
                    payload.discard()
                    throw ProtocolError(
                        .digestMismatch, "the whole-item digest of \(item.label) does not match; it was discarded")
                }
                let ack = try payload.complete(done: done)
                summary.delivered.append((item.label, ack))
                events(.completed(item: index, label: item.label, ack: ack))
                queue = try machine.verified(ack) + queue
            case .sendAck(let ack):
                try channel.send(.ack, ack)
            case .complete:
                return true
            }
        }
        return false
    }
}
