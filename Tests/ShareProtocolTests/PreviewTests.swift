import CoreTransferable
import Foundation
import Testing

@testable import ShareProtocol

/// What a hostile sender can put in a preview is bounded before anything is kept: 32 KiB per image, 1 MiB of images
/// per offer, a title of 256 bytes without control characters. Our own sender leaves images out past the budget.
@Suite struct PreviewTests {
    func item(_ id: String, image: Int?, title: String = "photo") -> OfferItem {
        OfferItem(
            id: id, label: id,
            representations: [OfferedRepresentation(contentType: "public.png", kind: .data, size: 10)],
            preview: ItemPreview(
                title: title, image: image.map { [UInt8](repeating: 7, count: $0) }, imageType: "public.png"))
    }

    @Test func anImageOverThirtyTwoKiBIsRefused() {
        let offer = Offer(items: [item("a", image: ItemPreview.maxImage + 1)], chunkSize: 1 << 20)
        #expect(throws: ProtocolError.self) { try offer.validate() }
        #expect((try? Offer(items: [item("a", image: ItemPreview.maxImage)], chunkSize: 1 << 20).validate()) != nil)
    }

    @Test func imagesOverOneMiBPerOfferAreRefusedAndOurSenderLeavesThemOut() throws {
        let items = (0..<40).map { item("i\($0)", image: ItemPreview.maxImage) }  // 40 × 32 KiB = 1.25 MiB
        let offer = Offer(items: items, chunkSize: 1 << 20)
        #expect(throws: ProtocolError.self) { try offer.validate() }
        let trimmed = offer.trimmingPreviews()
        try trimmed.validate()
        #expect(trimmed.items.filter { $0.preview?.image != nil }.count == 32)
        #expect(trimmed.items.allSatisfy { $0.preview?.title == "photo" }, "titles stay")
    }

    @Test func aTitleIsBoundedAndHasNoControlCharacters() {
        #expect(throws: ProtocolError.self) {
            try Offer(items: [item("a", image: nil, title: String(repeating: "x", count: 257))], chunkSize: 1 << 20)
                .validate()
        }
        #expect(throws: ProtocolError.self) {
            try Offer(items: [item("a", image: nil, title: "evil\u{1B}[2J")], chunkSize: 1 << 20).validate()
        }
    }

    @Test func anImageThatIsNotBase64IsRefused() {
        var bad = item("a", image: 10)
        bad.preview?.image = "not base 64!"
        #expect(throws: ProtocolError.self) { try Offer(items: [bad], chunkSize: 1 << 20).validate() }
    }
}
