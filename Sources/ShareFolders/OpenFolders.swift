import ShareDisk

/// Folders of a shared folder kept open by their path in it, a few at a time: each holds a descriptor, a service may
/// open only 1,024 files and a folder may hold thousands of folders, and what is asked for comes in path order, so
/// the last few serve nearly every ask (when `limit` are open, they are let go before the next one is kept).
struct OpenFolders {
    static let limit = 64
    private var byPath: [String: Directory] = [:]

    /// The folder at `path`, opened by `open` when it is not kept.
    mutating func folder(_ path: String, open: () throws -> Directory) rethrows -> Directory {
        if let found = byPath[path] { return found }
        let opened = try open()
        if byPath.count >= Self.limit { byPath = [:] }
        byPath[path] = opened
        return opened
    }
}
