import CoreTransferable
import FoundationEssentials
import ShareProtocol
import ShareTrust
import UniformTypeIdentifiers

/// What the receiving person sees of an item before it is accepted: a title, and optionally a small image and an
/// icon — the shape of SwiftUI's `SharePreview(_:image:icon:)`, which `ShareLink(item:preview:)` takes beside its
/// item. It travels in the offer (protocol 3 and later); images are at most 32 KiB each and 1 MiB per offer, and a
/// larger image is left out rather than sent.
public struct SharePreview: Sendable, Equatable {
    /// A small image for a preview: its bytes and their type (`public.png`, `public.jpeg`, …).
    public struct Image: Sendable, Equatable {
        /// The image's bytes (at most 32 KiB travel).
        public var data: Data
        /// Their type (an image type).
        public var contentType: UTType

        /// An image from its bytes and type.
        public init(data: Data, contentType: UTType) {
            self.data = data
            self.contentType = contentType
        }

        /// An image file, typed by its extension; nil when it cannot be read or is not an image.
        public init?(contentsOf url: URL) {
            guard let type = UTType(filenameExtension: url.pathExtension), type.conforms(to: .image),
                let data = try? Data(contentsOf: url)
            else { return nil }
            self.init(data: data, contentType: type)
        }
    }

    /// The title the receiving person sees (at most 256 bytes of UTF-8 travel).
    public var title: String
    /// A small picture of the item itself (a thumbnail).
    public var image: Image?
    /// An icon for the kind of item; sent when there is no image.
    public var icon: Image?

    /// A preview with `title`, and optionally an image and an icon.
    public init(_ title: String, image: Image? = nil, icon: Image? = nil) {
        self.title = title
        self.image = image
        self.icon = icon
    }

    /// As the offer carries it: the title cut to its limit, the image (or, without one, the icon) when small enough.
    var wire: ItemPreview {
        let title = OutgoingItem.title(title)
        guard let picture = [image, icon].compactMap({ $0 }).first(where: { $0.data.count <= ItemPreview.maxImage })
        else { return ItemPreview(title: title) }
        return ItemPreview(title: title, image: Array(picture.data), imageType: picture.contentType.identifier)
    }

    /// What arrived with an offer.
    package init(_ wire: ItemPreview?, label: String) {
        title = wire?.title ?? label
        if let bytes = wire?.imageBytes, let type = wire?.imageType.flatMap({ UTType($0) }) {
            image = Image(data: Data(bytes), contentType: type)
        }
    }
}
