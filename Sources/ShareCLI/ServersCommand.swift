import ArgumentParser
import FoundationEssentials
import ShareCommandLine
import ShareKit
import ShareTrust
import ShareReach
import ShareProtocol
import ShareEngine
import ShareAgent

/// `share servers`: the discovery servers and relays this device uses beyond the LAN (kept in agent.json).
struct ServersCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "servers",
        abstract: "List, add or remove the discovery servers and relays used beyond the local network.",
        discussion: helpPage(
            "A discovery server (Syncthing's stdiscosrv) lets your devices find each other's current address by device ID; a relay (Syncthing's strelaysrv) carries a session when no direct path exists, seeing only ciphertext. Each is given with its device ID in the URL (?id=…), which its certificate must match: nothing is trusted on first use. With none configured, nothing leaves the local network. Deploy/README.md shows how to run both on a host of your own.",
            "The agent reads them when it starts; restart it after a change.",
            examples: [
                "share servers", "share servers add https://203.0.113.10:8443/?id=ABCDEFG-…",
                "share servers add relay://203.0.113.10:22067/?id=HIJKLMN-…", "share servers remove 203.0.113.10:22067",
            ]),
        subcommands: [List.self, Add.self, Remove.self], defaultSubcommand: List.self)

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "List the configured discovery servers and relays.",
            discussion: helpPage("One per line: its kind and URL.", examples: ["share servers list"]))

        @OptionGroup var device: DeviceOptions

        func run() throws {
            try ShareCLI.run {
                let settings = try ReachSettings.load(device.paths)
                if settings.isEmpty {
                    say("no servers: nothing leaves the local network (add one with: share servers add URL)")
                }
                for server in settings.discoveryServers { say("discovery\t\(server.canonical)") }
                for server in settings.relays { say("relay\t\(server.canonical)") }
            }
        }
    }

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add",
            abstract: "Add a discovery server (https://…) or a relay (relay://…), pinned by its ID.",
            discussion: helpPage(
                "The URL must carry the server's device ID (?id=…): stdiscosrv and strelaysrv print it when they start.",
                examples: [
                    "share servers add https://203.0.113.10:8443/?id=ABCDEFG-…",
                    "share servers add relay://203.0.113.10:22067/?id=HIJKLMN-…",
                ]))

        @OptionGroup var device: DeviceOptions

        @Argument(help: ArgumentHelp("https://HOST:PORT/?id=ID or relay://HOST:PORT/?id=ID", valueName: "url"))
        var url: String

        func run() throws {
            try ShareCLI.run {
                let server = try ServerURL(parsing: url)
                let added = try ServerList.add(server, paths: device.paths)
                let noun = server.kind == .relay ? "relay" : "discovery server"
                tell(added ? "added \(noun) \(server.canonical)" : "\(noun) \(server.canonical) was already there")
                if added, ControlClient.agentIsRunning(device.paths) {
                    tell("restart the agent to use it")
                }
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove", abstract: "Remove a discovery server or relay.",
            discussion: helpPage(
                "Names it by its URL, its HOST:PORT or its host.", examples: ["share servers remove 203.0.113.10:22067"]
            ))

        @OptionGroup var device: DeviceOptions

        @Argument(help: ArgumentHelp("The server's URL, HOST:PORT or host.", valueName: "server"))
        var server: String

        func run() throws {
            try ShareCLI.run {
                let removed = try ServerList.remove(server, paths: device.paths)
                guard !removed.isEmpty else {
                    throw ShareError(.usage, "no configured server is '\(server)' (see: share servers)")
                }
                for url in removed { tell("removed \(url)") }
            }
        }
    }
}
