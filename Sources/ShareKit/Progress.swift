import Foundation
import ShareProtocol

/// A transfer's position, as `share status` shows a running job: the item in progress and the whole session.
public struct TransferProgress: Codable, Sendable, Equatable {
    public var item: String
    /// The item's number (from 1) and the number of items in the session.
    public var number: Int
    public var count: Int
    public var itemBytes: UInt64
    public var itemTotal: UInt64?
    public var bytes: UInt64
    public var total: UInt64
    /// Bytes per second over the item so far.
    public var rate: UInt64
}

/// What the user sees while items move: a redrawn line on a terminal, periodic plain lines otherwise, JSON events
/// for scripts, or nothing. An observer (the agent's outbox) gets a `TransferProgress` at most four times a second.
public final class ProgressReporter: @unchecked Sendable {  // guarded by `lock`
    public enum Mode: Sendable { case terminal, lines, json, quiet }

    public let mode: Mode
    private let observer: (@Sendable (TransferProgress) -> Void)?
    private var lastObserved = ContinuousClock.now
    private let lock = NSLock()
    private var label = ""
    private var itemNumber = 0
    private var itemCount = 0
    private var itemTotal: UInt64?
    private var itemDone: UInt64 = 0
    private var sessionTotal: UInt64 = 0
    private var sessionDone: UInt64 = 0
    private var moved: UInt64 = 0
    private var itemStart = ContinuousClock.now
    private var lastDraw = ContinuousClock.now
    private var lineOpen = false

    public init(mode: Mode, observer: (@Sendable (TransferProgress) -> Void)? = nil) {
        self.mode = mode
        self.observer = observer
    }

    /// Terminal when stdout is one, plain lines otherwise.
    public static func automatic(quiet: Bool, json: Bool) -> ProgressReporter {
        ProgressReporter(mode: json ? .json : quiet ? .quiet : Syscalls.stdoutIsTerminal ? .terminal : .lines)
    }

    /// A line of narrative (what was offered, chosen, why).
    public func note(_ text: String, event: String, fields: [String: Any] = [:]) {
        lock.lock()
        defer { lock.unlock() }
        switch mode {
        case .quiet: return
        case .json: emit(["event": event, "message": text].merging(fields) { a, _ in a })
        case .terminal, .lines:
            clearLine()
            write(text + "\n")
        }
    }

    /// Prints a received text or URL (always, even when quiet: it is the output). On a terminal, control characters
    /// other than newline and tab are shown as `\u{…}`: a peer's text must not drive the terminal (escape sequences).
    public func output(_ text: String, fields: [String: Any] = [:]) {
        lock.lock()
        defer { lock.unlock() }
        if mode == .json {
            emit(["event": "received-text", "text": text].merging(fields) { a, _ in a })
        } else {
            clearLine()
            let shown = Syscalls.stdoutIsTerminal ? Self.neutralized(text) : text
            write(shown.hasSuffix("\n") ? shown : shown + "\n")
        }
    }

    /// `text` with C0/C1 control characters (except newline and tab) written as `\u{XX}`.
    public static func neutralized(_ text: String) -> String {
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

    public func setSessionTotal(_ bytes: UInt64, count: Int) {
        lock.lock()
        sessionTotal = bytes
        itemCount = count
        lock.unlock()
    }

    public func startItem(_ label: String, number: Int, total: UInt64?, alreadyHeld: UInt64) {
        lock.lock()
        defer { lock.unlock() }
        self.label = label
        itemNumber = number
        itemTotal = total
        itemDone = alreadyHeld
        sessionDone += alreadyHeld
        moved = 0
        itemStart = ContinuousClock.now
        // The first line comes after one interval: small items finish without any progress noise.
        lastDraw = ContinuousClock.now
        observe(lastDraw, force: true)
    }

    public func advance(_ bytes: Int) {
        lock.lock()
        defer { lock.unlock() }
        itemDone += UInt64(bytes)
        sessionDone += UInt64(bytes)
        moved += UInt64(bytes)
        let now = ContinuousClock.now
        observe(now, force: false)
        let interval: Duration = mode == .terminal ? .milliseconds(100) : .seconds(1)
        guard now - lastDraw >= interval else { return }
        lastDraw = now
        draw(now)
    }

    public func finishItem() {
        lock.lock()
        defer { lock.unlock() }
        if mode == .terminal { draw(ContinuousClock.now) }
        clearLine()
    }

    /// Called with `lock` held.
    private func observe(_ now: ContinuousClock.Instant, force: Bool) {
        guard let observer, force || now - lastObserved >= .milliseconds(250) else { return }
        lastObserved = now
        let seconds = max((now - itemStart).seconds, 0.001)
        observer(
            TransferProgress(
                item: label, number: itemNumber, count: itemCount, itemBytes: itemDone, itemTotal: itemTotal,
                bytes: sessionDone, total: sessionTotal, rate: UInt64(Double(moved) / seconds)))
    }

    private func draw(_ now: ContinuousClock.Instant) {
        let seconds = max((now - itemStart).seconds, 0.001)
        let rate = Double(moved) / seconds
        let percent = itemTotal.map { $0 == 0 ? 100 : Double(itemDone) * 100 / Double($0) }
        var left = ""
        if let total = itemTotal, rate > 0, total >= itemDone {
            left = " " + Self.duration(Double(total - itemDone) / rate) + " left"
        }
        let sizeText = itemTotal.map { "\(Self.bytes(itemDone))/\(Self.bytes($0))" } ?? Self.bytes(itemDone)
        let overall =
            sessionTotal > 0 ? String(format: " | total %.0f%%", Double(sessionDone) * 100 / Double(sessionTotal)) : ""
        let head = itemCount > 1 ? "[\(itemNumber)/\(itemCount)] " : ""
        switch mode {
        case .terminal:
            let text =
                "\(head)\(label) \(percent.map { String(format: "%.0f%%", $0) } ?? "") \(sizeText) \(Self.bytes(UInt64(rate)))/s\(left)\(overall)"
            write("\r\u{1B}[K" + text)
            lineOpen = true
        case .lines:
            write(
                "progress: \(head)\(label) \(percent.map { String(format: "%.0f%%", $0) } ?? "") \(sizeText) \(Self.bytes(UInt64(rate)))/s\(left)\(overall)\n"
            )
        case .json:
            var fields: [String: Any] = ["event": "progress", "item": label, "bytes": itemDone, "rate": Int(rate)]
            if let total = itemTotal { fields["total"] = total }
            emit(fields)
        case .quiet:
            break
        }
    }

    private func clearLine() {
        if lineOpen {
            write("\r\u{1B}[K")
            lineOpen = false
        }
    }

    private func emit(_ object: [String: Any]) {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        write(String(decoding: data, as: UTF8.self) + "\n")
    }

    private func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    public static func bytes(_ count: UInt64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f %@", value, units[unit])
    }

    static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite else { return "?" }
        let s = Int(seconds.rounded())
        return s >= 3600
            ? String(format: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60) : String(format: "%d:%02d", s / 60, s % 60)
    }
}

extension ProgressReporter {
    /// The sending side's events as lines and progress.
    public func senderEvents(peer: String) -> TransferEvents {
        { [self] event in
            switch event {
            case .offered(let items):
                for item in items {
                    note(
                        "offered \(item.label): " + item.representations.map(\.contentType).joined(separator: ", "),
                        event: "offered",
                        fields: ["item": item.label, "types": item.representations.map(\.contentType)])
                }
            case .refused(_, let label, _, let reason):
                note(
                    "refused by \(peer): \(label): \(reason)", event: "refused",
                    fields: ["item": label, "reason": reason])
            case .chosen(_, let label, _, let type, let reason):
                note(
                    "chosen for \(label): \(type) (\(reason))", event: "chosen", fields: ["item": label, "type": type])
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
            case .finished:
                finishItem()
            case .delivered(_, let label, let ack):
                let whereTo = ack.savedAs.map { " as \($0)" } ?? ""
                note(
                    "delivered \(label) to \(peer): \(ack.outcome)\(whereTo)", event: "delivered",
                    fields: ["item": label, "outcome": ack.outcome, "savedAs": ack.savedAs ?? ""])
            case .completed:
                break
            }
        }
    }

    /// The receiving side's events as lines and progress.
    public func receiverEvents(peer: String) -> TransferEvents {
        { [self] event in
            switch event {
            case .chosen(_, let label, let offered, let type, let reason):
                note(
                    "from \(peer): \(label): offered \(offered.joined(separator: ", ")); chose \(type) — \(reason)",
                    event: "chosen", fields: ["item": label, "type": type, "offered": offered])
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
