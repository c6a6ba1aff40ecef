import ArgumentParser
import CoreTransferable
import FoundationEssentials
import ShareCommandLine
import ShareKit
import ShareTrust
import ShareReach
import ShareProtocol
import ShareEngine
import ShareAgent

struct CopyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "copy",
        abstract: "Put files, text, a URL or a profile on the clipboard your own devices can paste from.",
        discussion: helpPage(
            "Lazy, like Universal Clipboard: your other devices learn only the item's types and sizes when they ask, and bytes are produced only when one of them pastes. A newer copy replaces an older one. Needs this device's agent running.",
            examples: [
                "share copy --text \"the door code is 4711\"", "share copy report.pdf --expire 600",
                "share copy --profile Juan",
            ]))

    @OptionGroup var device: DeviceOptions

    @Argument(help: ArgumentHelp("Files or folders to copy.", valueName: "file"))
    var files: [String] = []

    @Option(help: "Copy this text.") var text: [String] = []
    @Option(help: "Copy this URL.") var url: [String] = []
    @Option(help: ArgumentHelp("Copy this profile (name or id).", valueName: "name")) var profile: [String] = []

    @Option(help: ArgumentHelp("Seconds until the copy expires.", valueName: "seconds"))
    var expire: Double = 3600

    func validate() throws {
        if files.isEmpty && text.isEmpty && url.isEmpty && profile.isEmpty {
            throw ValidationError("nothing to copy: give files, --text, --url or --profile")
        }
        guard expire > 0 else { throw ValidationError("--expire must be positive") }
        for link in url where URL(string: link)?.scheme == nil {
            throw ValidationError("'\(link)' is not an absolute URL")
        }
    }

    func run() throws {
        try ShareCLI.run {
            let paths = device.paths
            var item = ClipboardItem(expiresIn: expire)
            item.files = files.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
            // Check now: a missing file is an error here, not at paste time.
            var check = SendItems()
            try check.add(paths: item.files.map { URL(fileURLWithPath: $0) })
            try check.add(profiles: profile, all: false, catalogFile: paths.profilesFile)
            item.texts = text
            item.urls = url
            item.profiles = profile
            _ = try ControlClient.request(.copy(item), paths: paths)
            tell("copied; your devices can paste it for \(Int(expire)) s (share paste)")
        }
    }
}

struct PasteCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paste",
        abstract: "Paste what one of your devices copied: text and URLs to standard output, files into a folder.",
        discussion: helpPage(
            "Without --from, asks each of your own devices (trusted with --team) what it has copied and takes the newest. The item arrives as its best representation for --type (default: anything): text and URLs are written to standard output exactly as copied (no newline added), files into --into, profiles into the catalog.",
            examples: [
                "share paste", "share paste --from laptop --type public.plain-text | wc -c",
                "share paste --into ~/Downloads",
            ]))

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    @Option(help: ArgumentHelp("The device to paste from (name or ID).", valueName: "peer")) var from: String?

    @Option(help: ArgumentHelp("Accept only this type (repeatable, in order of preference).", valueName: "uti"))
    var type: [String] = []

    @Option(help: ArgumentHelp("Where files go (default: the current folder).", valueName: "folder"))
    var into: String?

    @Option(help: "Seconds to wait for connect and handshake.") var timeout: Double = 5

    func run() throws {
        try ShareCLI.run {
            let local = try device.loadDevice()
            let trust = try device.loadTrust()
            let heard = DiscoveredPeer.load(local.paths)
            let reached = ReachedAddresses.load(local.paths)
            let reach = try ReachSettings.load(local.paths)
            let timeouts = SessionTimeouts(connect: timeout, handshake: timeout, idle: 60)
            var entries = try type.map { AcceptedType(try parseType($0)) }
            if entries.isEmpty { entries = [AcceptedType(.item)] }
            var options = ReceiveOptions(
                directory: URL(fileURLWithPath: into ?? ".", isDirectory: true).standardizedFileURL,
                accept: AcceptList(entries, declarations: UTType.registeredTypes.customDeclarations))
            options.catalogFile = local.paths.profilesFile
            options.printExactly = true
            Interrupts.exitAsInterrupted("the paste")
            let target: PeerTarget
            if let from {
                target = try PeerTarget.resolve(
                    from, trust: trust, discovered: heard, reached: reached, beyondLAN: !reach.isEmpty)
            } else {
                let own = AccessPolicy.clipboardSources(trust.devices).compactMap {
                    try? PeerTarget.resolve(
                        $0.id.description, trust: trust, discovered: heard, reached: reached, beyondLAN: !reach.isEmpty)
                }
                guard !own.isEmpty else {
                    throw ShareError(
                        .unavailable, "none of your own devices (trusted with --team) has a known address; use --from")
                }
                guard
                    let (newest, _) = PasteClient.newest(
                        device: local, candidates: own, trust: trust, timeouts: timeouts, reach: reach)
                else { throw ShareError(.refused, "none of your reachable devices has copied anything") }
                target = newest
            }
            let report = try PasteClient.paste(
                device: local, target: target, trust: trust, options: options, progress: output.progress,
                timeouts: timeouts, reach: reach)
            if !report.refused.isEmpty {
                throw ShareError(
                    .refused, report.refused.map { "\($0.label): \($0.reason)" }.joined(separator: "; "))
            }
            let what =
                report.printed.isEmpty
                ? report.saved.map(\.lastPathComponent).joined(separator: ", ")
                : "text (\(ProgressReporter.bytes(UInt64(report.printed.reduce(0) { $0 + $1.utf8.count }))))"
            output.progress.note(
                "pasted \(what.isEmpty ? "nothing" : what) from \(target.expected?.name ?? "\(target.addresses[0])")",
                event: "pasted")
        }
    }
}
