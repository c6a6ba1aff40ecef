import ArgumentParser
import CoreTransferable
import Foundation
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
            let target = try PeerTarget.resolve(to, trust: trust)
            let explicitType = try type.map(parseType)
            // Check every file before connecting: a missing file is an error before any byte moves.
            var fileItems: [OutgoingItem] = []
            for file in files {
                var isFolder: ObjCBool = false
                if file == "-" {
                    fileItems.append(try spoolStandardInput(local.paths, type: explicitType))
                } else if FileManager.default.fileExists(atPath: file, isDirectory: &isFolder), isFolder.boolValue {
                    let (item, skipped) = try OutgoingItem.folder(URL(fileURLWithPath: file))
                    for entry in skipped {
                        output.progress.note(
                            "left out \(file)/\(entry.path): \(entry.reason)", event: "skipped",
                            fields: ["path": entry.path, "reason": entry.reason])
                    }
                    fileItems.append(item)
                } else {
                    fileItems.append(try OutgoingItem.file(URL(fileURLWithPath: file), type: explicitType))
                }
            }
            let catalog =
                profile.isEmpty && !profiles ? nil : try ProfileCommand.load(local.paths.profilesFile)
            if profiles, catalog?.profiles.isEmpty ?? true {
                throw ShareError(.noInput, "the profile catalog is empty (add one with: share profile add NAME)")
            }
            let bundle = profiles ? ProfilesArchive(profiles: catalog!.profiles) : nil
            let profiles = try profile.map { name -> Profile in
                guard let found = catalog?.find(name) else {
                    throw ShareError(.noInput, "no profile is called '\(name)' (see: share profile list)")
                }
                return found
            }
            var options = SendOptions()
            options.chunkSize = Int(parseSize(chunkSize)!)
            options.compression = !noCompress
            options.timeouts = SessionTimeouts(connect: timeout, handshake: timeout, idle: 300)
            let progress = output.progress
            let texts = text
            let urls = url.compactMap { URL(string: $0) }
            let report = try SendSession(device: local, progress: progress, options: options).run(
                to: target, trust: trust
            ) { relation in
                try (bundle.map { [try OutgoingItem.profiles($0, relation: relation)] } ?? [])
                    + fileItems
                    + texts.map { OutgoingItem.transferable($0, label: "text", relation: relation) }
                    + urls.map { OutgoingItem.transferable($0, label: $0.absoluteString, relation: relation) }
                    + profiles.map {
                        OutgoingItem.transferable(
                            $0, label: "profile \($0.name)", relation: relation, id: "profile-\($0.id.uuidString)")
                    }
            }
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

    /// Standard input goes to a private spool file first, so it can be chunked, verified and resumed like a file.
    private func spoolStandardInput(_ paths: DevicePaths, type: UTType?) throws -> OutgoingItem {
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
        var item = try OutgoingItem.file(file, type: type ?? .data)
        item.label = "standard input"
        item.representations[0].offered.suggestedFileName =
            "stdin" + ((type ?? .data).preferredFilenameExtension.map { ".\($0)" } ?? "")
        return item
    }
}
