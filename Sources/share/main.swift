import Glibc
import ShareCLI

// `share watch …` is the small watch client, a program of its own: it gets its arguments (and its --help) whole.
let arguments = CommandLine.arguments
if arguments.count > 1, arguments[1] == "watch" {
    WatchClientCommand.runWatchClient(Array(arguments.dropFirst(2)))
}
ShareCommand.main()
