import ShareNet
import ArgumentParser
import FoundationEssentials
import ShareText
import ShareCommandLine
import ShareKit
import ShareTrust
import ShareProtocol
import ShareEngine
import ShareAgent

/// The `share` command.
public struct ShareCommand: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "share",
        abstract: "Send items between your machines; the receiver decides what each becomes.",
        discussion: """
            Exit codes:
            \(ExitStatus.allCases.map { "  \(String($0.rawValue) + String(repeating: " ", count: max(0, 4 - String($0.rawValue).count)))\($0.meaning)" }.joined(separator: "\n"))

            EXAMPLES:
              share pair desk --team
              share send --to desk holiday.mov
              share receive --into ~/Downloads
              share agent
            """,
        version: "share 0.1 (protocol \(protocolVersionText))",
        subcommands: [
            SendCommand.self, ReceiveCommand.self, ProfileCommand.self, IdCommand.self, TrustCommand.self,
            PairCommand.self, PingCommand.self, AgentCommand.self, InboxCommand.self, StatusCommand.self,
            PeersCommand.self, CopyCommand.self, PasteCommand.self, JobsCommand.self, CancelCommand.self,
            PendingCommand.self, AcceptCommand.self, DeclineCommand.self, ServersCommand.self,
            WatchClientCommand.self, WebCommand.self, MirrorCommand.self, SyncCommand.self,
        ]
    )

    public init() {}
}

/// A command's discussion: paragraphs written on one line each (the help printer wraps them to the terminal; a
/// paragraph wrapped by hand would be wrapped twice), then an EXAMPLES section.
func helpPage(_ paragraphs: String..., examples: [String]) -> String {
    (paragraphs + ["EXAMPLES:\n" + examples.map { "  " + $0 }.joined(separator: "\n")]).joined(separator: "\n\n")
}

/// Options every command takes.
struct DeviceOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "This device's config directory (default: $SHARE_CONFIG_DIR, else $XDG_CONFIG_HOME/share).",
            valueName: "dir"))
    var config: String?

    var paths: DevicePaths { DevicePaths.resolve(configOverride: config) }

    func loadDevice() throws -> LocalDevice { try LocalDevice.loadOrCreate(paths: paths) }

    func loadTrust() throws -> TrustStore { try TrustStore.load(paths.trustFile) }
}

/// Runs a command body: a `ShareError`, a library's `ShareFailure` (or anything else) becomes one line on stderr and
/// its exit code (with `--json`, also one JSON object on standard output).
func run(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch _ where Console.readerGone != nil {
        // The reader of share's output went away and the work stopped for it: nothing more to say to anyone.
        throw ExitCode(Console.exitStatus(for: Console.readerGone!))
    } catch let error as ShareError {
        throw failed(error.message, error.status)
    } catch let error as ShareFailure {
        throw failed(error.message, ExitStatus(error.code))
    } catch let error as ExitCode {
        throw error
    } catch {
        throw failed("\(error)", .failure)
    }
}

/// Says why the command failed; returns the exit code to throw.
private func failed(_ message: String, _ status: ExitStatus) -> ExitCode {
    complain(message)
    if CommandLine.arguments.dropFirst().contains("--json") {
        // A script reading JSON events gets the error as one more event, with the status the process exits with.
        let event: [String: Any] = ["event": "error", "message": message, "status": Int(status.rawValue)]
        if let data = try? JSONText.bytes(event, sortedKeys: true) {
            Console.writeOrLeave(String(decoding: data, as: UTF8.self) + "\n", to: .output)
        }
    }
    return ExitCode(status.rawValue)
}

/// The one line a failed command leaves on standard error.
func complain(_ message: String) {
    TerminalProgress.status("share: \(message)")
}

/// A line of a command's output on standard output (an ID, a listing, a status report), written at once so a reading
/// process sees each line as it comes.
func say(_ text: String) {
    Console.writeOrLeave(text + "\n", to: .output)
}

/// A value as one line of JSON on standard output (keys sorted, dates in ISO 8601): what `--json` prints.
func sayJSON(_ value: some Encodable) throws {
    say(String(decoding: try JSONEncoder.iso8601.encode(value), as: UTF8.self))
}

/// A line about what happened (queued, saved, paired, waiting…) on standard error: standard output stays for content
/// and listings.
func tell(_ text: String) {
    TerminalProgress.status(text)
}

extension OutboxJob {
    /// The exit status `share send` returns for this job once it has ended (nil while it runs).
    func exitStatus() -> ExitStatus? {
        guard state.isFinal else { return nil }
        if let failure { return ExitStatus(failure) }
        // Jobs an earlier version finished recorded the status itself.
        if let exitStatus { return ExitStatus(rawValue: exitStatus) ?? .failure }
        return state == .delivered ? .success : .failure
    }
}

/// A send or receive in which some items were refused ends with one line naming each and why (exit 3): "refused N
/// item(s): …" on the receiving side, "N item(s) refused: …" on the sending side.
func failIfRefused(_ refused: [(label: String, reason: String)], receiving: Bool) throws {
    guard !refused.isEmpty else { return }
    let reasons = refused.map { "\($0.label): \($0.reason)" }.joined(separator: "; ")
    throw ShareError(
        .refused,
        receiving ? "refused \(refused.count) item(s): \(reasons)" : "\(refused.count) item(s) refused: \(reasons)")
}
