import Synchronization
import FoundationEssentials
import ShareText
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

/// Where a transfer's position stands when it is shown: the item, its number, and the bytes and rate.
package struct ProgressFrame: Sendable {
    package var label: String
    package var number: Int
    package var count: Int
    package var done: UInt64
    package var total: UInt64?
    /// Bytes per second over the item so far.
    package var rate: Double
    /// Seconds left at that rate, when the total is known and something moved.
    package var secondsLeft: Double?
}

/// What renders a transfer for a person or a script (the CLI's bar, lines or JSON events): the engine says what
/// happens (narrative lines, a received text, where the transfer stands) and never writes to a terminal itself.
package protocol ProgressRenderer: AnyObject, Sendable {
    /// Whether lines of detail (what was offered, chosen and why) are wanted.
    var verbose: Bool { get }
    /// How often a frame may be drawn.
    var interval: Duration { get }
    /// A line of narrative; `event` and `fields` name it for scripts; `detail`: shown only when verbose.
    func note(_ text: String, event: String, fields: [String: Any], detail: Bool)
    /// A received text or URL, which is the output (written even when nothing else is).
    func output(_ text: String, exactly: Bool, fields: [String: Any]) throws(Console.ReaderGone)
    /// Where the transfer stands now.
    func draw(_ frame: ProgressFrame)
    /// The item ended (`frame`: where it stood).
    func finishItem(_ frame: ProgressFrame)
}

/// A transfer's events as they happen: counted into its position (for an observer such as the agent's outbox, at
/// most four times a second), passed to a library caller's handler, and told to a renderer when one is set (the
/// CLI's). Without a renderer nothing is shown and a received text is written plainly on standard output.
package final class ProgressReporter: Sendable {
    private let renderer: (any ProgressRenderer)?
    private let observer: (@Sendable (TransferProgress) -> Void)?

    /// Where the transfer stands, behind one lock: every event of a transfer updates it and may draw it.
    private struct Display {
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

    /// Lines about the negotiation too (what was offered, what the receiver chose and why).
    package var verbose: Bool { renderer?.verbose ?? false }

    /// Every transfer event as it comes, besides the lines and the bar (a library caller's own handling).
    private let events: (@Sendable (TransferEvent) -> Void)?

    package init(
        renderer: (any ProgressRenderer)? = nil, observer: (@Sendable (TransferProgress) -> Void)? = nil,
        events: (@Sendable (TransferEvent) -> Void)? = nil
    ) {
        self.renderer = renderer
        self.observer = observer
        self.events = events
    }

    /// A line of narrative (what was offered, chosen, why). `detail`: shown only when verbose (a script's event is
    /// always written).
    package func note(_ text: String, event: String, fields: [String: Any] = [:], detail: Bool = false) {
        guard let renderer else { return }
        display.withLock { _ in renderer.note(text, event: event, fields: fields, detail: detail) }
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

    /// A received text or URL: the output (always, even when nothing else is shown), followed by a newline if it
    /// has none; `exactly`: its bytes and nothing else. Throws when the reader of standard output went away: the
    /// text cannot be delivered, and the transfer stops (the sender is told why).
    package func output(_ text: String, exactly: Bool = false, fields: [String: Any] = [:]) throws(Console.ReaderGone) {
        // Under the display's lock: the text and a progress line are never written over each other.
        try display.withLock { _ throws(Console.ReaderGone) in
            if let renderer {
                try renderer.output(text, exactly: exactly, fields: fields)
            } else {
                try Console.write(exactly || text.hasSuffix("\n") ? text : text + "\n", to: .output)
            }
        }
    }

    /// `text` with C0/C1 control characters (except newline and tab) written as `\u{XX}`: a peer's words must not
    /// drive the terminal they are shown on (escape sequences).
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
            // The first frame comes after one interval: small items finish without any progress noise.
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
            guard let renderer, now - display.lastDraw >= renderer.interval else { return }
            display.lastDraw = now
            renderer.draw(Self.frame(display, now))
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
            guard let renderer, now - display.lastDraw >= renderer.interval else { return }
            display.lastDraw = now
            renderer.draw(Self.frame(display, now))
            display.drawnRate = nil
        }
    }

    package func finishItem() {
        display.withLock { display in renderer?.finishItem(Self.frame(display, ContinuousClock.now)) }
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
    private static func frame(_ display: Display, _ now: ContinuousClock.Instant) -> ProgressFrame {
        let seconds = max((now - display.itemStart).seconds, 0.001)
        let rate = display.drawnRate.map(Double.init) ?? Double(display.moved) / seconds
        var left: Double?
        if let total = display.itemTotal, rate > 0, total >= display.itemDone {
            left = Double(total - display.itemDone) / rate
        }
        return ProgressFrame(
            label: display.label, number: display.itemNumber, count: display.itemCount, done: display.itemDone,
            total: display.itemTotal, rate: rate, secondsLeft: left)
    }

    package static func bytes(_ count: UInt64) -> String { Format.bytes(count, small: "B") }

    package static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite else { return "?" }
        let s = Int(seconds.rounded())
        return s >= 3600
            ? Format.c("%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60) : Format.c("%ld:%02ld", s / 60, s % 60)
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
                if verbose {
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
