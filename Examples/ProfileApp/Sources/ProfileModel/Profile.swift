import CoreTransferable
import Foundation
import UniformTypeIdentifiers

// Also declared in a program's type declarations, as an app declares it in its Info.plist.
extension UTType {
    public static var profile: UTType = UTType(exportedAs: "com.example.profile")
    public static var profileVideo: UTType = UTType(exportedAs: "com.example.profile-video", conformingTo: .movie)
}

/// A personality profile, as the "Meet Transferable" session's catalog app keeps it.
public struct Profile: Codable, Equatable {
    public var id = UUID()
    public var name: String
    public var bio: String
    public private(set) var funFacts: [String] = []
    public var video: URL?
    public var portrait: URL?

    public init(name: String, bio: String) {
        self.name = name
        self.bio = bio
    }

    public mutating func addFunFacts(_ newFunFacts: [String]) {
        funFacts.append(contentsOf: newFunFacts)
    }
}

extension Profile: Transferable {
    public static var transferRepresentation: some TransferRepresentation {
        CodableRepresentation(contentType: .profile)
        ProxyRepresentation(exporting: \.name)
    }
}

/// A profile's video: large, so it travels as a file and is never loaded whole.
public struct Video: Transferable {
    public let file: URL

    public init(file: URL) {
        self.file = file
    }

    public static var transferRepresentation: some TransferRepresentation {
        FileRepresentation(contentType: .profileVideo) {
            SentTransferredFile($0.file)
        } importing: { received in
            // The received file is the importer's only while it runs: move it into the current folder.
            let copy = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
                .appendingPathComponent("received-" + received.file.lastPathComponent)
            try? FileManager.default.removeItem(at: copy)
            try FileManager.default.moveItem(at: received.file, to: copy)
            return Self(file: copy)
        }
    }
}
