import Testing

@testable import ShareKit
@testable import ShareCLI
import ShareTrust
import ShareReach
import ShareProtocol
import ShareEngine
import ShareAgent

/// The progress line fits the terminal, shortens long names in the middle, and keeps the numbers a person reads.
@Suite struct ProgressBarTests {
    @Test(arguments: [40, 60, 80, 120, 200])
    func theLineFitsTheTerminal(width: Int) {
        let line = TerminalProgress.bar(
            label: "a holiday video with a very long name from the summer of 2026.mov", number: 2, count: 5,
            done: 300 << 20, total: 1 << 30, rate: 98 << 20, left: "0:07 left", width: width)
        #expect(line.count < width, "\(line.count) columns: \(line)")
        #expect(line.hasPrefix("[2/5] a ho"))
        #expect(line.contains("…") == (width < 150), "the name is shortened in the middle when it must: \(line)")
        #expect(line.contains("mov "), "the end of the name is kept: \(line)")
        #expect(line.hasSuffix("left") || width < 80, "\(line)")
        if width >= 80 {
            #expect(line.contains("[") && line.contains("#") && line.contains("-]"), "a bar: \(line)")
            #expect(line.contains(" 29%") && line.contains("300.0 MiB/1.0 GiB") && line.contains("98.0 MiB/s"))
        }
    }

    @Test func aShortNameIsShownWholeAndTheBarIsFull() {
        let line = TerminalProgress.bar(
            label: "notes.txt", number: 1, count: 1, done: 10, total: 10, rate: 10, left: nil, width: 80)
        #expect(line.hasPrefix("notes.txt ["))
        #expect(!line.contains("-]") && line.contains("100%"), "\(line)")
        #expect(line.count < 80)
    }

    @Test func anUnsizedItemHasNoBar() {
        let line = TerminalProgress.bar(
            label: "standard input", number: 1, count: 1, done: 5 << 20, total: nil, rate: 1 << 20, left: nil,
            width: 80)
        #expect(!line.contains("["), "\(line)")
        #expect(line.contains("5.0 MiB") && line.contains("1.0 MiB/s"))
    }

    /// Before a byte has moved (a queued job's first look) the line says where it stands, with no rate of nothing.
    @Test func aLineBeforeAnyByteMovedHasNoRate() {
        let line = TerminalProgress.bar(
            label: "big.bin", number: 1, count: 1, done: 0, total: 300 << 20, rate: 0, left: nil, width: 80)
        #expect(line.contains("0 B/300.0 MiB") && !line.contains("B/s"), "\(line)")
    }
}
