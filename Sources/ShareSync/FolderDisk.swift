/// The folder on disk, as `SyncFolder` touches it: every path relative to the folder's root, nothing ever followed
/// through a link, nothing ever written outside. The agent's implementation goes through ShareDisk's directory
/// handles; the simulation's is a tree in memory.
public protocol FolderDisk: AnyObject {
    /// Whether the folder is there: its marker is (an unmounted disk, a moved or emptied folder has none). A folder
    /// that is not there is neither scanned (nothing it lacks is taken for deleted) nor changed.
    var isPresent: Bool { get }
    /// What is at `path` now (a link is a link), nil when nothing is.
    func stamp(_ path: String) -> DiskStamp?
    /// A file's digest or a link's target as read now; nil when it cannot be read (it went away).
    func content(_ path: String, _ stamp: DiskStamp) -> Scanner.Content?
    /// Everything in the folder (or beneath `folder`; only its own entries unless `recursive`), by path; what the
    /// folder keeps for itself left out.
    func list(under folder: String?, recursive: Bool) -> [String: DiskStamp]
    /// The folders the last `list` found and could not read (no right to, no descriptor left), and those a look at
    /// a path since could not open: what they hold is not in that listing, and not gone.
    var unlisted: Set<String> { get }
    func makeDirectory(_ path: String, mode: UInt32) throws
    func makeSymlink(_ path: String, target: String) throws
    /// Removes a file, a link or an empty folder.
    func remove(_ path: String) throws
    /// Renames `from` to `to`, which must not exist.
    func move(_ from: String, to: String) throws
    /// A copy of the file `from` at `to` (which must not exist), with `mode` and `modified`.
    func copyFile(_ from: String, to: String, mode: UInt32, modified: Int64) throws
    /// Sets a file's (or folder's) permission bits and a file's time.
    func setMetadata(_ path: String, kind: FileEntry.Kind, mode: UInt32, modified: Int64) throws
    /// Runs `body` (a plan, or a batch of files put in place): the folders it opens may be kept open until it
    /// returns, and are forgotten whenever a folder, link or name of the tree is changed through this disk.
    func keepingFoldersOpen<T>(_ body: () throws -> T) rethrows -> T
    /// Keeps the file at `path`, about to be replaced or removed by another device's change, among the folder's
    /// versions (nothing when the folder keeps none). A failure stops the step: nothing is replaced unkept.
    func keepVersion(_ path: String) throws
}

extension FolderDisk {
    public var unlisted: Set<String> { [] }
    public func keepingFoldersOpen<T>(_ body: () throws -> T) rethrows -> T { try body() }
    public func keepVersion(_ path: String) throws {}
}

/// A step the disk refused; the path is planned again later.
public struct FolderDiskError: Error, Sendable, CustomStringConvertible {
    public let path: String
    public let reason: String
    public init(_ path: String, _ reason: String) {
        self.path = path
        self.reason = reason
    }
    public var description: String { "\(path): \(reason)" }
}
