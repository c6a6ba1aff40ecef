import ArgumentParser
import Dispatch
import FoundationEssentials
import ShareLocalSendRoute
import ShareText
import ShareCommandLine
import Logging
import CoreTransferable
import ShareKit
import ShareWeb
import ShareNet
import ShareTrust
import ShareReach
import ShareProtocol
import ShareEngine
import ShareAgent
import ShareFolders

struct AgentCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "Run this device's agent: receive from trusted devices into the inbox until stopped.",
        discussion: helpPage(
            "Items from a trusted device land in INBOX/<device name>/, moved into place only once verified; text and URLs are kept in the inbox history (see: share inbox). Profiles are imported into the catalog. The agent also delivers this device's queued sends (share send while it runs), serves paste requests of your own devices, and keeps the link your watch opens.",
            "Its port is chosen once and saved in agent.json, so devices that paired with this one keep reaching it after a restart. Settings come from agent.json (listen, port, inbox, accept, maxSize, idleTimeout, discovery, discoveryPort, lowPriority, giveUpAfter, discoveryServers, relays, localsend, wormhole, web, folders); the options override them.",
            "Shared folders (share sync): a folder another of your devices shares with this one is offered (share sync accept), or accepted at once when agent.json's \"folders\": {\"autoAccept\": [DEVICE…]} names that device, into \"path\" (default: the inbox for that device).",
            "LocalSend: with --localsend (or a \"localsend\" object in agent.json: port, multicastPort, interface, peers, pin, answerTimeout) the agent speaks LocalSend too. Phones and computers running LocalSend see it and send to it: each upload waits in share pending unless the device is trusted with share trust add --localsend FINGERPRINT --no-ask, and lands in INBOX/<its name> (LocalSend <fingerprint>)/. share peers lists the LocalSend devices seen, and share send --to NAME reaches them. The PIN comes from agent.json or SHARE_LOCALSEND_PIN.",
            "Beyond the LAN: with discovery servers configured (share servers add https://HOST:PORT/?id=ID) the agent announces its port there, and with a relay (share servers add relay://HOST:PORT/?id=ID) it stays joined to it and takes relayed sessions exactly like direct ones. With none, nothing leaves the local network.",
            examples: [
                "share agent", "share agent --inbox ~/Inbox --accept public.image --accept public.item --max-size 4G",
                "share agent --no-discovery --listen 127.0.0.1",
                "share agent --localsend",
            ]))

    @OptionGroup var device: DeviceOptions

    @Option(
        help:
            "Port to listen on (0 picks a free one for this run; default: agent.json's, else one chosen once and saved there).",
        transform: PortOption.listening)
    var port: Int?

    @Option(help: "Address to listen on (:: listens on IPv6 and IPv4; default: agent.json, else ::).")
    var listen: String?

    @Option(help: "Seconds a connection may stay idle.")
    var idleTimeout: Double?

    @Option(help: "Seconds a new connection has to complete its TLS handshake and hello.")
    var handshakeTimeout: Double = 5

    @Option(help: ArgumentHelp("Where received items go (default: agent.json, else DATA/inbox).", valueName: "folder"))
    var inbox: String?

    @Option(help: ArgumentHelp("Accept only this type (repeatable, in order of preference).", valueName: "uti"))
    var accept: [String] = []

    @Option(help: ArgumentHelp("Largest item accepted (e.g. 2G).", valueName: "size"))
    var maxSize: String?

    @Option(
        help: ArgumentHelp("Least severe event logged: \(Log.levelNames.joined(separator: ", ")).", valueName: "level"))
    var logLevel = "info"

    @Flag(
        help: "Run transfers at normal CPU priority (by default they run 9 nice steps lower; agent.json: lowPriority).")
    var normalPriority = false

    @Flag(
        help: "Choose the agent's port now (when agent.json names none), save it in agent.json, print it and exit.")
    var savePort = false

    @Flag(help: "Do not announce this agent on the local network or listen for others.")
    var noDiscovery = false

    @Option(
        help: ArgumentHelp("UDP port of LAN discovery (default 21847).", valueName: "port"),
        transform: PortOption.service)
    var discoveryPort: Int?

    @Option(
        help: ArgumentHelp(
            "How long a queued send keeps trying a device that cannot be reached (default 7d; agent.json: giveUpAfter).",
            valueName: "duration"))
    var giveUpAfter: String?

    @Option(help: ArgumentHelp("Seconds between announcements (default 30).", valueName: "seconds"))
    var announceInterval: Double?

    @Option(
        help: ArgumentHelp(
            "Announce and listen on this IPv4 interface address only (127.0.0.1: this machine).", valueName: "address"))
    var discoveryInterface: String?

    @Option(
        help: ArgumentHelp(
            "A global discovery server, https://HOST:PORT/?id=ID (repeatable; replaces agent.json's discoveryServers).",
            valueName: "url"))
    var discoveryServer: [String] = []

    @Option(
        help: ArgumentHelp(
            "A relay to stay joined to, relay://HOST:PORT/?id=ID (repeatable; replaces agent.json's relays).",
            valueName: "url"))
    var relay: [String] = []

    @Flag(
        help:
            "Speak LocalSend too: phones and computers running LocalSend see this device and send to it (agent.json: localsend)."
    )
    var localsend = false

    @Option(
        help: ArgumentHelp("HTTPS port for LocalSend devices (default 53317).", valueName: "port"),
        transform: PortOption.listening)
    var localsendPort: Int?

    @Option(
        help: ArgumentHelp(
            "A LocalSend device to register with by address, where multicast does not reach (repeatable).",
            valueName: "host:port"))
    var localsendPeer: [String] = []

    @Option(
        help: ArgumentHelp("UDP port of LocalSend's multicast discovery (default 53317; 0: none).", valueName: "port"),
        transform: PortOption.listening)
    var localsendMulticastPort: Int?

    @Flag(
        help:
            "Serve this device's page on 127.0.0.1 too (as share web does; the address is printed; agent.json: web).")
    var web = false

    @Option(
        help: ArgumentHelp("Port of the page on 127.0.0.1 (default: a free one).", valueName: "port"),
        transform: PortOption.listening)
    var webPort: Int?

    func validate() throws {
        for peer in localsendPeer where LocalSendSettings.address(peer) == nil {
            throw ValidationError("--localsend-peer '\(peer)' is not HOST:PORT")
        }
        if let maxSize, parseSize(maxSize) == nil { throw ValidationError("--max-size '\(maxSize)' is not a size") }
        guard Log.levelNames.contains(logLevel) else {
            throw ValidationError("--log-level must be one of \(Log.levelNames.joined(separator: ", "))")
        }
        if let giveUpAfter, parseDuration(giveUpAfter) == nil {
            throw ValidationError("--give-up-after '\(giveUpAfter)' is not a duration (e.g. 7d, 12h, 30m)")
        }
        if let announceInterval, !(0.1...3600).contains(announceInterval) {
            throw ValidationError("--announce-interval must be between 0.1 and 3600 seconds")
        }
        for (text, kind) in discoveryServer.map({ ($0, ServerURL.Kind.discovery) }) + relay.map({ ($0, .relay) }) {
            let server: ServerURL
            do {
                server = try ServerURL(parsing: text)
            } catch {
                throw ValidationError(error.message)
            }
            if server.kind != kind {
                throw ValidationError(
                    "'\(text)' is a \(server.kind == .relay ? "relay (give it with --relay)" : "discovery server (give it with --discovery-server)")"
                )
            }
        }
    }

    func run() throws {
        try ShareCLI.run {
            Log.configure(level: Logger.Level(rawValue: logLevel) ?? .info, timestamps: true)
            let local = try device.loadDevice()
            if savePort {
                say(String(try AgentPort.resolve(local.paths)))
                return
            }
            let config = try AgentConfig.load(local.paths.agentConfigFile)
            var timeouts = SessionTimeouts()
            timeouts.idle = idleTimeout ?? config.idleTimeout ?? 300
            timeouts.handshake = handshakeTimeout
            let limit = (maxSize ?? config.maxSize).flatMap(parseSize)
            var entries = try (accept.isEmpty ? config.accept ?? [] : accept).map {
                AcceptedType(try parseType($0), maxSize: limit)
            }
            if entries.isEmpty { entries = [AcceptedType(.item, maxSize: limit)] }
            let folder =
                (inbox ?? config.inbox).map { URL(fileURLWithPath: $0, isDirectory: true).standardizedFileURL }
                ?? local.paths.inbox
            // The same port across restarts, so paired devices keep reaching this agent.
            let port = try self.port ?? config.port ?? AgentPort.resolve(local.paths)
            let listen = self.listen ?? config.listen ?? "::"
            let box = AgentInbox(
                directory: folder,
                accept: AcceptList(entries, declarations: UTType.registeredTypes.customDeclarations), maxSize: limit)
            let discover = !noDiscovery && (config.discovery ?? true)
            var reach = try ReachSettings.load(local.paths)
            if !discoveryServer.isEmpty {
                reach.discoveryServers = try discoveryServer.map { try ServerURL(parsing: $0) }
            }
            if !relay.isEmpty { reach.relays = try relay.map { try ServerURL(parsing: $0) } }
            let agent = try Agent(
                device: local, host: listen, port: port, inbox: box, timeouts: timeouts,
                discovery: discover
                    ? (
                        discoveryPort ?? config.discoveryPort ?? Discovery.defaultPort, announceInterval ?? 30,
                        discoveryInterface
                    ) : nil,
                lowPriority: !normalPriority && (config.lowPriority ?? true),
                jobs: {
                    var lifetimes = Outbox.Lifetimes()
                    if let limit = (giveUpAfter ?? config.giveUpAfter).flatMap(parseDuration) {
                        lifetimes.giveUpAfter = limit
                    }
                    return lifetimes
                }(), reach: reach, localSend: localSendSettings(config), folders: config.folders ?? FolderAcceptance())
            tell("share agent: \(local.name) (\(local.id)), inbox \(folder.path), listening on port \(agent.port)")
            if let part = agent.localSend {
                tell("share agent: LocalSend on port \(part.port), fingerprint \(part.fingerprint)")
            }
            if let rate = ProgressReporter.testSendRate {
                complain(
                    "testing only: sends are slowed to \(ProgressReporter.bytes(UInt64(rate)))/s (SHARE_TEST_SEND_RATE)"
                )
            }
            var page: WebServer?
            if web || webPort != nil || (config.web != nil && config.web?.enabled != false) {
                // Pairing from the page announces as the agent does (or not at all, without discovery).
                let server = try WebServer(
                    device: local, port: webPort ?? config.web?.port ?? 0,
                    discovery: discover
                        ? (discoveryPort ?? config.discoveryPort ?? Discovery.defaultPort, discoveryInterface) : nil)
                page = server
                say("share agent: page at \(server.address)")
            }
            // The page is one of the agent's services: started with them, stopped with them, and its failure ends
            // the agent as any other part's does.
            try agent.runUntilStopped(with: page.map { [$0] } ?? [])
            tell("share agent: stopped")
        }
    }
}

extension AgentCommand {
    /// LocalSend's settings: agent.json's `localsend` object (on when it is there and not `"enabled": false`), then
    /// the command line's; nil when LocalSend stays off. The PIN comes from agent.json or SHARE_LOCALSEND_PIN (never
    /// the command line, where every user of the machine could read it).
    func localSendSettings(_ config: AgentConfig) -> LocalSendSettings? {
        let file = config.localsend
        guard localsend || (file != nil && file?.enabled != false) else { return nil }
        var settings = file?.settings ?? LocalSendSettings()
        if let localsendPort { settings.port = localsendPort }
        if let localsendMulticastPort { settings.multicastPort = localsendMulticastPort }
        if !localsendPeer.isEmpty { settings.peers = localsendPeer }
        if let pin = ProcessInfo.processInfo.environment["SHARE_LOCALSEND_PIN"], !pin.isEmpty { settings.pin = pin }
        return settings
    }
}

/// agent.json's `localsend` object: LocalSend's settings, and `enabled`.
struct LocalSendConfig: Codable {
    var enabled: Bool?
    var port: Int?
    var listen: String?
    var multicastPort: Int?
    var interface: String?
    var peers: [String]?
    var pin: String?
    var answerTimeout: Double?

    var settings: LocalSendSettings {
        var settings = LocalSendSettings()
        settings.port = port
        settings.listen = listen
        settings.multicastPort = multicastPort
        settings.interface = interface
        settings.peers = peers
        settings.pin = pin
        settings.answerTimeout = answerTimeout
        return settings
    }
}

/// `CONFIG/agent.json`: the agent's settings; command-line options override them.
///
///     { "listen": "::", "port": 7001, "inbox": "/home/me/Inbox", "accept": ["public.image", "public.item"],
///       "maxSize": "4G", "idleTimeout": 300, "discovery": true, "discoveryPort": 21847, "lowPriority": true,
///       "giveUpAfter": "7d", "discoveryServers": ["https://203.0.113.10:8443/?id=…"],
///       "relays": ["relay://203.0.113.10:22067/?id=…"], "localsend": {"port": 53317, "pin": "4711"},
///       "wormhole": {"server": "ws://HOST:PORT/v1", "relay": "tcp:HOST:PORT"},
///       "folders": {"autoAccept": ["desk"], "path": "/home/me/Sync"} }
struct AgentConfig: Codable {
    var listen: String?
    var port: Int?
    var inbox: String?
    var accept: [String]?
    var maxSize: String?
    var idleTimeout: Double?
    var discovery: Bool?
    var discoveryPort: Int?
    var lowPriority: Bool?
    var giveUpAfter: String?
    var discoveryServers: [String]?
    var relays: [String]?
    var localsend: LocalSendConfig?
    /// Read by sends by code (CodeOptions); listed so the agent accepts a file that names them.
    var wormhole: [String: String]?
    /// The page (as `--web`): on when the object is there and not `"enabled": false`.
    var web: WebConfig?
    /// Shared folders: whose offers are accepted without asking, and where accepted folders go.
    var folders: FolderAcceptance?

    struct WebConfig: Codable {
        var enabled: Bool?
        var port: Int?
    }

    /// Each key and the JSON type it takes, as a person would name it.
    static let keys: [String: String] = [
        "listen": "a string (an address)", "port": "a whole number (0–65535)", "inbox": "a string (a folder)",
        "accept": "a list of strings (types)", "maxSize": "a string (a size, e.g. 4G)",
        "idleTimeout": "a number (seconds)", "discovery": "true or false", "discoveryPort": "a whole number",
        "lowPriority": "true or false", "giveUpAfter": "a string (a duration, e.g. 7d)",
        "discoveryServers": "a list of strings (https://HOST:PORT/?id=ID)",
        "relays": "a list of strings (relay://HOST:PORT/?id=ID)",
        "localsend":
            "an object (enabled, port, listen, multicastPort, interface, peers, pin, answerTimeout)",
        "wormhole": "an object (server, relay)",
        "web": "an object (enabled, port)",
        "folders": "an object (autoAccept: a list of device names or IDs, path: a folder)",
    ]

    static func load(_ file: URL) throws -> AgentConfig {
        guard let data = FileManager.default.contents(atPath: file.path) else { return AgentConfig() }
        guard let object = JSONText.object(data) else {
            throw ShareError(.configuration, "\(file.path) is not a JSON object; fix or remove it")
        }
        if let unknown = object.keys.sorted().first(where: { keys[$0] == nil }) {
            throw ShareError(
                .configuration,
                "\(file.path): unknown key '\(unknown)'; the keys are \(keys.keys.sorted().joined(separator: ", "))")
        }
        let config: AgentConfig
        do {
            config = try JSONDecoder().decode(AgentConfig.self, from: data)
        } catch let error as DecodingError {
            let key: String? =
                switch error {
                case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
                    context.codingPath.first?.stringValue
                case .keyNotFound(let key, _): key.stringValue
                @unknown default: nil
                }
            guard let key, let expected = keys[key] else {
                throw ShareError(.configuration, "\(file.path) is not valid agent settings; fix or remove it")
            }
            throw ShareError(.configuration, "\(file.path): '\(key)' must be \(expected)")
        }
        if let port = config.port, !(0...65535).contains(port) {
            throw ShareError(.configuration, "\(file.path): port \(port) is out of range (0–65535)")
        }
        if let size = config.maxSize, parseSize(size) == nil {
            throw ShareError(.configuration, "\(file.path): maxSize '\(size)' is not a size (e.g. 4G)")
        }
        if let limit = config.giveUpAfter, parseDuration(limit) == nil {
            throw ShareError(.configuration, "\(file.path): giveUpAfter '\(limit)' is not a duration (e.g. 7d)")
        }
        do {
            _ = try ReachSettings.load(file: file)
        } catch let error as ShareFailure {
            throw ShareError(.configuration, error.message)
        }
        return config
    }
}
