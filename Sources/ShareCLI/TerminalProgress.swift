import FoundationEssentials
import ShareText
import ShareThreads
import Glibc
import ShareEngine
import ShareNet

/// What the user sees while items move: a bar redrawn in place when standard error is a terminal, a plain line every
/// few seconds otherwise, JSON events for scripts, or nothing. Narrative and progress go to standard error; standard
/// output carries only what was received (and JSON events), so `share receive > file` and `share paste | wc -c` get
/// exactly the content. The engine says what happens (`ProgressReporter`); this renders it.
final class TerminalProgress: ProgressRenderer {
    enum Mode: Sendable { case terminal, lines, json, quiet }

    let mode: Mode
    let verbose: Bool

    init(mode: Mode, verbose: Bool = false) {
        self.mode = mode
        // A script's events say what was chosen and why.
        self.verbose = verbose || mode == .json
    }

    var interval: Duration { mode == .terminal ? .milliseconds(100) : mode == .lines ? .seconds(3) : .seconds(1) }

    /// Whether a progress line is open on the terminal (process-wide: there is one standard error).
    nonisolated(unsafe) private static var lineOpen = false
    private static let lineLock = ThreadCondition()

    /// Ends an open progress line, so that whatever is written next (an error) starts on a line of its own.
    static func endLine() {
        lineLock.withLock {
            if lineOpen {
                Console.writeOrLeave("\r\u{1B}[K", to: .error)
                lineOpen = false
            }
        }
    }

    /// A status line on standard error, after ending any progress line.
    static func status(_ text: String) {
        endLine()
        Console.writeOrLeave(text + "\n", to: .error)
    }

    func note(_ text: String, event: String, fields: [String: Any], detail: Bool) {
        switch mode {
        case .quiet: return
        case .json: emit(["event": event, "message": text].merging(fields) { a, _ in a })
        case .terminal, .lines:
            if !detail || verbose { Self.status(text) }
        }
    }

    /// On a terminal the newline is always added, and control characters other than newline and tab are shown as
    /// `\u{…}`: a peer's text must not drive the terminal (escape sequences).
    func output(_ text: String, exactly: Bool, fields: [String: Any]) throws(Console.ReaderGone) {
        if mode == .json {
            try emitting(["event": "received-text", "text": text].merging(fields) { a, _ in a })
        } else if Syscalls.stdoutIsTerminal {
            Self.endLine()
            let shown = ProgressReporter.neutralized(text)
            try Console.write(shown.hasSuffix("\n") ? shown : shown + "\n", to: .output)
        } else {
            try Console.write(exactly || text.hasSuffix("\n") ? text : text + "\n", to: .output)
        }
    }

    func draw(_ frame: ProgressFrame) {
        let left = frame.secondsLeft.map { ProgressReporter.duration($0) + " left" }
        switch mode {
        case .terminal:
            let line = Self.bar(
                label: frame.label, number: frame.number, count: frame.count, done: frame.done, total: frame.total,
                rate: UInt64(frame.rate), left: left, width: Syscalls.stderrColumns ?? 80)
            Self.lineLock.withLock {
                Console.writeOrLeave("\r\u{1B}[K" + line, to: .error)
                Self.lineOpen = true
            }
        case .lines:
            let head = frame.count > 1 ? "[\(frame.number)/\(frame.count)] " : ""
            let percent = frame.total.map {
                $0 == 0 ? " 100%" : Format.c(" %.0f%%", Double(frame.done) * 100 / Double($0))
            }
            let size =
                frame.total.map { "\(Self.bytes(frame.done))/\(Self.bytes($0))" } ?? Self.bytes(frame.done)
            let speed = frame.rate >= 1 ? " \(Self.bytes(UInt64(frame.rate)))/s" : ""
            Self.status(
                "progress: \(head)\(frame.label)\(percent ?? "") \(size)\(speed)\(left.map { " " + $0 } ?? "")")
        case .json:
            var fields: [String: Any] = [
                "event": "progress", "item": frame.label, "bytes": frame.done, "rate": Int(frame.rate),
            ]
            if let total = frame.total { fields["total"] = total }
            emit(fields)
        case .quiet:
            break
        }
    }

    func finishItem(_ frame: ProgressFrame) {
        if mode == .terminal { draw(frame) }
        Self.endLine()
    }

    private static func bytes(_ count: UInt64) -> String { ProgressReporter.bytes(count) }

    /// One progress line that fits `width` columns: `[2/5] holi…y.mov [#####-----] 45% 1.2/2.0 GiB 98.0 MiB/s 0:08
    /// left`. The name is shortened in the middle, then the bar narrowed and dropped, then the statistics.
    static func bar(
        label: String, number: Int, count: Int, done: UInt64, total: UInt64?, rate: UInt64, left: String?, width: Int
    ) -> String {
        let room = max(width - 1, 20)  // the last column would wrap on some terminals
        let head = count > 1 ? "[\(number)/\(count)] " : ""
        let fraction = total.map { $0 == 0 ? 1 : min(1, Double(done) / Double($0)) }
        var stats = [fraction.map { Format.c("%3.0f%%", $0 * 100) } ?? ""]
        stats.append(total.map { "\(bytes(done))/\(bytes($0))" } ?? bytes(done))
        if rate > 0 { stats.append("\(bytes(rate))/s") }  // not before anything has moved
        let name = label.filter { !$0.isNewline }
        var statsText = (stats + [left].compactMap { $0 }).filter { !$0.isEmpty }.joined(separator: " ")
        var available = room - head.count - statsText.count - 1
        if available < 12, left != nil {
            // Narrow: the time left goes first.
            statsText = stats.filter { !$0.isEmpty }.joined(separator: " ")
            available = room - head.count - statsText.count - 1
        }
        var nameWidth = min(name.count, max(8, available))
        var barWidth = 0
        if fraction != nil, available >= 12 + 9 {
            nameWidth = min(name.count, max(12, (available - 3) * 3 / 5))
            barWidth = min(40, available - nameWidth - 3)
            if barWidth < 6 { barWidth = 0 }
        }
        if barWidth == 0 { nameWidth = min(name.count, max(8, available)) }
        var line = head + middleShortened(name, to: nameWidth) + " "
        if barWidth > 0, let fraction {
            let filled = Int((Double(barWidth) * fraction).rounded(.down))
            line +=
                "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: barWidth - filled) + "] "
        }
        if line.count + statsText.count > room {
            statsText = String(statsText.prefix(max(0, room - line.count)))
        }
        return line + statsText
    }

    /// `text` cut to `limit` characters by replacing its middle with an ellipsis.
    static func middleShortened(_ text: String, to limit: Int) -> String {
        guard text.count > limit else { return text }
        guard limit > 3 else { return String(text.prefix(limit)) }
        let keep = limit - 1
        return String(text.prefix(keep - keep / 2)) + "…" + String(text.suffix(keep / 2))
    }

    private func emit(_ object: [String: Any]) {
        do {
            try emitting(object)
        } catch {
            Console.leave(error)
        }
    }

    private func emitting(_ object: [String: Any]) throws(Console.ReaderGone) {
        guard let data = try? JSONText.bytes(object, sortedKeys: true) else { return }
        try Console.write(String(decoding: data, as: UTF8.self) + "\n", to: .output)
    }
}

extension ProgressReporter {
    /// A bar when standard error is a terminal, plain lines otherwise; JSON events, or nothing but the output.
    static func automatic(quiet: Bool, json: Bool, verbose: Bool = false) -> ProgressReporter {
        ProgressReporter(
            renderer: TerminalProgress(
                mode: json ? .json : quiet ? .quiet : Syscalls.stderrIsTerminal ? .terminal : .lines,
                verbose: verbose))
    }
}
