import CoreTransferable
import FoundationEssentials

extension UTType {
    /// A share profile: its JSON form (declared here, exported by share).
    public static let shareProfile = UTType(exportedAs: "app.share.profile", conformingTo: .json)
}

/// A profile from the seeds' catalog: who someone is, what they like, a portrait and a video.
///
/// It goes as its rich codable form to a peer that knows `app.share.profile`, and as its name to a text-only peer.
public struct Profile: Codable, Transferable, Identifiable, Equatable, Sendable {
    public var id: UUID
    public var name: String
    public var bio: String
    public var funFacts: [String]
    public var video: URL?
    public var portrait: URL?

    public init(
        id: UUID = UUID(), name: String, bio: String = "", funFacts: [String] = [], video: URL? = nil,
        portrait: URL? = nil
    ) {
        self.id = id
        self.name = name
        self.bio = bio
        self.funFacts = funFacts
        self.video = video
        self.portrait = portrait
    }

    public static var transferRepresentation: some TransferRepresentation {
        CodableRepresentation(contentType: .shareProfile)
        ProxyRepresentation(exporting: \.name)
    }
}

extension Profile {
    /// The profile without its portrait and video: what crosses the network as a single profile. A path names a
    /// file on this machine only; media travel inside a profiles bundle or not at all.
    public var withoutMedia: Profile {
        var copy = self
        copy.portrait = nil
        copy.video = nil
        return copy
    }
}
