import Foundation

/// The process-wide declared-type registry: the system table plus declarations registered by the program, loaded from
/// declaration files, or implied by `UTType(exportedAs:)` / `UTType(importedAs:)`.
///
/// Readers take the current immutable table under a lock and query it without holding the lock; writers publish a
/// new table. Look-ups are therefore thread-safe and never block on each other for long.
final class TypeRegistry: @unchecked Sendable {  // all mutable state is guarded by `lock`
    static let shared = TypeRegistry()

    private let lock = NSLock()
    private var current: UTTypeTable

    private init() {
        current = .system
        for url in Self.defaultDeclarationFiles() {
            do {
                current = current.adding(try UTTypeDeclaration.load(contentsOf: url))
            } catch {
                // A bad file next to the program must not stop it; say so once on stderr and go on without it.
                FileHandle.standardError.write(Data("warning: type declarations ignored: \(error)\n".utf8))
            }
        }
    }

    var table: UTTypeTable {
        lock.lock()
        defer { lock.unlock() }
        return current
    }

    func register(_ declarations: [UTTypeDeclaration]) {
        lock.lock()
        defer { lock.unlock() }
        current = current.adding(declarations)
    }

    /// Registers a declaration implied by code unless a declaration of equal or higher rank exists. Returns the
    /// canonical identifier.
    func registerImplied(_ declaration: UTTypeDeclaration) -> String {
        lock.lock()
        defer { lock.unlock() }
        if let existing = current.declaration(of: declaration.identifier) {
            let keep =
                existing.kind == .system || existing.kind == .exported || declaration.kind == .imported
            if keep { return existing.identifier }
        }
        current = current.adding([declaration])
        return declaration.identifier
    }

    /// `Info.plist` beside the executable (the main bundle's), then each file in `UTTYPE_DECLARATIONS_PATH`
    /// (colon-separated).
    private static func defaultDeclarationFiles() -> [URL] {
        var files: [URL] = []
        if let info = Bundle.main.url(forResource: "Info", withExtension: "plist") { files.append(info) }
        if let paths = ProcessInfo.processInfo.environment["UTTYPE_DECLARATIONS_PATH"] {
            files += paths.split(separator: ":").map { URL(fileURLWithPath: String($0)) }
        }
        return files
    }
}
