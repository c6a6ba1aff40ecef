import FoundationEssentials
import ShareTrust
import ShareNet

/// The watch's output: what arrives on standard output (plain, or one JSON object a line), what happens to the link
/// on standard error. Each line is one `write(2)`, so a reader sees whole lines as they happen.
public struct Console: Sendable {
    let json: Bool

    /// One event for scripts (with `--json`) and its plain form for a person.
    struct Event: Encodable {
        var event: String
        var from: String?
        var to: String?
        var type: String?
        var text: String?
        var path: String?
        var size: UInt64?
        var reason: String?
        var item: String?
        /// Where a forwarded item came from (`laptop via desk`).
        var origin: String?
    }

    /// A received text: on standard output (the only plain line there; everything else is status).
    func item(_ event: Event, plain: String) {
        Self.write(1, json ? Self.encode(event) : plain)
    }

    /// What happened (attached, lost, an item saved, sent or refused): on standard error, or as JSON on standard
    /// output.
    func status(_ event: Event, plain: String) {
        if json {
            Self.write(1, Self.encode(event))
        } else {
            Self.write(2, "share watch: " + plain)
        }
    }

    public static func error(_ message: String) {
        write(2, "share watch: " + message)
    }

    static func write(_ fd: Int32, _ line: String) {
        try? Syscalls.writeAll(fd, Array((line + "\n").utf8))
    }

    private static func encode(_ event: Event) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(event)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}
