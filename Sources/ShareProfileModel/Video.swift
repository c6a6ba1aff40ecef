import CoreTransferable
import FoundationEssentials

/// A profile's video: sent as the file itself (never loaded into memory), or as its URL to a receiver that takes
/// only URLs.
public struct Video: Transferable, Sendable, Equatable {
    public let url: URL

    public init(url: URL) {
        self.url = url
    }

    public static var transferRepresentation: some TransferRepresentation {
        FileRepresentation(contentType: .mpeg4Movie) { video in
            SentTransferredFile(video.url)
        } importing: { received in
            // The received file lives only during this closure: keep a copy.
            let copy = FileManager.default.temporaryDirectory.appendingPathComponent(
                "\(UUID().uuidString)-\(received.file.lastPathComponent)")
            try FileManager.default.copyItem(at: received.file, to: copy)
            return Video(url: copy)
        }
        ProxyRepresentation(exporting: \.url)
    }
}
