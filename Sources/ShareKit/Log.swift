import Foundation

/// One-line diagnostics on standard error (fd 2; `stderr` is not concurrency-safe in Swift 6).
public enum Log {
    private static let lock = NSLock()

    public static func line(_ text: String) {
        let data = Data((text + "\n").utf8)
        lock.lock()
        defer { lock.unlock() }
        FileHandle.standardError.write(data)
    }
}
