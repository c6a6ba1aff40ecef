import ShareDisk
import ArgumentParser
import FoundationEssentials
import Glibc
import ShareCommandLine
import ShareKit
import ShareWeb
import ShareNet
import ShareThreads
import ShareTrust
import ShareProtocol
import ShareEngine
import ShareAgent

struct WebCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "web",
        abstract: "Serve this device's page on 127.0.0.1: devices, offers to answer, the inbox, sends with progress.",
        discussion: helpPage(
            "The page shows the trusted devices and those seen on the network, offers waiting for an answer (with their previews) to accept or decline, what arrived (open, download, remove), the agent's sends with live progress (cancel), a place to drop files or type a text for one or more devices, and pairing with the code to compare. It acts through the running agent, as share send, share accept and share cancel do.",
            "It listens on 127.0.0.1 only. The address printed carries a random secret that opens one session: opening it starts a session in that browser tab (kept in the tab's own storage, never a cookie, which would reach every port of 127.0.0.1), and the secret leaves the address bar. Without it, from another site's page, or under another host name, the page serves nothing. --open hands the browser a file only you can read, never the secret on a command line. While an agent serves its page (share agent --web), share web prints a new address of that page instead; otherwise it serves the page itself, and Enter prints another address for another tab.",
            examples: ["share web --open", "share web --port 8384"]))

    @OptionGroup var device: DeviceOptions

    @Option(help: "Port on 127.0.0.1 (default: 0, a free one).", transform: PortOption.listening)
    var port: Int = 0

    @Flag(help: "Open the page in the desktop's browser (xdg-open).")
    var open = false

    @Flag(help: "Pairing from the page neither announces on the local network nor looks for devices by name.")
    var noDiscovery = false

    @OptionGroup var discovery: PairingDiscoveryOptions

    func run() throws {
        try ShareCLI.run {
            let local = try device.loadDevice()
            // The agent serves its page: a new address of it (each opens one session).
            if ControlClient.agentIsRunning(local.paths),
                let answer = try? ControlClient.request(.pageLink, paths: local.paths), answer.ok,
                let link = answer.link
            {
                say("share web: \(link)")
                // The opener file stays (readable by this user only, in the runtime folder): the browser reads it
                // after this command has ended, and its secret is spent once the page opens.
                if open { _ = Self.openInBrowser(link, paths: local.paths) }
                return
            }
            let server: WebServer
            do {
                server = try WebServer(
                    device: local, port: port,
                    discovery: noDiscovery ? nil : (discovery.discoveryPort, discovery.discoveryInterface))
            } catch let error as Syscalls.SocketError {
                throw ShareError(.unavailable, "cannot serve the page on 127.0.0.1:\(port): \(error.message)")
            }
            // Stop signals are taken from here on: one that comes as soon as the address is out (and the browser
            // started) still removes the opener below.
            let stopped = Self.catchStopSignals()
            server.start()
            if !ControlClient.agentIsRunning(local.paths) {
                complain("no agent runs for this device: the page shows what is on disk; start share agent to send")
            }
            say("share web: \(server.address)")
            let opener = open ? Self.openInBrowser(server.address, paths: local.paths) : nil
            // The address opens one session: Enter prints another (for a second tab or browser).
            Self.newAddressOnEnter(server)
            stopped()
            if let opener { PathOperations.removeIfPresent(opener.path) }
            server.stop()
            tell("share web: stopped")
        }
    }

    /// Opens `address` with xdg-open (looked up on PATH) when there is one; otherwise says to open it by hand. The
    /// secret never goes on a command line (`ps` shows every user's): xdg-open gets a file readable by this user
    /// only (0600, in the runtime directory) that sends the browser on to the address. Returns the file, to remove
    /// when the page stops.
    static func openInBrowser(_ address: String, paths: DevicePaths) -> URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        guard
            let opener = path.split(separator: ":").map({ String($0) + "/xdg-open" })
                .first(where: { FileManager.default.isExecutableFile(atPath: $0) })
        else {
            complain("no xdg-open here: open the address above in a browser")
            return nil
        }
        let folder =
            ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"].map { URL(fileURLWithPath: $0, isDirectory: true) }
            ?? paths.state
        let file = folder.appendingPathComponent("share-web-\(WebServer.randomToken().prefix(16)).html")
        let page = """
            <!doctype html><meta charset="utf-8"><meta name="referrer" content="no-referrer">
            <meta http-equiv="refresh" content="0;url=\(address)"><title>share</title>
            <p><a href="\(address)">Open this device's page</a></p>
            """
        do {
            try DevicePaths.ensurePrivateDirectory(folder)
            try AtomicFile.write(Data(page.utf8), to: file, mode: 0o600, durable: false)
        } catch {
            complain("cannot write the page's opener in \(folder.path): open the address above in a browser")
            return nil
        }
        do {
            let process = try ChildProcess.start(opener, [file.path])
            Threads.start(name: "share-xdg-open", stackSize: 256 << 10) { process.wait() }
        } catch {
            complain("cannot run xdg-open: open the address above in a browser")
        }
        return file
    }

    /// Reads standard input on a thread of its own: each line asks for a new address, printed at once.
    static func newAddressOnEnter(_ server: WebServer) {
        guard isatty(0) == 1 else { return }
        tell("share web: the address opens one session; press Enter for another")
        Threads.start(name: "share-web-input") {
            while readLine() != nil { say("share web: \(server.freshAddress())") }
        }
    }

    /// Takes SIGINT, SIGTERM and SIGHUP from now on (they no longer end the process where it stands); the function
    /// returned blocks until one arrives. Not a dispatch signal source: it installs its handler later, on another
    /// thread, and a signal that came in between was lost (a test's stop, sent as soon as the page was opened, was
    /// ignored until the test killed the page, and the opener stayed).
    static func catchStopSignals() -> () -> Void {
        let fd = Syscalls.interruptPipe()
        return {
            // Without a pipe (no descriptor left), the signals keep their default action: one ends the process.
            guard fd >= 0 else { while true { pause() } }
            _ = Syscalls.readSome(fd, upTo: 1)
        }
    }
}
