// swift-format-ignore-file
// Sample code from WWDC22 "Meet Transferable" (Profile with Codable + Proxy), unchanged.
import CoreTransferable
import UniformTypeIdentifiers

struct Profile: Codable {
    var id: UUID
    var name: String
    var bio: String
    var funFacts: [String]
    var video: URL?
    var portrait: URL?
}

extension Profile: Transferable {
    static var transferRepresentation: some TransferRepresentation {
        CodableRepresentation(contentType: .profile)
        ProxyRepresentation(exporting: \.name)
    }
}

// also declare the content type in the Info.plist

extension UTType {
    static var profile: UTType = UTType(exportedAs: "com.example.profile")
}
