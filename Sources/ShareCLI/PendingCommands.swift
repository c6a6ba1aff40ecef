import ArgumentParser
import FoundationEssentials
import ShareCommandLine
import ShareKit
import ShareTrust
import ShareProtocol
import ShareEngine
import ShareAgent

struct PendingCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pending",
        abstract: "List offers waiting for your answer: who sends what (title, type, size, a preview image).",
        discussion: helpPage(
            "The agent holds an offer from a device whose offers wait for your answer (every device that is not one of your own, unless trusted with --no-ask) and tells the desktop where there is one. Nothing is received until you accept; the sender offers again every few seconds, or its agent when it next reaches this one. A pending offer is forgotten after a day.",
            examples: ["share pending", "share accept 3f2a9c1b", "share decline 3f2a9c1b --reason \"not now\""]))

    @OptionGroup var device: DeviceOptions

    @Flag(help: "One JSON array of pending offers.")
    var json = false

    func run() throws {
        try ShareCLI.run {
            let book = PendingOffers.load(device.paths)
            // An offer whose sender stopped offering it leaves the list: an answer would reach nobody.
            let unanswered = book.entries.filter { $0.answer == nil }
            let waiting = unanswered.filter { !$0.senderGone() }
            let gone = unanswered.count - waiting.count
            if json {
                try sayJSON(waiting)
                return
            }
            if waiting.isEmpty {
                tell(
                    "no offers wait for an answer"
                        + (gone > 0 ? " (\(gone) whose sender stopped offering it: it arrives only if sent again)" : "")
                )
                return
            }
            for entry in waiting {
                say("\(entry.id)  from \(ProgressReporter.neutralized(entry.fromName)): \(entry.itemCount) item(s)")
                for item in entry.items {
                    var line = "    " + ProgressReporter.neutralized(PendingOffers.describe(item))
                    if let image = item.image {
                        line += "  (preview: \(PendingOffers.folder(device.paths).appendingPathComponent(image).path))"
                    }
                    say(line)
                }
                if let more = entry.more { say("    … and \(more) more") }
            }
            if gone > 0 {
                tell("\(gone) more whose sender stopped offering it (it arrives only if sent again) are not listed")
            }
            if let aside = PendingOffers.keptAside(device.paths) {
                complain("an unreadable pending book was kept aside as \(aside.path); offers in it were lost")
            }
        }
    }

    /// "the sender stopped offering it 4 min ago; it arrives only if sent again"
    static func gone(_ entry: PendingOffers.Entry) -> String {
        let seconds = Date().timeIntervalSince(entry.lastOffered ?? entry.created)
        let ago = seconds < 120 ? "\(Int(seconds)) s" : "\(Int(seconds / 60)) min"
        return "the sender stopped offering it \(ago) ago; it arrives only if sent again"
    }
}

struct AcceptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accept",
        abstract: "Accept an offer that waits for your answer: its items arrive when the sender offers it again.",
        discussion: helpPage(examples: ["share pending", "share accept 3f2a9c1b"]))

    @OptionGroup var device: DeviceOptions

    @Argument(help: ArgumentHelp("The pending offer's ID (see: share pending).", valueName: "id"))
    var id: String

    func run() throws {
        try ShareCLI.run {
            guard let entry = try PendingOffers.answer(id, .accepted, paths: device.paths) else {
                throw ShareError(.usage, "no offer \(id) waits for an answer (see: share pending)")
            }
            if entry.senderGone() {
                throw ShareError(
                    .unavailable,
                    "accepted \(entry.itemCount) item(s) from \(entry.fromName), but nothing can arrive now: "
                        + PendingCommand.gone(entry))
            }
            // A LocalSend device waits on its upload for the answer; a share device offers again.
            tell(
                "accepted \(entry.itemCount) item(s) from \(entry.fromName): "
                    + (entry.from.hasPrefix("localsend:")
                        ? "they arrive now if it still waits, else when it sends them again"
                        : "they arrive when it offers them again"))
        }
    }
}

struct DeclineCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decline",
        abstract: "Decline an offer that waits for your answer: the sender is told, with your reason.",
        discussion: helpPage(examples: [
            "share decline 3f2a9c1b", "share decline 3f2a9c1b --reason \"not on this machine\"",
        ]))

    @OptionGroup var device: DeviceOptions

    @Argument(help: ArgumentHelp("The pending offer's ID (see: share pending).", valueName: "id"))
    var id: String

    @Option(help: "A reason the sender sees.")
    var reason: String?

    func run() throws {
        try ShareCLI.run {
            let reason = reason.map { OutgoingItem.title($0) }
            guard let entry = try PendingOffers.answer(id, .declined, reason: reason, paths: device.paths) else {
                throw ShareError(.usage, "no offer \(id) waits for an answer (see: share pending)")
            }
            tell(
                "declined \(entry.itemCount) item(s) from \(entry.fromName): "
                    + (entry.from.hasPrefix("localsend:")
                        ? "it is told now if it still waits, else when it sends them again"
                        : "it is told when it offers them again"))
        }
    }
}
