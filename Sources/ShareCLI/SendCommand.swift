import ArgumentParser
import CoreTransferable
import Foundation
import ShareCommandLine
import ShareKit
import ShareProfiles

struct SendCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send files, text, a URL or standard input to a device.",
        discussion: """
            Each item is offered as its representations, most faithful first; the receiver picks the first one it
            understands and only that one is produced. Files travel in verified chunks: if the transfer is cut, run the
            same command again and only what the receiver lacks is sent.
            """)

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var declarations: DeclarationOptions

    @Argument(help: ArgumentHelp("Files or folders to send; - reads standard input.", valueName: "file"))
    var files: [String] = []

    @Option(help: ArgumentHelp("The receiving device: a trusted name or ID, or HOST:PORT.", valueName: "peer"))
    var to: String

    @Option(
        help: ArgumentHelp(
            "Send through this device's agent, which passes the items on to --to (a watch attached to it).",
            valueName: "peer"))
    var via: String?

    @Option(help: "Send this text.")
    var text: [String] = []

    @Option(help: "Send this URL.")
    var url: [String] = []

    @Option(help: ArgumentHelp("Send this profile from the catalog (name or id).", valueName: "name"))
    var profile: [String] = []

    @Flag(help: "Send the whole profile catalog as one archive (portraits and videos included).")
    var profiles = false

    @Option(
        help: ArgumentHelp("Content type of the files and standard input (identifier or extension).", valueName: "uti"))
    var type: String?

    @Option(help: ArgumentHelp("Bytes per chunk (e.g. 1M).", valueName: "size"))
    var chunkSize = "1M"

    @Flag(help: "With an agent running, wait until it has delivered the job (exit status as for a direct send).")
    var wait = false

    @Flag(help: "Send from this process even when an agent is running.")
    var direct = false

    @Flag(help: "Never compress chunks (by default zstd is used when the receiver decodes it and the content shrinks).")
    var noCompress = false

    @Option(help: "Seconds to wait for connect and handshake.")
    var timeout: Double = 10

    func validate() throws {
        if files.isEmpty && text.isEmpty && url.isEmpty && profile.isEmpty && !profiles {
            throw ValidationError(
                "nothing to send: give files or folders, - for standard input, --text, --url, --profile or --profiles")
        }
        guard let size = parseSize(chunkSize), (4096...(4 << 20)).contains(Int(size)) else {
            throw ValidationError("--chunk-size must be between 4K and 4M")
        }
        if files.filter({ $0 == "-" }).count > 1 { throw ValidationError("standard input can be sent once") }
        for link in url where URL(string: link)?.scheme == nil {
            throw ValidationError("'\(link)' is not an absolute URL")
        }
    }

    func run() throws {
        try ShareCLI.run {
            try declarations.load()
            let local = try device.loadDevice()
            let trust = try device.loadTrust()
            let explicitType = try type.map(parseType)
            // Check every file and folder before connecting: a missing file is an error before any byte moves.
            var items = SendItems()
            var paths: [URL] = []
            for file in files {
                paths.append(
                    file == "-" ? try spoolStandardInput(local.paths) : URL(fileURLWithPath: file).standardizedFileURL)
            }
            try items.add(paths: paths, type: explicitType)
            if files.contains("-"), let index = files.firstIndex(of: "-") {
                items.files[index].label = "standard input"
                items.files[index].representations[0].offered.suggestedFileName =
                    "stdin" + ((explicitType ?? .data).preferredFilenameExtension.map { ".\($0)" } ?? "")
            }
            for entry in items.skipped {
                output.progress.note(
                    "left out \(entry.path): \(entry.reason)", event: "skipped",
                    fields: ["path": entry.path, "reason": entry.reason])
            }
            items.texts = text
            items.urls = url.compactMap { URL(string: $0) }
            try items.add(profiles: profile, all: profiles, catalogFile: local.paths.profilesFile)
            if !direct, ControlClient.agentIsRunning(local.paths) {
                try handToAgent(local.paths, paths: paths)
                return
            }
            let target = try PeerTarget.resolve(via ?? to, device: local, trust: trust)
            var options = SendOptions()
            options.forwardTo = via == nil ? nil : to
            options.chunkSize = Int(parseSize(chunkSize)!)
            options.compression = !noCompress
            options.timeouts = SessionTimeouts(connect: timeout, handshake: timeout, idle: 300)
            let progress = output.progress
            let report = try SendSession(device: local, progress: progress, options: options).run(
                to: target, trust: trust
            ) { try items.items(for: $0) }
            if output.json {
                progress.note(
                    "summary", event: "summary",
                    fields: [
                        "delivered": report.delivered.count, "refused": report.refused.count,
                        "bytesSent": report.bytesSent, "wireBytes": report.wireBytes,
                        "bytesAlreadyThere": report.bytesSkipped, "seconds": report.seconds,
                    ])
            } else if !output.quiet {
                let speed = report.seconds > 0 ? Double(report.bytesSent) / report.seconds : 0
                say(
                    "sent \(report.delivered.count) of \(report.delivered.count + report.refused.count) items, \(ProgressReporter.bytes(report.bytesSent)) in \(String(format: "%.2f", report.seconds)) s (\(ProgressReporter.bytes(UInt64(speed)))/s)"
                        + (report.bytesSkipped > 0
                            ? "; \(ProgressReporter.bytes(report.bytesSkipped)) were already there" : ""))
            }
            if !report.refused.isEmpty {
                throw ShareError(
                    .refused,
                    "\(report.refused.count) item(s) refused: "
                        + report.refused.map { "\($0.label): \($0.reason)" }.joined(separator: "; "))
            }
        }
    }

    /// With an agent running, the send becomes one of its outbox jobs: this returns at once (or, with `--wait`, when
    /// the job is delivered or fails, with the exit status a direct send would have had).
    private func handToAgent(_ device: DevicePaths, paths: [URL]) throws {
        var job = OutboxJob(to: to)
        job.files = paths.map(\.path)
        job.contentType = try type.map(parseType)?.identifier
        job.texts = text
        job.urls = url
        job.profiles = profile
        job.allProfiles = profiles
        job.via = via
        let queued = try ControlClient.request(.send(job), paths: device)
        let id = queued.job?.id ?? job.id
        output.progress.note(
            "queued job \(id) for \(to): the agent sends it now, or as soon as \(to) can be reached",
            event: "queued", fields: ["job": id, "to": to])
        guard wait else { return }
        let finished = try ControlClient.request(.wait(id: id, timeout: nil), paths: device)
        guard let done = finished.job else { throw ShareError(.failure, "the agent lost job \(id)") }
        switch done.state {
        case .delivered where done.exitStatus() == .success:
            output.progress.note(
                "delivered job \(id) to \(to): \(done.delivered) item(s), \(ProgressReporter.bytes(done.bytesSent)) sent",
                event: "delivered", fields: ["job": id, "delivered": done.delivered, "bytesSent": done.bytesSent])
        default:
            let status = done.exitStatus() ?? .failure
            throw ShareError(status, "job \(id) to \(to): \(done.lastError ?? "not delivered")")
        }
    }

    /// Standard input goes to a private spool file first, so it can be chunked, verified and resumed like a file.
    private func spoolStandardInput(_ paths: DevicePaths) throws -> URL {
        let spool = paths.state.appendingPathComponent("spool", isDirectory: true)
        try DevicePaths.ensurePrivateDirectory(spool)
        let file = spool.appendingPathComponent("stdin-\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: file.path, contents: nil, attributes: [.posixPermissions: 0o600]),
            let handle = FileHandle(forWritingAtPath: file.path)
        else { throw ShareError(.cannotCreate, "cannot create \(file.path)") }
        defer { try? handle.close() }
        while true {
            let chunk = FileHandle.standardInput.readData(ofLength: 1 << 20)
            if chunk.isEmpty { break }
            try handle.write(contentsOf: chunk)
        }
        return file
    }
}
