import Synchronization
import Foundation
import ShareProtocol
import ShareNet
import ShareTrust
import CoreTransferable
import UniformTypeIdentifiers

/// A transfer's position, as `share status` shows a running job: the item in progress and the whole session.
package struct TransferProgress: Codable, Sendable, Equatable {
    package var item: String
    /// The item's number (from 1) and the number of items in the session.
    package var number: Int
    package var count: Int
    package var itemBytes: UInt64
    package var itemTotal: UInt64?
    package var bytes: UInt64
    package var total: UInt64
    /// Bytes per second over the item so far.
    package var rate: UInt64
}

/// What the user sees while items move: a bar redrawn in place when standard error is a terminal, a plain line every
/// few seconds otherwise, JSON events for scripts, or nothing. Narrative and progress go to standard error; standard
/// output carries only what was received (and JSON events), so `share receive > file` and `share paste | wc -c` get
/// exactly the content. An observer (the agent's outbox) gets a `TransferProgress` at most four times a second.
package final class ProgressReporter: Sendable {
    package enum Mode: Sendable { case terminal, lines, json, quiet }

    package let mode: Mode
    private let observer: (@Sendable (TransferProgress) -> Void)?

    /// What is shown, behind one lock: every event of a transfer updates it and may draw it.
    private struct Display {
        var verbose = false
        /// The offered items, for the plain line of the one chosen (its size).
        var offeredItems: [OfferItem] = []
        var lastObserved = ContinuousClock.now
        var label = ""
        var itemNumber = 0
        var itemCount = 0
        var itemTotal: UInt64?
        var itemDone: UInt64 = 0
        var sessionTotal: UInt64 = 0
        var sessionDone: UInt64 = 0
        var moved: UInt64 = 0
        var itemStart = ContinuousClock.now
        var lastDraw = ContinuousClock.now
        /// The rate a shown snapshot reported (it did not move through this process).
        var drawnRate: UInt64?
    }
    private let display = Mutex(Display())

    /// Lines about the negotiation too (what was offered, what the receiver chose and why): `-v`. By default one
    /// plain line per item and the summary.
    package var verbose: Bool {
        get { display.withLock { $0.verbose } }
        set { display.withLock { $0.verbose = newValue } }
    }

    /// Every transfer event as it comes, besides the lines and the bar (a library caller's own handling).
    private let events: (@Sendable (TransferEvent) -> Void)?

    package init(
        mode: Mode, observer: (@Sendable (TransferProgress) -> Void)? = nil,
        events: (@Sendable (TransferEvent) -> Void)? = nil
    ) {
        self.mode = mode
        self.observer = observer
        self.events = events
    }

    /// A bar when standard error is a terminal, plain lines otherwise.
    package static func automatic(quiet: Bool, json: Bool, verbose: Bool = false) -> ProgressReporter {
        let reporter = ProgressReporter(
            mode: json ? .json : quiet ? .quiet : Syscalls.stderrIsTerminal ? .terminal : .lines)
        reporter.verbose = verbose
        return reporter
    }

    /// Whether a progress line is open on the terminal (process-wide: there is one standard error).
    nonisolated(unsafe) private static var lineOpen = false
    private static let lineLock = NSLock()

    /// Ends an open progress line, so that whatever is written next (an error) starts on a line of its own.
    package static func endLine() {
        lineLock.withLock {
            if lineOpen {
                Console.writeOrLeave("\r\u{1B}[K", to: .error)
                lineOpen = false
            }
        }
    }

    /// A status line on standard error, after ending any progress line.
    package static func status(_ text: String) {
        endLine()
        Console.writeOrLeave(text + "\n", to: .error)
    }

    /// A line of narrative (what was offered, chosen, why). `detail`: shown on a terminal or in lines only with
    /// `verbose` (a JSON event is always written).
    package func note(_ text: String, event: String, fields: [String: Any] = [:], detail: Bool = false) {
        display.withLock { display in
            switch mode {
            case .quiet: return
            case .json: emit(["event": event, "message": text].merging(fields) { a, _ in a })
            case .terminal, .lines:
                if !detail || display.verbose { Self.status(text) }
            }
        }
    }

    /// The plain line of an item the receiver chose: "sending holiday.mov (1.2 GiB, MPEG-4 movie)".
    private func sendingLine(item: Int, label: String, contentType: String) -> String {
        let size = display.withLock { display in
            item < display.offeredItems.count
                ? display.offeredItems[item].representations.first { $0.contentType == contentType }?.size : nil
        }
        let name = PendingOffers.kind(of: contentType, label: label)
        let what = [size.map { Self.bytes($0) }, name == label ? nil : name].compactMap { $0 }
        return "sending \(label)" + (what.isEmpty ? "" : " (\(what.joined(separator: ", ")))")
    }

    /// Prints a received text or URL on standard output (always, even when quiet: it is the output), followed by a
    /// newline if it has none; `exactly`: its bytes and nothing else (`share paste | od -c`). On a terminal the
    /// newline is always added, and control characters other than newline and tab are shown as `\u{…}`: a peer's
    /// text must not drive the terminal (escape sequences). Throws when the reader of standard output went away:
    /// the text cannot be delivered, and the transfer stops (the sender is told why).
    package func output(_ text: String, exactly: Bool = false, fields: [String: Any] = [:]) throws(Console.ReaderGone) {
        // Under the display's lock: the text and a progress line are never written over each other.
        try display.withLock { _ throws(Console.ReaderGone) in
            if mode == .json {
                try emitting(["event": "received-text", "text": text].merging(fields) { a, _ in a })
            } else if Syscalls.stdoutIsTerminal {
                Self.endLine()
                let shown = Self.neutralized(text)
                try Console.write(shown.hasSuffix("\n") ? shown : shown + "\n", to: .output)
            } else {
                try Console.write(exactly || text.hasSuffix("\n") ? text : text + "\n", to: .output)
            }
        }
    }

    /// `text` with C0/C1 control characters (except newline and tab) written as `\u{XX}`.
    package static func neutralized(_ text: String) -> String {
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            let value = scalar.value
            if (value < 0x20 && scalar != "\n" && scalar != "\t") || (0x7F...0x9F).contains(value) {
                out.append(contentsOf: "\\u{\(String(value, radix: 16))}".unicodeScalars)
            } else {
                out.append(scalar)
            }
        }
        return String(out)
    }

    package func setSessionTotal(_ bytes: UInt64, count: Int) {
        display.withLock { display in
            display.sessionTotal = bytes
            display.itemCount = count
        }
    }

    package func startItem(_ label: String, number: Int, total: UInt64?, alreadyHeld: UInt64) {
        display.withLock { display in
            display.label = label
            display.itemNumber = number
            display.itemTotal = total
            display.itemDone = alreadyHeld
            display.sessionDone += alreadyHeld
            display.moved = 0
            display.itemStart = ContinuousClock.now
            // The first line comes after one interval: small items finish without any progress noise.
            display.lastDraw = ContinuousClock.now
            observe(&display, display.lastDraw, force: true)
        }
    }

    /// Testing only (`SHARE_TEST_SEND_RATE`, bytes per second): a sender waits after each chunk, so that a test
    /// can watch a transfer under way and cancel it half way. The agent says so when it starts.
    package static let testSendRate: Double? = ProcessInfo.processInfo.environment["SHARE_TEST_SEND_RATE"].flatMap(
        Double.init
    ).flatMap { $0 > 0 ? $0 : nil }

    package func advance(_ bytes: Int) {
        display.withLock { display in
            display.itemDone += UInt64(bytes)
            display.sessionDone += UInt64(bytes)
            display.moved += UInt64(bytes)
            let now = ContinuousClock.now
            observe(&display, now, force: false)
            let interval: Duration =
                mode == .terminal ? .milliseconds(100) : mode == .lines ? .seconds(3) : .seconds(1)
            guard now - display.lastDraw >= interval else { return }
            display.lastDraw = now
            draw(display, now)
        }
    }

    /// Shows a transfer that runs elsewhere (an agent's job, for `share send --wait`), as if it ran here.
    package func show(_ snapshot: TransferProgress) {
        display.withLock { display in
            let now = ContinuousClock.now
            if snapshot.item != display.label || snapshot.number != display.itemNumber {
                display.label = snapshot.item
                display.itemNumber = snapshot.number
                display.itemStart = now
                display.lastDraw = now - .seconds(10)
            }
            display.itemCount = snapshot.count
            display.itemTotal = snapshot.itemTotal
            display.itemDone = snapshot.itemBytes
            display.drawnRate = snapshot.rate
            let interval: Duration =
                mode == .terminal ? .milliseconds(100) : mode == .lines ? .seconds(3) : .seconds(1)
            guard now - display.lastDraw >= interval else { return }
            display.lastDraw = now
            draw(display, now)
            display.drawnRate = nil
        }
    }

    package func finishItem() {
        display.withLock { display in
            if mode == .terminal { draw(display, ContinuousClock.now) }
            Self.endLine()
        }
    }

    /// Called with the display locked.
    private func observe(_ display: inout Display, _ now: ContinuousClock.Instant, force: Bool) {
        guard let observer, force || now - display.lastObserved >= .milliseconds(250) else { return }
        display.lastObserved = now
        let seconds = max((now - display.itemStart).seconds, 0.001)
        observer(
            TransferProgress(
                item: display.label, number: display.itemNumber, count: display.itemCount,
                itemBytes: display.itemDone, itemTotal: display.itemTotal, bytes: display.sessionDone,
                total: display.sessionTotal, rate: UInt64(Double(display.moved) / seconds)))
    }

    /// Called with the display locked.
    private func draw(_ display: Display, _ now: ContinuousClock.Instant) {
        let (label, itemNumber, itemCount, itemDone, itemTotal) = (
            display.label, display.itemNumber, display.itemCount, display.itemDone, display.itemTotal
        )
        let seconds = max((now - display.itemStart).seconds, 0.001)
        let rate = display.drawnRate.map(Double.init) ?? Double(display.moved) / seconds
        var left: String?
        if let total = itemTotal, rate > 0, total >= itemDone {
            left = Self.duration(Double(total - itemDone) / rate) + " left"
        }
        switch mode {
        case .terminal:
            let line = Self.bar(
                label: label, number: itemNumber, count: itemCount, done: itemDone, total: itemTotal,
                rate: UInt64(rate), left: left, width: Syscalls.stderrColumns ?? 80)
            Self.lineLock.withLock {
                Console.writeOrLeave("\r\u{1B}[K" + line, to: .error)
                Self.lineOpen = true
            }
        case .lines:
            let head = itemCount > 1 ? "[\(itemNumber)/\(itemCount)] " : ""
            let percent = itemTotal.map {
                $0 == 0 ? " 100%" : String(format: " %.0f%%", Double(itemDone) * 100 / Double($0))
            }
            let size = itemTotal.map { "\(Self.bytes(itemDone))/\(Self.bytes($0))" } ?? Self.bytes(itemDone)
            let speed = rate >= 1 ? " \(Self.bytes(UInt64(rate)))/s" : ""
            Self.status("progress: \(head)\(label)\(percent ?? "") \(size)\(speed)\(left.map { " " + $0 } ?? "")")
        case .json:
            var fields: [String: Any] = ["event": "progress", "item": label, "bytes": itemDone, "rate": Int(rate)]
            if let total = itemTotal { fields["total"] = total }
            emit(fields)
        case .quiet:
            break
        }
    }

    /// One progress line that fits `width` columns: `[2/5] holi…y.mov [#####-----] 45% 1.2/2.0 GiB 98.0 MiB/s 0:08
    /// left`. The name is shortened in the middle, then the bar narrowed and dropped, then the statistics.
    package static func bar(
        label: String, number: Int, count: Int, done: UInt64, total: UInt64?, rate: UInt64, left: String?, width: Int
    ) -> String {
        let room = max(width - 1, 20)  // the last column would wrap on some terminals
        let head = count > 1 ? "[\(number)/\(count)] " : ""
        let fraction = total.map { $0 == 0 ? 1 : min(1, Double(done) / Double($0)) }
        var stats = [fraction.map { String(format: "%3.0f%%", $0 * 100) } ?? ""]
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
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        try Console.write(String(decoding: data, as: UTF8.self) + "\n", to: .output)
    }

    package static func bytes(_ count: UInt64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f %@", value, units[unit])
    }

    package static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite else { return "?" }
        let s = Int(seconds.rounded())
        return s >= 3600
            ? String(format: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60) : String(format: "%d:%02d", s / 60, s % 60)
    }
}

extension ProgressReporter {
    /// The sending side's events as lines and progress.
    package func senderEvents(peer: String) -> TransferEvents {
        { [self] event in
            events?(event)
            switch event {
            case .offered(let items):
                display.withLock { $0.offeredItems = items }
                for item in items {
                    note(
                        "offered \(item.label): " + item.representations.map(\.contentType).joined(separator: ", "),
                        event: "offered",
                        fields: ["item": item.label, "types": item.representations.map(\.contentType)], detail: true)
                }
            case .refused(_, let label, _, let reason):
                note(
                    "refused by \(peer): \(label): \(reason)", event: "refused",
                    fields: ["item": label, "reason": reason])
            case .chosen(let item, let label, _, let type, let reason):
                if verbose || mode == .json {
                    note(
                        "chosen for \(label): \(type) (\(reason))", event: "chosen",
                        fields: ["item": label, "type": type])
                } else {
                    note(sendingLine(item: item, label: label, contentType: type), event: "chosen")
                }
            case .selected, .answered:
                break
            case .started(_, let label, let number, let total, let held):
                startItem(label, number: number, total: total, alreadyHeld: held)
                if held > 0 {
                    let left = total.map { " sending \(Self.bytes($0 - min($0, held)))" } ?? ""
                    note(
                        "resuming \(label): the receiver holds \(Self.bytes(held)) verified;\(left)", event: "resume",
                        fields: ["item": label, "held": held])
                }
            case .progress(let bytes):
                advance(bytes)
                if let rate = Self.testSendRate { usleep(UInt32(min(1, Double(bytes) / rate) * 1_000_000)) }
            case .finished:
                finishItem()
            case .delivered(_, let label, let ack):
                let whereTo = ack.savedAs.map { " as \($0)" } ?? ""
                // Said by default only when it is news: an item kept or passed on, or saved under another name.
                let expected = ["saved", "printed"].contains(ack.outcome) && (ack.savedAs ?? label) == label
                note(
                    "delivered \(label) to \(peer): \(ack.outcome)\(whereTo)", event: "delivered",
                    fields: ["item": label, "outcome": ack.outcome, "savedAs": ack.savedAs ?? ""], detail: expected)
            case .completed:
                break
            }
        }
    }

    /// The receiving side's events as lines and progress.
    package func receiverEvents(peer: String) -> TransferEvents {
        { [self] event in
            events?(event)
            switch event {
            case .chosen(_, let label, let offered, let type, let reason):
                note(
                    "from \(peer): \(label): offered \(offered.joined(separator: ", ")); chose \(type) — \(reason)",
                    event: "chosen", fields: ["item": label, "type": type, "offered": offered], detail: true)
            case .refused(_, let label, let offered, let reason):
                note(
                    "from \(peer): \(label): offered \(offered.joined(separator: ", ")); refused — \(reason)",
                    event: "refused", fields: ["item": label, "reason": reason])
            case .selected(let count, let total):
                setSessionTotal(total, count: count)
            case .started(_, let label, let number, let total, let held):
                if held > 0 {
                    note(
                        "resuming \(label): \(Self.bytes(held)) already verified", event: "resume",
                        fields: ["item": label, "held": held])
                }
                startItem(label, number: number, total: total, alreadyHeld: held)
            case .progress(let bytes):
                advance(bytes)
            case .finished:
                finishItem()
            case .offered, .delivered, .completed, .answered:
                break
            }
        }
    }
}
