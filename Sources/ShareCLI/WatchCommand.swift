import ArgumentParser
import FoundationEssentials
import ShareCommandLine
import Glibc
import ShareKit
import ShareWatch
import ShareTrust
import ShareProtocol
import ShareEngine
import ShareAgent

/// `share watch …` runs `share-watch`, installed beside `share`: the watch-style client is a separate, much smaller
/// program (no ArgumentParser, no archive library, only FoundationEssentials), so that a device short of memory
/// runs only that. The arguments are passed on unchanged.
public struct WatchClientCommand: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Run the lightweight watch-style client: attach to your agent, or send through it.",
        usage: ShareWatch.WatchCommand.synopsis,
        discussion: ShareWatch.WatchCommand.details)

    @Argument(parsing: .allUnrecognized, help: "The watch client's arguments.")
    public var arguments: [String] = []

    public init() {}

    public func run() throws {
        Self.runWatchClient(arguments)
    }

    /// Replaces this process with `share-watch` (installed beside `share`) and its arguments; returns never.
    public static func runWatchClient(_ arguments: [String]) -> Never {
        let own = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        let program = own.deletingLastPathComponent().appendingPathComponent("share-watch").path
        guard access(program, X_OK) == 0 else {
            complain("\(program) is missing; install share-watch beside share (scripts/setup.sh builds both)")
            Glibc.exit(ExitStatus.configuration.rawValue)
        }
        let argv = [program] + arguments
        var pointers = argv.map { strdup($0) } + [nil]
        execv(program, &pointers)
        complain("cannot run \(program): \(String(cString: strerror(errno)))")
        Glibc.exit(ExitStatus.configuration.rawValue)
    }
}
