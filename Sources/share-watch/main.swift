import Glibc
import ShareCommandLine
import ShareTrust
import ShareTLS
import ShareWatch
import ShareNet

// `share watch` (the `share` command runs this executable): the small watch-style client.
// One malloc arena for the watch's few threads: each thread's own arena would keep pages of its own.
Syscalls.limitMallocArenas(1)
TLSLibrary.initializeLean()
let arguments = Array(CommandLine.arguments.dropFirst())
let command: WatchCommand
do {
    command = try WatchCommand.parse(arguments)
} catch {
    Console.error(error.description)
    exit(ExitStatus.usage.rawValue)
}
do {
    switch command {
    case .help:
        print(WatchCommand.usage(width: min(100, Syscalls.stdoutColumns ?? 80)))
    case .version:
        print(WatchCommand.versionLine)
    case .attach(let options):
        try WatchClient(options: options).run()
    case .send(let options):
        try WatchSender(options: options).run()
    }
    exit(0)
} catch let error as ShareFailure {
    Console.error(error.message)
    exit(ExitStatus(error.code).rawValue)
} catch {
    Console.error("\(error)")
    exit(ExitStatus.failure.rawValue)
}
