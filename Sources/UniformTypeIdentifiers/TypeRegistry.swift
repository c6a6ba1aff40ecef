import FoundationEssentials
import Glibc
import Synchronization

/// The process-wide declared-type registry: the system table plus declarations registered by the program, loaded from
/// declaration files, or implied by `UTType(exportedAs:)` / `UTType(importedAs:)`.
///
/// Readers take the current immutable table under a lock and query it without holding the lock; writers publish a
/// new table. Look-ups are therefore thread-safe and never block on each other for long.
final class TypeRegistry: Sendable {
    static let shared = TypeRegistry()

    private let current: Mutex<UTTypeTable>

    private init() {
        var table = UTTypeTable.system
        for url in Self.defaultDeclarationFiles() {
            do {
                table = table.adding(try UTTypeDeclaration.load(contentsOf: url))
            } catch {
                // A bad file next to the program must not stop it; say so once on stderr and go on without it.
                let line = Array("warning: type declarations ignored: \(error)\n".utf8)
                _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
            }
        }
        current = Mutex(table)
    }

    var table: UTTypeTable { current.withLock { $0 } }

    func register(_ declarations: [UTTypeDeclaration]) {
        current.withLock { $0 = $0.adding(declarations) }
    }

    /// Registers a declaration implied by code unless a declaration of equal or higher rank exists. Returns the
    /// canonical identifier.
    func registerImplied(_ declaration: UTTypeDeclaration) -> String {
        current.withLock { current in
            if let existing = current.declaration(of: declaration.identifier) {
                let keep =
                    existing.kind == .system || existing.kind == .exported || declaration.kind == .imported
                if keep { return existing.identifier }
            }
            current = current.adding([declaration])
            return declaration.identifier
        }
    }

    /// `Info.plist` beside the executable (the main bundle's), then each file in `UTTYPE_DECLARATIONS_PATH`
    /// (colon-separated).
    private static func defaultDeclarationFiles() -> [URL] {
        var files: [URL] = []
        // The main bundle's Info.plist: on Linux, the one beside the executable.
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        let info = executable.deletingLastPathComponent().appendingPathComponent("Info.plist")
        if FileManager.default.fileExists(atPath: info.path) { files.append(info) }
        if let paths = ProcessInfo.processInfo.environment["UTTYPE_DECLARATIONS_PATH"] {
            files += paths.split(separator: ":").map { URL(fileURLWithPath: String($0)) }
        }
        return files
    }
}
