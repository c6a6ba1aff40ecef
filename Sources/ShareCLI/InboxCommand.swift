import ArgumentParser
import FoundationEssentials
import ShareText
import ShareKit
import ShareTrust
import ShareProtocol
import ShareEngine
import ShareAgent

struct InboxCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inbox",
        abstract: "List what the agent received: text and URLs, then files and folders by device.",
        discussion: helpPage(
            "Texts and URLs come first (newest last), then the files and folders each device sent, by device.",
            examples: ["share inbox", "share inbox --last 5", "share inbox --json"]))

    @OptionGroup var device: DeviceOptions

    @Option(help: ArgumentHelp("The agent's inbox (default: DATA/inbox).", valueName: "folder"))
    var inbox: String?

    @Option(help: "Show only the last N text items.")
    var last: Int?

    @Flag(help: "One JSON object per line.")
    var json = false

    func run() throws {
        try ShareCLI.run {
            let folder = inbox.map { URL(fileURLWithPath: $0, isDirectory: true) } ?? device.paths.inbox
            let box = AgentInbox(directory: folder)
            var texts = box.history.entries()
            if let last { texts = Array(texts.suffix(max(0, last))) }
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .internetDate
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            for entry in texts {
                if json {
                    say(String(decoding: try encoder.encode(entry), as: UTF8.self))
                } else {
                    say(
                        "\(InternetDate.string(entry.date))  \(entry.from): \(ProgressReporter.neutralized(entry.text))"
                    )
                }
            }
            for (peer, items) in box.listing() {
                for item in items.map(\.name) {
                    let path = folder.appendingPathComponent(peer).appendingPathComponent(item).path
                    if json {
                        let object = ["from": peer, "path": path]
                        say(
                            String(
                                decoding: try JSONText.bytes(object, sortedKeys: true, escapingSlashes: false),
                                as: UTF8.self))
                    } else {
                        say("\(peer): \(path)")
                    }
                }
            }
        }
    }
}
