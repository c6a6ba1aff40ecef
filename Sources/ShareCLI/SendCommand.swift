import ShareDisk
import ShareProfileModel
import ArgumentParser
import CoreTransferable
import FoundationEssentials
import ShareLocalSendRoute
import ShareText
import ShareCommandLine
import ShareKit
import ShareProfiles
import ShareNet
import ShareTrust
import ShareProtocol
import ShareEngine
import ShareAgent

struct SendCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send files, text, a URL or standard input to a device.",
        discussion: helpPage(
            "Each item is offered as its representations, most faithful first; the receiver picks the first one it understands and only that one is produced. A file is offered as a file (its type and name), so the receiver saves it; only text given with --text or piped in as text is printed there. Files travel in verified chunks: if the transfer is cut, run the same command again and only what the receiver lacks is sent.",
            "To a LocalSend device (a phone running LocalSend, listed by share peers): --to its name; each item goes in the form such a device takes (a file, a folder's files, a text as a message), and --pin gives the PIN it asks for.",
            "With --code, the send needs no trusted device: it prints a code such as 7-guitarist-revenge for share receive CODE (or any magic-wormhole client) on the other machine, and ends after that one exchange.",
            "With this device's agent running, the send becomes a job of the agent, which delivers it when the device can be reached (share jobs lists the jobs, share cancel stops one); --wait follows it with progress, and --direct sends from this process instead. Standard output stays empty: what happens is told on standard error (--json: events on standard output).",
            examples: [
                "share send --to desk holiday.mov", "share send --to desk --text \"Dinner at eight?\"",
                "share send --to desk --to phone --url https://example.com/menu",
                "echo 'Dinner at eight?' | share send --to desk", "tar c Photos | share send --to desk -",
                "share send --to 192.168.1.20:7001 --direct report.pdf --wait",
                "share send --code slides.pdf", "share send IMG_0042.jpg --text \"from the desk\" --to phone",
            ]))

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var declarations: DeclarationOptions
    @OptionGroup(title: "Sending by code") var codeServers: CodeServerOptions

    @Flag(
        help: ArgumentHelp(
            "Send to whoever types the code this prints (share receive CODE, or any magic-wormhole client): no "
                + "pairing, no trust change, single use."))
    var code = false

    @Option(help: ArgumentHelp("With --code: use this code instead of a new one.", valueName: "code"))
    var useCode: String?

    @Option(help: ArgumentHelp("With --code: words after the number (2 to 8).", valueName: "n"))
    var codeWords = 2

    @Option(help: ArgumentHelp("With --code: how long the code waits (e.g. 10m, 1h).", valueName: "duration"))
    var codeLifetime = "10m"

    @Argument(
        help: ArgumentHelp(
            "Files or folders to send; - reads standard input (also read when nothing else is named and it is not a terminal): text is sent as a text, anything else as a file of the type its content shows (or --type).",
            valueName: "file"))
    var files: [String] = []

    @Option(
        help: ArgumentHelp(
            "The receiving device: a trusted name or ID, or HOST:PORT. Repeat it to send to several devices (one job "
                + "each through an agent).", valueName: "peer"))
    var to: [String] = []

    @Option(
        help: ArgumentHelp(
            "Send through this device's agent, which passes the items on to --to (a watch attached to it).",
            valueName: "peer"))
    var via: String?

    @Option(
        help: ArgumentHelp(
            "A small image (at most 32 KiB) the receiver's user sees before accepting the file at the same position.",
            valueName: "image"))
    var preview: [String] = []

    @Option(
        help: ArgumentHelp(
            "Seconds to wait for the receiver's user to accept, when its device asks first.",
            valueName: "seconds"))
    var answerTimeout: Double = 600

    @Option(help: ArgumentHelp("The PIN a LocalSend device asks for.", valueName: "pin"))
    var pin: String?

    @Option(help: "Send this text.")
    var text: [String] = []

    @Option(
        help: ArgumentHelp(
            "Send each line of this file as a text of its own (many texts in one send).", valueName: "file"))
    var textLines: String?

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

    @Flag(
        help: ArgumentHelp(
            "With an agent running, wait until it has delivered the job, showing its progress (exit status as for a "
                + "direct send). Waiting stops after --timeout seconds in which the device could not be reached; the "
                + "job stays queued."))
    var wait = false

    @Flag(help: "Send from this process even when an agent is running.")
    var direct = false

    @Flag(help: "Never compress chunks (by default zstd is used when the receiver decodes it and the content shrinks).")
    var noCompress = false

    @Flag(
        help:
            "Send every file whole, even when the receiver holds an earlier version (by default only what changed crosses)."
    )
    var wholeFile = false

    @Option(help: "Seconds to wait for the device: connect and handshake, or with --wait, to be reached at all.")
    var timeout: Double = 10

    func validate() throws {
        let byCode = code || useCode != nil
        if byCode, !to.isEmpty || via != nil {
            throw ValidationError("--code sends to whoever types the code: leave out --to and --via")
        }
        if byCode, !(2...8).contains(codeWords) { throw ValidationError("--code-words must be between 2 and 8") }
        if byCode, parseDuration(codeLifetime) == nil {
            throw ValidationError("--code-lifetime '\(codeLifetime)' is not a duration like 10m")
        }
        if to.isEmpty, !byCode {
            throw ValidationError(
                "give the receiving device with --to (a trusted name, an ID or HOST:PORT), or send by --code")
        }
        if via != nil, to.count > 1 { throw ValidationError("--via passes items on to one device; give one --to") }
        if timeout <= 0 { throw ValidationError("--timeout must be more than 0 seconds") }
        if nothingNamed, Syscalls.stdinIsTerminal {
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

    /// No item is named on the command line: what is piped in is the item (`echo hi | share send --to desk`).
    private var nothingNamed: Bool {
        files.isEmpty && text.isEmpty && textLines == nil && url.isEmpty && profile.isEmpty && !profiles
    }

    func run() throws {
        try ShareCLI.run {
            try declarations.load()
            let local = try device.loadDevice()
            let trust = try device.loadTrust()
            let explicitType = try type.map(parseType)
            // Check every file and folder before connecting: a missing file is an error before any byte moves.
            var items = SendItems()
            var spooled: URL?
            for file in nothingNamed ? ["-"] : files {
                if file == "-" {
                    let spool = try spoolStandardInput(local.paths)
                    if PosixFiles.size(spool.path) == 0, nothingNamed {
                        PathOperations.removeIfPresent(spool.path)
                        throw ShareError(
                            .usage,
                            "nothing to send: standard input was empty; give files or folders, --text, --url, --profile or --profiles"
                        )
                    }
                    if try items.add(standardInput: spool, type: explicitType) {
                        PathOperations.removeIfPresent(spool.path)
                    } else {
                        spooled = spool
                    }
                } else {
                    try items.add(paths: [URL(fileURLWithPath: file).standardizedFileURL], type: explicitType)
                }
            }
            try items.add(previews: preview.map { URL(fileURLWithPath: $0).standardizedFileURL })
            for entry in items.skipped {
                output.progress.note(
                    "left out \(entry.path): \(entry.reason)", event: "skipped",
                    fields: ["path": entry.path, "reason": entry.reason])
            }
            items.texts += text
            if let textLines {
                guard let data = FileManager.default.contents(atPath: textLines) else {
                    throw ShareError(.noInput, "\(textLines): cannot read it; check the path")
                }
                items.texts += String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
            }
            items.urls = url.compactMap { URL(string: $0) }
            try items.add(profiles: profile, all: profiles, catalogFile: local.paths.profilesFile)
            if code || useCode != nil {
                Interrupts.exitAsInterrupted("the send")
                return try sendByCode(items: items, paths: local.paths, spooled: spooled)
            }
            // Every device named must be one this device can send to, before anything is queued or sent.
            var seen: Set<String> = []
            var peers = to.filter { seen.insert(trust.find($0)?.id.description ?? $0.lowercased()).inserted }
            // A name that is no trusted device but a LocalSend device the agent has seen is sent to by LocalSend.
            let heard = LocalSendSeen.load(local.paths)
            let phones =
                via == nil ? peers.compactMap { trust.find($0) == nil ? LocalSendSeen.find($0, in: heard) : nil } : []
            peers.removeAll { trust.find($0) == nil && LocalSendSeen.find($0, in: heard) != nil && via == nil }
            if !phones.isEmpty {
                if !direct, ControlClient.agentIsRunning(local.paths) {
                    // The agent's outbox: a phone that is away gets the job when it is seen again.
                    try handToAgent(ShareClient(device: local), items: items, peers: phones.map(\.alias))
                } else {
                    Interrupts.exitAsInterrupted("the send")
                    for phone in phones {
                        try sendByLocalSend(items: items, to: phone, name: local.name, paths: local.paths)
                    }
                }
                if peers.isEmpty { return }
            }
            for peer in via.map({ [$0] }) ?? peers {
                try PeerTarget.check(peer, device: local, trust: trust)
            }
            let client = ShareClient(device: local)
            if !direct, ControlClient.agentIsRunning(local.paths) {
                try handToAgent(client, items: items, peers: peers)
                return
            }
            Interrupts.exitAsInterrupted("the send")
            var failures: [(String, ShareError)] = []
            for peer in peers {
                do {
                    try sendDirectly(client, items: items, to: peer)
                } catch let error as ShareError where peers.count > 1 {
                    complain(error.message)
                    failures.append((peer, error))
                } catch let error as ShareFailure where peers.count > 1 {
                    complain(error.message)
                    failures.append((peer, ShareError(ExitStatus(error.code), error.message)))
                }
            }
            if let (_, first) = failures.first {
                throw ShareError(
                    first.status,
                    "\(failures.count) of \(peers.count) devices did not get everything: "
                        + failures.map(\.0).joined(separator: ", "))
            }
        }
    }

    /// One send to a LocalSend device, from this process.
    private func sendByLocalSend(items: SendItems, to phone: LocalSendSeen, name: String, paths: DevicePaths) throws {
        let report = try LocalSendSend.run(
            items.shareItems, to: phone, pin: pin, name: name, paths: paths, progress: output.progress,
            answerTimeout: answerTimeout)
        if output.json {
            output.progress.note(
                "summary", event: "summary",
                fields: [
                    "to": phone.alias, "files": report.files, "messages": report.messages, "bytesSent": report.bytes,
                    "seconds": report.seconds, "route": "LocalSend",
                ])
        } else if !output.quiet {
            TerminalProgress.endLine()
            tell(
                "sent \(report.files) file(s)\(report.messages > 0 ? " and \(report.messages) text(s)" : "") to \(phone.alias) by LocalSend, "
                    + "\(ProgressReporter.bytes(report.bytes)) in \(Format.c("%.2f", report.seconds)) s")
        }
        if let first = report.refused.first {
            throw ShareError(.refused, "\(first.label) has no form a LocalSend device takes: \(first.reason)")
        }
    }

    /// One send from this process to one device.
    private func sendDirectly(_ client: ShareClient, items: SendItems, to peer: String) throws {
        do {
            var options = ShareClient.SendOptions()
            options.via = via
            options.chunkSize = Int(parseSize(chunkSize)!)
            options.compression = !noCompress
            options.delta = !wholeFile
            options.timeout = timeout
            options.waitForAnswer = answerTimeout
            let progress = output.progress
            options.progress = progress
            let report = try client.sendNow(items.shareItems, to: peer, options: options)
            if output.json {
                progress.note(
                    "summary", event: "summary",
                    fields: [
                        "delivered": report.delivered.count, "refused": report.refused.count,
                        "bytesSent": report.bytesSent, "wireBytes": report.wireBytes,
                        "bytesAlreadyThere": report.bytesAlreadyThere, "seconds": report.seconds,
                        "route": report.route, "bytesFromEarlierVersion": report.bytesFromEarlierVersion,
                        "linkBytes": report.linkBytes,
                    ])
            } else if !output.quiet {
                tell(Self.summary(report, to: peer))
            }
            try failIfRefused(report.refused, receiving: false)
        }
    }

    /// What a send did, in one line: what crossed the link (and at what rate) apart from what the receiver made
    /// from the copy it already had, and what was already there: "sent 1 of 1 items, 1.0 GiB in 9.04 s, direct:
    /// 134.0 KiB crossed (14.8 KiB/s), 1.0 GiB made from the copy on desk".
    static func summary(_ report: ShareClient.Delivery, to peer: String) -> String {
        let bytes = ProgressReporter.bytes
        let seconds = report.seconds
        func rate(_ n: UInt64) -> String {
            "\(bytes(UInt64(seconds > 0 ? Double(n) / seconds : 0)))/s"
        }
        var line =
            "sent \(report.delivered.count) of \(report.delivered.count + report.refused.count) items, \(bytes(report.bytesSent)) in \(Format.c("%.2f", seconds)) s"
        let crossed = max(report.linkBytes, report.wireBytes)
        if report.bytesFromEarlierVersion > 0 {
            line +=
                ", \(report.route): \(bytes(crossed)) crossed (\(rate(crossed))), \(bytes(report.bytesFromEarlierVersion)) made from the copy on \(peer)"
        } else if report.bytesSent > 0, crossed * 20 < report.bytesSent * 19 {
            line += " (\(rate(report.bytesSent))), \(report.route): \(bytes(crossed)) crossed, compressed"
        } else {
            line += " (\(rate(report.bytesSent))), \(report.route)"
        }
        if report.bytesAlreadyThere > 0 { line += "; \(bytes(report.bytesAlreadyThere)) were already there" }
        return line
    }

    /// With an agent running, the send becomes one outbox job per device: this returns at once (or, with `--wait`,
    /// when each job is delivered or fails, with the exit status a direct send would have had).
    private func handToAgent(_ client: ShareClient, items: SendItems, peers: [String]) throws {
        let device = client.device.paths
        var queued: [(peer: String, id: String)] = []
        for peer in peers {
            var options = ShareClient.SendOptions()
            options.queue = true
            options.via = via
            options.localSendPin = pin
            // Someone waits for it: the agent sends it at normal priority, like a direct send.
            options.waiting = wait
            let answer = try client.sendNow(items.shareItems, to: peer, options: options)
            let id = answer.job ?? "?"
            queued.append((peer, id))
            output.progress.note(
                "queued job \(id) for \(peer): the agent sends it now, or as soon as \(peer) can be reached "
                    + "(share jobs lists it, share cancel \(id) stops it)",
                event: "queued", fields: ["job": id, "to": peer])
        }
        guard wait else { return }
        var worst: ShareError?
        for (peer, id) in queued {
            do {
                try waitFor(job: id, peer: peer, device: device)
            } catch let error as ShareError {
                if queued.count == 1 { throw error }
                complain(error.message)
                if worst == nil { worst = error }
            }
        }
        if let worst {
            throw ShareError(worst.status, "not every job was delivered (see: share jobs)")
        }
    }

    /// Follows one job with the progress a direct send shows, until it ends, or until the device could not be
    /// reached for `--timeout` seconds (the job then stays queued).
    private func waitFor(job id: String, peer: String, device: DevicePaths) throws {
        let progress = output.progress
        var deadline = Date().addingTimeInterval(timeout)
        var shownItem: String?
        while true {
            let answer = try ControlClient.request(.wait(id: id, timeout: 0.25), paths: device)
            guard let job = answer.job else { throw ShareError(.failure, "the agent lost job \(id)") }
            if job.state.isFinal {
                if shownItem != nil { progress.finishItem() }
                return try report(job, peer: peer)
            }
            if job.state == .running {
                // While it runs (or while another job holds the agent), the device is not "unreachable".
                deadline = Date().addingTimeInterval(timeout)
                if let snapshot = job.progress {
                    if shownItem != nil, shownItem != snapshot.item { progress.finishItem() }
                    shownItem = snapshot.item
                    progress.show(snapshot)
                }
            } else if let status = try? ControlClient.request(.status, paths: device),
                (status.jobs ?? []).contains(where: { $0.state == .running })
            {
                deadline = Date().addingTimeInterval(timeout)
            }
            if Date() > deadline {
                if shownItem != nil { progress.finishItem() }
                throw ShareError(
                    .unavailable,
                    "\(peer) could not be reached within \(Int(timeout)) s"
                        + (job.lastError.map { " (\($0))" } ?? "")
                        + "; job \(id) stays queued and is sent when \(peer) can be reached (share jobs; share cancel \(id))"
                )
            }
        }
    }

    private func report(_ done: OutboxJob, peer: String) throws {
        switch done.state {
        case .delivered where done.exitStatus() == .success:
            output.progress.note(
                "delivered job \(done.id) to \(peer): \(done.delivered) item(s), \(done.sentWords)",
                event: "delivered",
                fields: [
                    "job": done.id, "delivered": done.delivered, "bytesSent": done.bytesSent,
                    "bytesCrossed": done.bytesCrossed ?? done.bytesSent, "bytesFromCopy": done.bytesFromCopy ?? 0,
                ])
        case .cancelled:
            throw ShareError(.interrupted, "job \(done.id) to \(peer) was cancelled")
        default:
            let status = done.exitStatus() ?? .failure
            throw ShareError(status, "job \(done.id) to \(peer): \(done.lastError ?? "not delivered")")
        }
    }

    /// Standard input goes to a private spool file first, so it can be chunked, verified and resumed like a file.
    private func spoolStandardInput(_ paths: DevicePaths) throws -> URL {
        let spool = paths.state.appendingPathComponent("spool", isDirectory: true)
        try DevicePaths.ensurePrivateDirectory(spool)
        let name = "stdin-\(UUID().uuidString)"
        let file = spool.appendingPathComponent(name)
        let handle: OpenFile
        do {
            handle = try Directory.open(spool.path).openFile(name, .create, mode: 0o600)
        } catch let error as DiskError {
            throw ShareError(.cannotCreate, "cannot create \(file.path): \(error.message)")
        }
        defer { handle.close() }
        var offset: UInt64 = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count: Int
            do {
                count = try Syscalls.read(0, into: &buffer, count: buffer.count)
            } catch {
                throw ShareError(.ioError, "cannot read standard input: \(error)")
            }
            if count == 0 { break }
            do {
                try buffer.withUnsafeBytes {
                    try handle.write(UnsafeRawBufferPointer(rebasing: $0[..<count]), at: offset)
                }
            } catch let error as DiskError {
                throw ShareError(
                    error.kind == .noSpace ? .ioError : .cannotCreate, "cannot spool standard input: \(error.message)")
            }
            offset += UInt64(count)
        }
        return file
    }
}
