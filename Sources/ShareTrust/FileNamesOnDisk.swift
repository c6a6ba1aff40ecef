import CoreTransferable
import FoundationEssentials

/// Names for received files: the sender's suggestion made safe, and never an existing file.
public enum FileNamesOnDisk {
    /// A safe single component: no separators, no `..` or leading dots, no control characters, at most 200 bytes.
    public static func sanitize(_ suggested: String?, fallback: String) -> String {
        var name = FileNames.sanitized(suggested ?? "", fallback: fallback)
        if name == "." || name == ".." { name = fallback }
        return name
    }

    /// `name`, or `name (2).ext`, `name (3).ext`, … whichever does not exist in `directory`.
    public static func unique(_ name: String, in directory: URL) -> URL {
        FileNames.unique(name, in: directory)
    }
}
