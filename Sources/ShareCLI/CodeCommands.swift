import ShareNet
import ArgumentParser
import CoreTransferable
import FoundationEssentials
import ShareText
import ShareCommandLine
import ShareKit
import ShareProtocol
import ShareWormhole
import ShareTrust
import ShareEngine
import ShareAgent

/// Where a send by code meets the other side: magic-wormhole's servers by default (so a code works with any wormhole
/// client), else agent.json's `"wormhole"` object, else these options.
struct CodeServerOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The rendezvous (mailbox) server for codes (default: magic-wormhole's, or agent.json's wormhole.server).",
            valueName: "ws-url"))
    var server: String?

    @Option(
        help: ArgumentHelp(
            "The transit relay used when the two machines cannot connect directly (default: magic-wormhole's, or "
                + "agent.json's wormhole.relay).", valueName: "tcp:host:port"))
    var relay: String?

    @Flag(help: "Do not listen for a direct connection by code (the other side connects, or the relay carries it).")
    var noListen = false

    @Option(
        help: ArgumentHelp(
            "Advertise only this address for a direct connection by code (repeatable; default: this machine's).",
            valueName: "address"))
    var advertise: [String] = []

    func validate() throws {
        if let server, !server.hasPrefix("ws://") {
            throw ValidationError(
                "--server '\(server)' is not a ws:// URL (for example ws://relay.example.org:4000/v1)")
        }
        if let relay, (try? TransitHint(parsing: relay)) == nil {
            throw ValidationError("--relay '\(relay)' is not tcp:HOST:PORT")
        }
    }

    /// The first line of an exchange by code: which mailbox server carries it (the code, the sides' versions and
    /// the transit hints pass through it, end-to-end encrypted; the items go directly or through the relay).
    func whereItGoes(_ options: CodeOptions) -> String {
        options.wormhole.server == WormholeOptions.publicServer
            ? "by code through magic-wormhole's public mailbox server (\(options.wormhole.server)), as wormhole does; "
                + "--server (or agent.json's wormhole.server) names your own"
            : "by code through the mailbox server \(options.wormhole.server)"
    }

    /// `--server URL ` for the other side's command when the server is not the default one both ends assume.
    func serverArgument(_ options: CodeOptions) -> String {
        options.wormhole.server == WormholeOptions.publicServer ? "" : "--server \(options.wormhole.server) "
    }

    /// The same for a `wormhole` command (`--relay-url`).
    func wormholeArgument(_ options: CodeOptions) -> String {
        options.wormhole.server == WormholeOptions.publicServer ? "" : "--relay-url \(options.wormhole.server) "
    }

    func options(_ paths: DevicePaths) throws -> CodeOptions {
        var options = try CodeOptions.load(paths)
        if let server { options.wormhole.server = server }
        if let relay { options.transfer.relays = [try TransitHint(parsing: relay)] }
        if noListen { options.transfer.listen = false }
        if !advertise.isEmpty { options.transfer.addresses = advertise }
        return options
    }
}

/// The device name a code exchange shows the other side, without creating an identity.
func codeDeviceName(_ paths: DevicePaths) -> String {
    ((try? LocalDevice.loadName(paths)) ?? nil) ?? LocalDevice.hostName()
}

extension SendCommand {
    /// `share send --code`: prints a code and sends to whoever types it (share, or any magic-wormhole client).
    func sendByCode(items: SendItems, paths: DevicePaths, spooled: URL?) throws {
        var options = try codeServers.options(paths)
        options.wormhole.words = codeWords
        options.wormhole.lifetime = parseDuration(codeLifetime) ?? 600
        var code: WormholeCode?
        if let useCode {
            do {
                code = try WormholeCode(parsing: useCode)
            } catch {
                throw ShareError(.usage, error.message)
            }
        }
        var sending = ShareEngine.SendOptions()
        sending.chunkSize = Int(parseSize(chunkSize)!)
        sending.compression = !noCompress
        sending.timeouts = SessionTimeouts(connect: timeout, handshake: timeout, idle: answerTimeout)
        let progress = output.progress
        let lifetime = Int(options.wormhole.lifetime)
        progress.note(codeServers.whereItGoes(options), event: "server", fields: ["server": options.wormhole.server])
        let receiveHint = "share receive \(codeServers.serverArgument(options))"
        let outcome = try CodeSend.run(
            items: items.shareItems, plain: plainItem(items, spooled: spooled), name: codeDeviceName(paths),
            paths: paths, code: code, options: options, sending: sending, progress: progress
        ) { code in
            progress.note(
                "code \(code) (single use, valid \(lifetime >= 120 ? "\(lifetime / 60) min" : "\(lifetime) s")); on the other "
                    + "machine: \(receiveHint)\(code)  (or: wormhole receive \(codeServers.wormholeArgument(options))\(code))",
                event: "code", fields: ["code": code.description, "lifetime": lifetime])
        }
        if let report = outcome.report {
            if output.json {
                progress.note(
                    "summary", event: "summary",
                    fields: [
                        "delivered": report.delivered.count, "refused": report.refused.count,
                        "bytesSent": report.bytesSent, "wireBytes": report.wireBytes,
                        "bytesAlreadyThere": report.bytesSkipped, "seconds": report.seconds,
                        "route": report.route.description,
                    ])
            } else if !output.quiet {
                tell(
                    "sent \(report.delivered.count) of \(report.delivered.count + report.refused.count) items to "
                        + "\(outcome.peerName) by code, \(ProgressReporter.bytes(report.bytesSent)) in "
                        + "\(Format.c("%.2f", report.seconds)) s, \(report.route)")
            }
            try failIfRefused(report.refused, receiving: false)
        } else if let report = outcome.wormhole, !output.quiet {
            tell(
                "sent \(report.offer.summary) to a wormhole client"
                    + (report.route.map {
                        ", \(ProgressReporter.bytes(report.bytes)) in "
                            + "\(Format.c("%.2f", report.seconds)) s, \($0)"
                    } ?? ""))
        }
    }

    /// The one item a magic-wormhole client can take, when the send is one file, folder, text or URL.
    private func plainItem(_ items: SendItems, spooled: URL?) -> WormholeSender.Item? {
        let count =
            items.files.count + items.texts.count + items.urls.count + items.profiles.count
            + (items.bundle == nil ? 0 : 1)
        guard count == 1 else { return nil }
        if let text = items.texts.first { return .text(text) }
        if let url = items.urls.first { return .text(url.absoluteString) }
        if let spooled { return .file(spooled) }
        guard let path = files.first(where: { $0 != "-" }) else { return nil }
        let url = URL(fileURLWithPath: path).standardizedFileURL
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isFolder) else { return nil }
        return isFolder.boolValue ? .directory(url) : .file(url)
    }
}

extension ReceiveCommand {
    /// `share receive CODE`: joins the exchange, shows the offer, and receives what the user accepts.
    func receiveByCode(_ text: String, options receive: ReceiveOptions) throws {
        let code: WormholeCode
        do {
            code = try WormholeCode(parsing: text)
        } catch {
            throw ShareError(.usage, error.message)
        }
        let paths = device.paths
        var options = try codeServers.options(paths)
        if timeout > 0 { options.wormhole.lifetime = timeout }
        var receive = receive
        let yes = self.yes
        if !yes {
            receive.gate = { offer, peerName in
                AskPerson.ask(offer, from: peerName) ? .proceed : .decline("declined by the receiver")
            }
        }
        let progress = output.progress
        progress.note(codeServers.whereItGoes(options), event: "server", fields: ["server": options.wormhole.server])
        let outcome = try CodeReceive.run(
            code: code, name: codeDeviceName(paths), paths: paths, receive: receive, options: options,
            progress: progress
        ) { offer in
            yes || AskPerson.ask(offer)
        }
        if let report = outcome.report {
            try failIfRefused(report.refused, receiving: true)
        } else if let report = outcome.wormhole {
            switch report.offer {
            case .text(let text):
                do { try progress.output(text) } catch { Console.leave(error) }
            default:
                if !output.quiet, let saved = report.saved {
                    tell(
                        "received \(report.summary) from a wormhole client into \(saved.path), "
                            + "\(Format.c("%.2f", report.seconds)) s, \(report.route ?? "")")
                }
            }
        }
    }
}

extension AskPerson {
    /// Shows a magic-wormhole client's offer and reads the answer, as for any offer.
    static func ask(_ offer: WormholeOffer) -> Bool {
        var line = "a wormhole client wants to send \(offer.summary)"
        if case .text(let text) = offer {
            line += ": \"\(ProgressReporter.neutralized(String(text.prefix(200))))\""
        }
        TerminalProgress.status(ProgressReporter.neutralized(line))
        return answer()
    }
}
