import CoreTransferable
import Foundation
import Testing

@Suite struct NegotiationTests {
    func offer(_ types: [(String, UInt64?)]) -> [OfferedRepresentation] {
        types.map { OfferedRepresentation(contentType: $0.0, kind: .data, size: $0.1) }
    }

    func choose(
        _ offered: [OfferedRepresentation], _ accept: [AcceptedType], senderDeclarations: [UTTypeDeclaration] = [],
        receiverDeclarations: [UTTypeDeclaration] = []
    ) -> Result<NegotiationChoice, NegotiationFailure> {
        Negotiator(accept: AcceptList(accept, declarations: receiverDeclarations), table: .system)
            .choose(from: offered, senderDeclarations: senderDeclarations)
    }

    struct Row: Sendable, CustomTestStringConvertible {
        let offered: [String]
        let accepted: [String]
        let expected: Int?
        var testDescription: String { "\(offered) → \(accepted)" }
    }

    static let table: [Row] = [
        // Rich type chosen when accepted.
        Row(
            offered: ["public.png", "public.utf8-plain-text"], accepted: ["public.png", "public.plain-text"],
            expected: 0),
        // Receiver order first: text wanted before images.
        Row(
            offered: ["public.png", "public.utf8-plain-text"], accepted: ["public.plain-text", "public.image"],
            expected: 1),
        // Sender order second: both conform to image; the sender's first wins.
        Row(offered: ["public.jpeg", "public.png"], accepted: ["public.image"], expected: 0),
        // Conformance, not equality.
        Row(offered: ["public.heic"], accepted: ["public.image"], expected: 0),
        Row(offered: ["public.folder"], accepted: ["public.data"], expected: nil),
        Row(offered: ["public.folder"], accepted: ["public.item"], expected: 0),
        // A receiver entry for png does not accept a sender that only has image.
        Row(offered: ["public.image"], accepted: ["public.png"], expected: nil),
        // Proxy fallback for a text-only receiver.
        Row(offered: ["com.example.profile", "public.utf8-plain-text"], accepted: ["public.plain-text"], expected: 1),
        Row(offered: [], accepted: ["public.data"], expected: nil),
        Row(offered: ["public.data"], accepted: [], expected: nil),
    ]

    @Test(arguments: table)
    func negotiationTable(_ row: Row) {
        let result = choose(offer(row.offered.map { ($0, nil) }), row.accepted.map { AcceptedType(identifier: $0) })
        switch (result, row.expected) {
        case (.success(let choice), let expected?): #expect(choice.representationIndex == expected)
        case (.failure, nil): break
        default: Issue.record("unexpected \(result)")
        }
    }

    @Test func sizeLimitsSkipToTheNextRepresentation() throws {
        let offered = offer([("public.png", 5_000_000), ("public.jpeg", 200_000), ("public.utf8-plain-text", 12)])
        let small = try choose(offered, [AcceptedType(.image, maxSize: 262_144), AcceptedType(.plainText)]).get()
        #expect(small.representationIndex == 1 && small.acceptIndex == 0)
        let tiny = try choose(offered, [AcceptedType(.image, maxSize: 1000), AcceptedType(.plainText)]).get()
        #expect(tiny.representationIndex == 2 && tiny.acceptIndex == 1)
        guard case .failure(let failure) = choose(offered, [AcceptedType(.image, maxSize: 10)]) else {
            Issue.record("expected failure")
            return
        }
        #expect(failure.tooLarge.count == 2)
        #expect(failure.description.contains("over the size limit"))
    }

    @Test func unknownSizeIsAcceptedAndEnforcedOnArrival() throws {
        let choice = try choose(offer([("public.png", nil)]), [AcceptedType(.image, maxSize: 10)]).get()
        #expect(choice.representationIndex == 0)
    }

    @Test func failureListsBothSides() {
        guard
            case .failure(let failure) = choose(
                offer([("public.png", nil), ("public.utf8-plain-text", nil)]),
                [AcceptedType(.url), AcceptedType(.pdf, maxSize: 9)])
        else {
            Issue.record("expected failure")
            return
        }
        #expect(failure.offered == ["public.png", "public.utf8-plain-text"])
        #expect(
            failure.description
                == "no common representation: offered public.png, public.utf8-plain-text; receiver accepts public.url, com.adobe.pdf (≤ 9 bytes)"
        )
    }

    @Test func senderDeclarationsExplainTypesTheReceiverNeverSaw() throws {
        let declaration = UTTypeDeclaration(identifier: "org.sender.sketch", conformsTo: ["org.sender.drawing"])
        let parent = UTTypeDeclaration(identifier: "org.sender.drawing", conformsTo: ["public.image"])
        let offered = offer([("org.sender.sketch", nil)])
        #expect(throws: NegotiationFailure.self) { try choose(offered, [AcceptedType(.image)]).get() }
        let choice = try choose(offered, [AcceptedType(.image)], senderDeclarations: [declaration, parent]).get()
        #expect(choice.representationIndex == 0)
        #expect(choice.reason.contains("conforms to"))
    }

    @Test func receiverDeclarationsWinOverTheSenders() throws {
        let receiver = UTTypeDeclaration(identifier: "org.shared.kind", conformsTo: ["public.text"])
        let sender = UTTypeDeclaration(identifier: "org.shared.kind", conformsTo: ["public.image"])
        let offered = offer([("org.shared.kind", nil)])
        let result = choose(
            offered, [AcceptedType(.image), AcceptedType(.text)],
            senderDeclarations: [sender], receiverDeclarations: [receiver])
        #expect(try result.get().acceptIndex == 1)
    }

    @Test func cyclicHostileDeclarationsTerminate() {
        let a = UTTypeDeclaration(identifier: "x.a", conformsTo: ["x.b"])
        let b = UTTypeDeclaration(identifier: "x.b", conformsTo: ["x.a"])
        let result = choose(offer([("x.a", nil)]), [AcceptedType(.image)], senderDeclarations: [a, b])
        #expect((try? result.get()) == nil)
    }

    @Test func dynamicTypesConformToTheirParents() throws {
        let dynamic = try #require(UTType(filenameExtension: "weird-ext"))
        let choice = try choose(offer([(dynamic.identifier, nil)]), [AcceptedType(.data)]).get()
        #expect(choice.representationIndex == 0)
    }

    @Test func visibilityDecidesWhatEachPeerIsOffered() {
        let note = Note(title: "a", body: "b")
        #expect(note.offeredRepresentations(for: .trusted).map(\.contentType) == [.testNote, .html, .utf8PlainText])
        #expect(note.offeredRepresentations(for: .sameProcess).map(\.contentType).contains(.testSecret))
        struct Private: Transferable {
            static var transferRepresentation: some TransferRepresentation {
                DataRepresentation(exportedContentType: .json) { _ in Data() }.visibility(.team)
                DataRepresentation(exportedContentType: .rtf) { _ in Data() }.visibility(.group)
                DataRepresentation(exportedContentType: .plainText) { _ in Data() }
            }
        }
        #expect(Private().offeredRepresentations(for: .ownDevice).map(\.contentType) == [.json, .rtf, .plainText])
        #expect(Private().offeredRepresentations(for: .group("friends")).map(\.contentType) == [.rtf, .plainText])
        #expect(Private().offeredRepresentations(for: .trusted).map(\.contentType) == [.plainText])
    }
}
