import ShareProtocol
import Testing

/// A folder added or accepted while a link is up is said on that link: the peer hears the new list, and the index
/// of a folder it offered starts at once, both ways, without making the link again.
@Suite struct FolderLinkMachineTests {
    static let folder = "abcde-fghij-klmno"
    static let other = "pqrst-uvwxy-zabcd"

    func announcement(_ id: String, index: String, sequence: UInt64, held: String = "", have: UInt64 = 0)
        -> FolderAnnouncement
    {
        FolderAnnouncement(
            id: id, label: "thesis", type: "send-receive", devices: ["A", "B"], indexID: index, sequence: sequence,
            heldIndexID: held, heldSequence: have)
    }

    func update(from: UInt64, to: UInt64, index: String) -> IndexUpdate {
        IndexUpdate(folder: Self.folder, indexID: index, from: from, to: to, records: [])
    }

    @Test func aFolderAcceptedWhileLinkedSharesOnTheSameLink() throws {
        // A shares the folder (5 entries recorded); B has only another folder, shared with A too.
        var a = FolderLinkMachine(local: [
            announcement(Self.folder, index: "a1", sequence: 5), announcement(Self.other, index: "a2", sequence: 0),
        ])
        var b = FolderLinkMachine(local: [announcement(Self.other, index: "b2", sequence: 0)])
        #expect(
            try b.received(a.hello) == [
                .offered(announcement(Self.folder, index: "a1", sequence: 5)),
                .sendIndex(folder: Self.other, since: 0),
            ])
        #expect(try a.received(b.hello) == [.sendIndex(folder: Self.other, since: 0)])
        #expect(!a.shares(Self.folder) && !b.shares(Self.folder))
        // An update of a folder the link does not share yet is refused.
        #expect(throws: ProtocolError.self) { try b.received(update(from: 0, to: 5, index: "a1"), held: nil) }

        // B accepts: its new hello, and its (new, empty) index of the folder from the start.
        let announced = b.announce([
            announcement(Self.other, index: "b2", sequence: 0), announcement(Self.folder, index: "b1", sequence: 0),
        ])
        let (hello, actions) = try #require(announced)
        #expect(actions == [.sendIndex(folder: Self.folder, since: 0)])
        #expect(b.shares(Self.folder) && b.offered.isEmpty)
        // A hears it: all of its index goes (B holds none of it); B takes it.
        #expect(try a.received(hello).contains(.sendIndex(folder: Self.folder, since: 0)))
        #expect(a.shares(Self.folder))
        let first = update(from: 0, to: 5, index: "a1")
        #expect(try b.received(first, held: nil) == [.apply(first, reset: true)])
    }

    @Test func aHelloSaidAgainResumesWhereThePeerStands() throws {
        var a = FolderLinkMachine(local: [announcement(Self.folder, index: "a1", sequence: 9)])
        var b = FolderLinkMachine(local: [announcement(Self.folder, index: "b1", sequence: 0, held: "a1", have: 4)])
        _ = try a.received(b.hello)
        _ = try b.received(a.hello)
        #expect(a.sentUpTo[Self.folder] == 4)
        a.sent(Self.folder, upTo: 9)
        // B adds another folder and says its list again, holding 9 of A's entries by then.
        let announced = b.announce([
            announcement(Self.folder, index: "b1", sequence: 0, held: "a1", have: 9),
            announcement(Self.other, index: "b2", sequence: 0),
        ])
        let (hello, actions) = try #require(announced)
        #expect(actions.isEmpty)
        #expect(
            try a.received(hello) == [
                .sendIndex(folder: Self.folder, since: 9), .offered(announcement(Self.other, index: "b2", sequence: 0)),
            ])
        // A hello said while entries were on their way names less than was sent on this link: what went is not
        // sent again (it arrives, in order, before anything sent after); a peer that holds none of this index any
        // more gets all of it.
        a.sent(Self.folder, upTo: 12)
        let saidBehind = b.announce([
            announcement(Self.folder, index: "b1", sequence: 0, held: "a1", have: 10),
            announcement(Self.other, index: "b2", sequence: 0),
        ])
        let behind = try #require(saidBehind)
        #expect(try a.received(behind.hello).first == .sendIndex(folder: Self.folder, since: 12))
        let saidLost = b.announce([
            announcement(Self.folder, index: "b1", sequence: 0), announcement(Self.other, index: "b2", sequence: 0),
        ])
        let lost = try #require(saidLost)
        #expect(try a.received(lost.hello).first == .sendIndex(folder: Self.folder, since: 0))
        // An update B already holds does nothing; one that continues it applies.
        #expect(try b.received(update(from: 4, to: 9, index: "a1"), held: (indexID: "a1", have: 9)).isEmpty)
        let next = update(from: 9, to: 10, index: "a1")
        #expect(try b.received(next, held: (indexID: "a1", have: 9)) == [.apply(next, reset: false)])
    }

    /// What a peer offers is what its latest hello lists (a peer that says its hello again and again with other
    /// folders leaves only the last list here).
    @Test func theOffersAreThoseOfTheLatestHello() throws {
        var b = FolderLinkMachine(local: [])
        for round in 0..<50 {
            let id = "abcde-fghij-\(String(round + 10_000, radix: 36).suffix(5))"
            _ = try b.received(FolderHello(folders: [announcement(id, index: "a\(round)", sequence: 1)]))
            #expect(b.offered.keys.sorted() == [id])
        }
        _ = try b.received(FolderHello(folders: []))
        #expect(b.offered.isEmpty)
    }

    @Test func aFolderGoneFromTheListMakesTheLinkAgain() {
        var a = FolderLinkMachine(local: [
            announcement(Self.folder, index: "a1", sequence: 1), announcement(Self.other, index: "a2", sequence: 0),
        ])
        #expect(a.announce([announcement(Self.other, index: "a2", sequence: 0)]) == nil)
        #expect(a.local.count == 2)
    }

    /// A device that does not share a folder back says why in its hello (offered, declined, paused, removed); said
    /// again on the link when that changes; a hello of an earlier version, without it, says nothing of it.
    @Test func aHelloSaysWhyAFolderIsNotSharedBack() throws {
        var a = FolderLinkMachine(local: [announcement(Self.folder, index: "a1", sequence: 5)])
        var b = FolderLinkMachine(
            local: [], withheld: [FolderWithheld(id: Self.folder, state: FolderWithheld.offered)])
        _ = try b.received(a.hello)
        _ = try a.received(b.hello)
        #expect(!a.shares(Self.folder) && a.peerWithheld == [Self.folder: "offered"])
        // B declines: the same list, another reason, said on the link.
        let said = b.announce([], withheld: [FolderWithheld(id: Self.folder, state: FolderWithheld.declined)])
        #expect(said?.hello.withheld == [FolderWithheld(id: Self.folder, state: "declined")])
        _ = try a.received(try #require(said).hello)
        #expect(a.peerWithheld == [Self.folder: "declined"])
        // Read back as it crosses; a state of a later version is kept as said (the status shows only those it
        // knows); without the field (an earlier version), nothing is said.
        let later = FolderHello(folders: [], withheld: [FolderWithheld(id: Self.folder, state: "archived")])
        let crossed = try MessageCoding.decode(FolderHello.self, from: MessageCoding.frame(.folderHello, later))
        #expect(crossed == later)
        _ = try a.received(crossed)
        #expect(a.peerWithheld == [Self.folder: "archived"])
        let earlier = Frame(type: .folderHello, payload: Array(#"{"folders":[]}"#.utf8))
        _ = try a.received(try MessageCoding.decode(FolderHello.self, from: earlier))
        #expect(a.peerWithheld.isEmpty)
        // A withheld folder without a valid ID, or too many, break the hello's rules.
        #expect(throws: ProtocolError.self) {
            try a.received(FolderHello(folders: [], withheld: [FolderWithheld(id: "../x", state: "paused")]))
        }
        let many = (0...Limits.maxFolders).map { FolderWithheld(id: "f\($0)", state: "paused") }
        #expect(throws: ProtocolError.self) { try a.received(FolderHello(folders: [], withheld: many)) }
    }
}
