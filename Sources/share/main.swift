import Glibc
import ShareCLI
import ShareKit
import ShareKitLocalSend

// A reader that goes away (`share … | head -1`) is met as EPIPE by the one console writer, never as a signal.
signal(SIGPIPE, SIG_IGN)

// `share watch …` is the small watch client, a program of its own: it gets its arguments (and its --help) whole.
let arguments = CommandLine.arguments
if arguments.count > 1, arguments[1] == "watch" {
    WatchClientCommand.runWatchClient(Array(arguments.dropFirst(2)))
}
// The command (and the page and agent it runs) sends to LocalSend devices by name, as well as to trusted devices.
ShareClient.reachLocalSendDevices()
ShareCommand.main()
