import ArgumentParser
import Dispatch
import Foundation
import CoreTransferable
import ShareKit

struct AgentCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "Run this device's agent: receive from trusted devices into the inbox until stopped.",
        discussion: """
            Items from a trusted device land in INBOX/<device name>/, moved into place only once verified; text and
            URLs are kept in the inbox history (see: share inbox). Profiles are imported into the catalog.
            """)

    @OptionGroup var device: DeviceOptions

    @Option(help: "Port to listen on (0 picks a free one and prints it).")
    var port = 0

    @Option(help: "Address to listen on (:: listens on IPv6 and IPv4).")
    var listen = "::"

    @Option(help: "Seconds a connection may stay idle.")
    var idleTimeout: Double = 300

    @Option(help: "Seconds a new connection has to complete its TLS handshake and hello.")
    var handshakeTimeout: Double = 10

    @Option(help: ArgumentHelp("Where received items go (default: DATA/inbox).", valueName: "folder"))
    var inbox: String?

    @Option(help: ArgumentHelp("Accept only this type (repeatable, in order of preference).", valueName: "uti"))
    var accept: [String] = []

    @Option(help: ArgumentHelp("Largest item accepted (e.g. 2G).", valueName: "size"))
    var maxSize: String?

    func validate() throws {
        if let maxSize, parseSize(maxSize) == nil { throw ValidationError("--max-size '\(maxSize)' is not a size") }
    }

    func run() throws {
        try ShareCLI.run {
            let local = try device.loadDevice()
            var timeouts = SessionTimeouts()
            timeouts.idle = idleTimeout
            timeouts.handshake = handshakeTimeout
            let limit = maxSize.flatMap(parseSize)
            var entries = try accept.map { AcceptedType(try parseType($0), maxSize: limit) }
            if entries.isEmpty { entries = [AcceptedType(.item, maxSize: limit)] }
            let folder =
                inbox.map { URL(fileURLWithPath: $0, isDirectory: true).standardizedFileURL }
                ?? local.paths.inbox
            let box = AgentInbox(
                directory: folder,
                accept: AcceptList(entries, declarations: UTType.registeredTypes.customDeclarations), maxSize: limit)
            let agent = try Agent(device: local, host: listen, port: port, inbox: box, timeouts: timeouts)
            agent.start()
            say("share agent: \(local.name) (\(local.id)), inbox \(folder.path), listening on port \(agent.port)")
            AgentSignals.waitForTermination()
            agent.stop()
            say("share agent: stopped")
        }
    }
}

/// Blocks the calling thread until SIGINT or SIGTERM.
enum AgentSignals {
    static func waitForTermination() {
        let semaphore = DispatchSemaphore(value: 0)
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        let queue = DispatchQueue(label: "share.signals")
        let sources = [SIGINT, SIGTERM].map { DispatchSource.makeSignalSource(signal: $0, queue: queue) }
        for source in sources {
            source.setEventHandler { semaphore.signal() }
            source.resume()
        }
        semaphore.wait()
        for source in sources { source.cancel() }
    }
}
