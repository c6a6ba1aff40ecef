import Foundation

/// Diagnostics on standard error (fd 2; `stderr` is not concurrency-safe in Swift 6), one line per event. With
/// `timestamps` (the agent), each line starts with the time and the level, for a journal to parse:
/// `2026-11-22T09:00:00Z info outbox: job 3f… to desk: delivered 2, refused 0`.
public enum Log {
    public enum Level: Int, Sendable, Comparable, CaseIterable {
        case error, warning, info, debug

        public var name: String { "\(self)" }
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
    }

    private static let lock = NSLock()
    nonisolated(unsafe) private static var threshold = Level.info  // guarded by `lock`
    nonisolated(unsafe) private static var timestamps = false  // guarded by `lock`

    /// Lines above `level` are dropped; `timestamps` prefixes time and level.
    public static func configure(level: Level, timestamps: Bool) {
        lock.withLock {
            threshold = level
            Self.timestamps = timestamps
        }
    }

    public static func line(_ text: String, level: Level = .info) {
        lock.lock()
        defer { lock.unlock() }
        guard level <= threshold else { return }
        let prefix = timestamps ? "\(ISO8601DateFormatter().string(from: Date())) \(level.name) " : ""
        FileHandle.standardError.write(Data((prefix + text + "\n").utf8))
    }
}
