import FoundationEssentials
import Logging
import Glibc
import Synchronization

/// Diagnostics through swift-log, written by `ShareLogHandler` to standard error (fd 2; `stderr` is not
/// concurrency-safe in Swift 6), one line per event. With `timestamps` (the agent), each line carries the time, the
/// level, the logger's label and the event's metadata as `key=value`, for a journal or a script to parse:
///
///     2026-11-22T09:00:00.120Z info share.outbox: delivered job=3f1c0a9e77d2 to=desk delivered=2 refused=0
///
/// Without timestamps (a one-off command), only the message and its metadata are written. Nothing is ever logged
/// with a file's contents, a clipboard text or key material: only names, counts and reasons.
public enum Log {
    /// One logger per subsystem (`share.listener`, `share.outbox`, …), all sharing the threshold set by `configure`.
    public static func logger(_ label: String) -> Logger {
        Logger(label: label) { ShareLogHandler(label: $0) }
    }

    /// Events less severe than `level` are dropped; `timestamps` switches to the agent's journal format.
    public static func configure(level: Logger.Level, timestamps: Bool) {
        let index = Logger.Level.allCases.firstIndex(of: level) ?? 0
        ShareLogHandler.settings.store(UInt8(index) | (timestamps ? 0x80 : 0), ordering: .relaxed)
    }

    /// The level names `--log-level` takes, least severe first.
    public static let levelNames = Logger.Level.allCases.map(\.rawValue)
}

/// Writes log events as single lines on standard error.
public struct ShareLogHandler: LogHandler {
    /// The threshold's index in `Logger.Level.allCases`, and 0x80 for timestamps: read by every log call of every
    /// thread, so an atomic (a lock here made thousands of connection threads queue behind one another).
    static let settings = Atomic<UInt8>(UInt8(Logger.Level.allCases.firstIndex(of: .info) ?? 0))

    static var level: Logger.Level { Logger.Level.allCases[Int(settings.load(ordering: .relaxed) & 0x7F)] }
    static var timestamps: Bool { settings.load(ordering: .relaxed) & 0x80 != 0 }

    public let label: String
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private var ownLevel: Logger.Level?

    public init(label: String) {
        self.label = label
    }

    /// The process-wide threshold unless this logger was given its own.
    public var logLevel: Logger.Level {
        get { ownLevel ?? Self.level }
        set { ownLevel = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let own = event.metadata { merged.merge(own) { _, new in new } }
        let fields = merged.sorted { $0.key < $1.key }.map { "\($0.key)=\(Self.quoted("\($0.value)"))" }
        let timestamps = Self.timestamps
        var line = ""
        if timestamps {
            line = "\(Self.timestamp()) \(event.level.rawValue) \(label): "
        }
        line += ([Self.singleLine("\(event.message)")] + fields).joined(separator: " ") + "\n"
        try? Syscalls.writeAll(2, Array(line.utf8))
    }

    /// The current UTC time as `2026-11-22T09:00:00.120Z`, from the C library: a shared date formatter costs a lock
    /// and per-thread caches in every connection thread that logs.
    public static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(now.tv_nsec / 1_000_000), 3))Z"
    }

    /// A value with spaces or quotes is quoted, so a line splits unambiguously into fields.
    public static func quoted(_ value: String) -> String {
        let flat = singleLine(value)
        guard flat.isEmpty || flat.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" }) else { return flat }
        var quoted = "\""
        for character in flat {
            if character == "\\" || character == "\"" { quoted.append("\\") }
            quoted.append(character)
        }
        return quoted + "\""
    }

    /// Newlines and other control characters never split or drive a log line.
    public static func singleLine(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else { return text }
        return String(
            String.UnicodeScalarView(
                text.unicodeScalars.flatMap { scalar -> [Unicode.Scalar] in
                    scalar.value < 0x20 || scalar.value == 0x7F
                        ? Array("\\u{\(String(scalar.value, radix: 16))}".unicodeScalars) : [scalar]
                }))
    }
}
