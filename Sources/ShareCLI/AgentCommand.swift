import ArgumentParser
import Dispatch
import Foundation
import ShareKit

struct AgentCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent", abstract: "Run this device's agent: accept trusted devices until stopped.")

    @OptionGroup var device: DeviceOptions

    @Option(help: "Port to listen on (0 picks a free one and prints it).")
    var port = 0

    @Option(help: "Address to listen on (:: listens on IPv6 and IPv4).")
    var listen = "::"

    @Option(help: "Seconds a connection may stay idle.")
    var idleTimeout: Double = 300

    @Option(help: "Seconds a new connection has to complete its TLS handshake and hello.")
    var handshakeTimeout: Double = 10

    func run() throws {
        try ShareCLI.run {
            let local = try device.loadDevice()
            var timeouts = SessionTimeouts()
            timeouts.idle = idleTimeout
            timeouts.handshake = handshakeTimeout
            let agent = try Agent(device: local, host: listen, port: port, timeouts: timeouts)
            agent.start()
            say("share agent: \(local.name) (\(local.id)) listening on port \(agent.port)")
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
