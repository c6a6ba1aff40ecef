import ShareThreads
import ArgumentParser
import CoreTransferable
import Dispatch
import FoundationEssentials
import ShareText
import ShareCommandLine
import ShareKit
import ShareProtocol
import ShareTLS
import ShareNet
import ShareTrust
import ShareEngine
import ShareAgent

struct ReceiveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receive",
        abstract: "Wait for one sending session from a trusted device (or join one by code) and receive its items.",
        discussion: helpPage(
            "The accept list (most wanted first) decides what each item becomes; by default anything is accepted as the sender's first representation. Text and URLs are printed on standard output, and nothing else is (status lines go to standard error), so share receive > file captures only the content. Everything else is saved in --into, under a partial name until its digest matches, never overwriting (name (2).ext). An interrupted item resumes when the same send runs again.",
            examples: [
                "share receive --into ~/Downloads", "share receive --accept public.plain-text > message.txt",
                "share receive --port 7001 --accept public.image --max-size 20M",
                "share receive 7-guitarist-revenge --into ~/Downloads",
            ]))

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var declarations: DeclarationOptions
    @OptionGroup(title: "Receiving by code") var codeServers: CodeServerOptions

    @Argument(
        help: ArgumentHelp(
            "A code from share send --code or any magic-wormhole sender (e.g. 7-guitarist-revenge): receive from "
                + "that one sender, with no pairing and no trust change.", valueName: "code"))
    var code: String?

    @Flag(help: "With a code, accept what is offered without asking.")
    var yes = false

    @Option(
        help: ArgumentHelp(
            "Port to listen on (0: a free one, printed; default: the port other devices know this one by, from pairing, when no agent holds it, so share send --to NAME finds this receive; else a free one).",
            valueName: "port"),
        transform: PortOption.listening)
    var port: Int?

    @Option(help: "Address to listen on.")
    var listen = "::"

    @Option(help: ArgumentHelp("Accept only this device (name or ID).", valueName: "peer"))
    var from: String?

    @Option(help: ArgumentHelp("Folder to save into.", valueName: "dir"))
    var into = "."

    @Option(parsing: .upToNextOption, help: ArgumentHelp("Accepted types, most wanted first.", valueName: "uti"))
    var accept: [String] = []

    @Option(help: ArgumentHelp("Largest item accepted (e.g. 10M).", valueName: "size"))
    var maxSize: String?

    @Option(help: "Hours after which an unfinished partial is removed.")
    var partialMaxAge: Double = 24

    @Option(help: "Seconds to wait for a sender (0 = forever).")
    var timeout: Double = 0

    @Flag(help: "Flush each item to disk before completing it (slower; survives a power loss right after).")
    var fsync = false

    @Flag(help: "Show what each sender offers (title, type, size) and ask before receiving it.")
    var ask = false

    func validate() throws {
        if let maxSize, parseSize(maxSize) == nil {
            throw ValidationError("--max-size '\(maxSize)' is not a size like 10M")
        }
        guard partialMaxAge > 0 else { throw ValidationError("--partial-max-age must be positive") }
        if code != nil, from != nil || port != nil || ask {
            throw ValidationError("a code names its sender: --from, --port and --ask do not apply (a code always asks)")
        }
        if code == nil, yes { throw ValidationError("--yes goes with a code (share receive CODE --yes)") }
    }

    func run() throws {
        try ShareCLI.run {
            try declarations.load()
            if let code {
                let limit = maxSize.flatMap(parseSize)
                var entries = try accept.map { AcceptedType(try parseType($0), maxSize: limit) }
                if entries.isEmpty { entries = [AcceptedType(.item, maxSize: limit)] }
                var options = ReceiveOptions(
                    directory: URL(fileURLWithPath: into, isDirectory: true).standardizedFileURL,
                    accept: AcceptList(entries, declarations: UTType.registeredTypes.customDeclarations),
                    maxSize: limit)
                options.partialMaxAge = partialMaxAge * 3600
                options.durable = fsync
                Interrupts.exitAsInterrupted("the receive")
                return try receiveByCode(code, options: options)
            }
            let local = try device.loadDevice()
            let trust = try device.loadTrust()
            let limit = maxSize.flatMap(parseSize)
            var entries = try accept.map { AcceptedType(try parseType($0), maxSize: limit) }
            if entries.isEmpty { entries = [AcceptedType(.item, maxSize: limit)] }
            let custom = UTType.registeredTypes.customDeclarations
            var options = ReceiveOptions(
                directory: URL(fileURLWithPath: into, isDirectory: true).standardizedFileURL,
                accept: AcceptList(entries, declarations: custom), maxSize: limit)
            options.partialMaxAge = partialMaxAge * 3600
            options.durable = fsync
            options.catalogFile = local.paths.profilesFile
            options.versions = try? Versions(directory: local.paths.versions)
            if ask {
                let localName = local.name
                options.gate = { offer, peerName in
                    AskPerson.ask(offer, from: peerName)
                        ? .proceed : .decline("declined on \(localName)")
                }
            }
            var only: DeviceID?
            if let from {
                guard let peer = trust.find(from) else {
                    throw ShareError(.usage, "no trusted device is called '\(from)' (see: share trust list)")
                }
                only = peer.id
            }
            let progress = output.progress
            let onlyDevice = only
            let acceptList = options.accept
            let receiver = try ReceiveSession(options: options, progress: progress)
            let outcome = SessionOutcome()
            let trustCache = try TrustCache(file: local.paths.trustFile)
            let handle: Listener.Handler = { session in
                guard outcome.claim() else {
                    session.connection.fail(with: .init(.refused, "this receiver is busy with another sender"))
                    return
                }
                let entry = trustCache.store.device(session.peerID)
                let name = entry?.name ?? session.peerHello.name
                do {
                    outcome.finish(.success(try receiver.serve(session, peerName: name, peer: entry)))
                } catch {
                    outcome.finish(.failure(SessionErrors.describe(error, peer: name, localID: local.id)))
                }
            }
            // Other devices reach this one by name at the port they learned at pairing (its agent's): with no agent
            // holding it, this receive takes it, so `share send --to NAME` finds it without flags; when it is taken,
            // a free one.
            let known = port == nil && !ControlClient.agentIsRunning(local.paths) ? AgentPort.saved(local.paths) : nil
            let listener = try Listener.bind(ports: [known, port ?? 0].compactMap { $0 }) { chosen in
                try Listener(
                    device: local, host: listen, port: chosen,
                    verifier: { id in onlyDevice.map { $0 == id } ?? trustCache.isTrusted(id) },
                    hello: { ReceiveSession.hello(name: local.name, accept: acceptList) }, handler: handle)
            }
            // Signals are watched before anyone is told this receiver waits: a stop that comes at once is not lost.
            outcome.watchSignals()
            listener.start()
            if !output.quiet {
                progress.note(
                    "share receive: \(local.name) waiting on port \(listener.port)", event: "listening",
                    fields: ["port": listener.port])
            } else if listener.port != port {
                // A port picked by the system is the one thing a caller cannot know otherwise.
                tell("share receive: \(local.name) waiting on port \(listener.port)")
            }
            let result = outcome.wait(timeout: timeout)
            listener.stop(grace: 1)
            guard let result else { throw ShareError(.unavailable, "no sender came within \(Int(timeout)) s") }
            let report = try result.get()
            if report.bytesFromCopy > 0 {
                let bytes = ProgressReporter.bytes
                // Where the file system shares blocks, what was made from the copy costs the disk nothing new.
                let shared =
                    report.bytesShared > 0 ? " (\(bytes(report.bytesShared)) sharing its blocks on disk)" : ""
                progress.note(
                    "received \(bytes(report.bytesReceived)): \(bytes(report.bytesCrossed)) crossed, "
                        + "\(bytes(report.bytesFromCopy)) made from the copy here\(shared)",
                    event: "summary",
                    fields: [
                        "bytes": report.bytesReceived, "bytesCrossed": report.bytesCrossed,
                        "bytesFromCopy": report.bytesFromCopy, "bytesShared": report.bytesShared,
                    ])
            }
            try failIfRefused(report.refused, receiving: true)
        }
    }
}

/// The one session a `share receive` serves, and its result.
final class SessionOutcome: Sendable {
    private struct State {
        var claimed = false
        var result: Result<ReceiveReport, Error>?
    }
    private let state = Guarded(State())

    func claim() -> Bool {
        state.withLock { state in
            if state.claimed { return false }
            state.claimed = true
            return true
        }
    }

    func finish(_ value: Result<ReceiveReport, Error>) {
        state.withLock { $0.result = value }
    }

    /// From now on SIGINT, SIGTERM and SIGHUP end the wait (as an error): the handlers are in place when this
    /// returns, so a stop that comes at once is not lost.
    func watchSignals() {
        let fd = Syscalls.interruptPipe()
        guard fd >= 0 else { return }
        Threads.start(name: "share-thread", stackSize: 8 << 20) { [self] in
            var byte: UInt8 = 0
            while read(fd, &byte, 1) < 0 && errno == EINTR {}
            // A resume is spoken of only where there is one: once a sender came.
            let idle = claim()
            finish(
                .failure(
                    ShareError(
                        .interrupted,
                        idle
                            ? "stopped before any sender came; nothing was received"
                            : "stopped before the transfer finished; partial items are kept for a resume")))
        }
    }

    /// Waits for the result, SIGINT/SIGTERM (an error, once `watchSignals` was called), or the timeout (nil).
    func wait(timeout: Double) -> Result<ReceiveReport, Error>? {
        state.withLock(when: { $0.result != nil }, seconds: timeout > 0 ? timeout : nil) { state, _ in state.result }
    }
}

/// `share receive --ask`: the person at the terminal answers for each sender.
enum AskPerson {
    /// Shows the offer on standard error and reads the answer from the terminal (or standard input); anything but
    /// yes, or no answer at all, declines.
    static func ask(_ offer: Offer, from peerName: String) -> Bool {
        var lines = ["\(ProgressReporter.neutralized(peerName)) wants to send \(offer.items.count) item(s):"]
        for item in offer.items {
            let first = item.representations[0]
            let kind = PendingOffers.kind(of: first.contentType, label: item.label)
            let size = first.size.map { ", " + ProgressReporter.bytes($0) } ?? ""
            let title = item.preview?.title ?? item.label
            let image =
                item.preview?.imageBytes.map { ", a \(ProgressReporter.bytes(UInt64($0.count))) preview image" } ?? ""
            lines.append("  \(ProgressReporter.neutralized(title)) — \(kind)\(size)\(image)")
        }
        for line in lines { TerminalProgress.status(line) }
        return answer()
    }

    /// Asks "accept? [y/N]" on standard error and reads the answer from the terminal (or standard input).
    static func answer() -> Bool {
        Console.writeOrLeave("accept? [y/N] ", to: .error)
        let answer: String?
        let terminal = open("/dev/tty", O_RDONLY | O_CLOEXEC)
        if terminal >= 0 {
            answer = readLine(from: terminal)
            close(terminal)
        } else {
            answer = Swift.readLine(strippingNewline: true)
            // Nothing echoed the answer: what is said next starts on a line of its own.
            Console.writeOrLeave("\n", to: .error)
        }
        return ["y", "yes"].contains((answer ?? "").trimmedSpaces.lowercased())
    }

    private static func readLine(from terminal: Int32) -> String? {
        var bytes: [UInt8] = []
        while bytes.count < 1024 {
            let byte = Syscalls.readSome(terminal, upTo: 1)
            guard let value = byte.first else { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
            if value == UInt8(ascii: "\n") { break }
            bytes.append(value)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
