import ShareProfileModel
import CoreTransferable
import FoundationEssentials
import ShareArchive
import ShareProfiles
import ShareTrust
import ShareProtocol
import UniformTypeIdentifiers

/// A file on this disk, as a `Transferable` value: offered as a file of its type (by its extension, dynamic when
/// unknown, or as given), never as its `file:` URL; it streams from the disk in chunks and resumes where a receiver
/// left it. Its identity is its path, and its version its size, modification time and inode.
public struct SharedFile: Transferable, Described, Sendable {
    /// The file, its symbolic links resolved.
    public let url: URL
    /// The type it is offered as.
    public let contentType: UTType
    let version: String
    let size: UInt64

    /// Checks that `url` is a readable regular file now; the error says which and what to do.
    public init(_ url: URL, contentType: UTType? = nil) throws {
        let path = url.standardizedFileURL.resolvingSymlinksInPath().path
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw ShareFailure(.noInput, "\(url.path): \(String(cString: strerror(errno))); check the path")
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw ShareFailure(.noInput, "\(url.path) is not a regular file")
        }
        guard access(path, R_OK) == 0 else { throw ShareFailure(.noInput, "\(url.path) is not readable") }
        self.url = URL(fileURLWithPath: path)
        self.contentType =
            contentType ?? (url.pathExtension.isEmpty ? nil : UTType(filenameExtension: url.pathExtension)) ?? .data
        version = OutgoingItem.fileVersion(info)
        size = UInt64(info.st_size)
        label = url.lastPathComponent
        fileName = url.lastPathComponent
    }

    /// The name the receiver sees (the file's name).
    public var label: String
    /// The name it suggests for the file it saves (the file's name).
    public var fileName: String

    /// The file's bytes, streamed from the file itself.
    public static var transferRepresentation: some TransferRepresentation {
        // Declared as data: the offer names the file's own type.
        FileRepresentation(exportedContentType: .data) { file in
            SentTransferredFile(file.url, allowAccessingOriginalFile: true)
        }
        .suggestedFileName { $0.fileName }
    }

    var shareID: String { OutgoingItem.stableID("file:" + url.path) }
    var shareLabel: String { label }
    var shareVersion: String? { version }

    func facts(for contentType: UTType) throws -> RepresentationFacts? {
        RepresentationFacts(contentType: self.contentType, size: size)
    }
}

/// A folder on this disk, as a `Transferable` value: offered as a tar stream made as it is sent (extracted as it
/// arrives on the other side, resumable), then as a text listing of its entries for a receiver that takes only text.
/// Entries that cannot travel (special files, links leaving the folder) are left out and listed in `skipped`.
public struct SharedFolder: Transferable, Described, Sendable {
    /// The folder, its symbolic links resolved.
    public let url: URL
    let plan: ArchivePlan
    /// The name the receiver sees (the folder's name and a slash).
    public var label: String

    /// Plans the folder now (what travels and what is left out); throws when it cannot be read.
    public init(_ url: URL) throws {
        let path = url.standardizedFileURL.resolvingSymlinksInPath().path
        do {
            plan = try ArchivePlan.folder(URL(fileURLWithPath: path))
        } catch let error as ArchiveError {
            throw ShareFailure(.noInput, error.message)
        }
        self.url = URL(fileURLWithPath: path)
        label = url.standardizedFileURL.lastPathComponent + "/"
    }

    /// What was left out, and why.
    public var skipped: [(path: String, reason: String)] { plan.skipped }

    /// `path<TAB>size` per file, `folder/`, `link -> target`.
    public var listing: String { plan.listing }

    /// A tar stream of the folder, then its listing as text.
    public static var transferRepresentation: some TransferRepresentation {
        FileRepresentation(exportedContentType: .folder) { folder in
            SentTransferredFile(folder.url, allowAccessingOriginalFile: true)
        }
        .suggestedFileName { $0.url.lastPathComponent }
        ProxyRepresentation(exporting: \.listing)
            .suggestedFileName { $0.url.lastPathComponent + ".txt" }
    }

    var shareID: String { OutgoingItem.stableID("folder:" + url.path) }
    var shareLabel: String { label }
    var shareVersion: String? { plan.version }

    func facts(for contentType: UTType) throws -> RepresentationFacts? {
        // On the wire a folder is a tar stream (what earlier versions offered, and what receivers extract).
        guard contentType == .folder else { return nil }
        return RepresentationFacts(contentType: .tarArchive, size: plan.streamSize, archive: plan)
    }
}

extension ProfilesArchive: Described {
    var shareID: String { UUID().uuidString }
    var shareLabel: String { "\(profiles.count) profiles" }
    var shareVersion: String? { nil }

    /// The bundle streams as it is sent (manifest, portraits, videos), never as a file made first.
    func facts(for contentType: UTType) throws -> RepresentationFacts? {
        guard contentType == .shareProfilesArchive else { return nil }
        do {
            let plan = try plan()
            return RepresentationFacts(contentType: .shareProfilesArchive, size: plan.streamSize, archive: plan)
        } catch {
            throw ShareFailure(.noInput, "cannot bundle the profiles: \(error)")
        }
    }
}
