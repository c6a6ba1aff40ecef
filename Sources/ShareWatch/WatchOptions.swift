import CoreTransferable
import ShareTrust
import ShareProtocol

/// What `share watch` was asked to do, parsed from its arguments by hand (no ArgumentParser: the watch stays small).
public enum WatchCommand: Sendable, Equatable {
    case attach(WatchOptions)
    case send(WatchSendOptions)
    case help
    case version
}

/// `share watch --agent PEER`: stay attached to the owner's agent and show what arrives.
public struct WatchOptions: Sendable, Equatable {
    public var agent = ""
    public var config: String?
    /// Content types accepted, most wanted first (identifiers or file extensions).
    public var accept = ["public.plain-text", "public.url", "public.image"]
    /// Largest item accepted, for every type.
    public var maxSize: UInt64 = 256 << 10
    /// One JSON object a line on standard output.
    public var json = false
    /// Where images (and other saved items) go; `DATA/watch` by default.
    public var into: String?
    /// Most bytes the folder keeps; the oldest files are removed first.
    public var keep: UInt64 = 4 << 20
    /// The link counts as lost when nothing (not even the agent's keepalive) arrives for this long.
    public var silence: Double = 45
    /// Seconds for connect and handshake.
    public var timeout: Double = 10
    /// Longest wait between reconnection attempts.
    public var maxBackoff: Double = 15
    /// Stop after this many items (for scripts and benchmarks); nil runs until stopped.
    public var count: Int?

    public init() {}
}

/// `share watch send --to PEER --text … | --url … | --profile NAME`: send through the agent.
public struct WatchSendOptions: Sendable, Equatable {
    public var agent = ""
    public var config: String?
    public var to = ""
    public var texts: [String] = []
    public var urls: [String] = []
    public var profiles: [String] = []
    public var json = false
    public var timeout: Double = 10

    public init() {}
}

public struct WatchUsageError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

extension WatchCommand {
    /// The version line both programs print.
    public static let versionLine = "share-watch 0.1 (protocol \(Limits.protocolVersion))"

    /// The two forms of the command.
    public static let synopsis = """
        share watch --agent <peer> [<options>]
               share watch send --agent <peer> --to <peer> (--text <text> | --url <url> | --profile <name>)...
        """

    /// What the client does, its options and examples (paragraphs are not wrapped by hand: the terminal wraps them).
    public static let details = """
        A watch-style client: it connects out to its owner's agent (no listening socket), advertises a small accept \
        list and shows what the agent delivers to it: text and URLs on standard output, images saved to a folder \
        that never grows past --keep (oldest removed first); what happens to the link goes to standard error. It \
        reconnects by itself when the agent restarts or the network drops. `send` shares a text, a URL or a profile \
        through the agent, which negotiates with the receiving device.

        OPTIONS:
          --agent <peer>       The agent to attach to: a trusted name or ID, or HOST:PORT.
          --accept <types>     Comma-separated types, most wanted first
                               (default: public.plain-text,public.url,public.image).
          --max-size <size>    Largest item accepted (default 256K).
          --into <folder>      Where images are kept (default: DATA/watch).
          --keep <size>        Most bytes the folder keeps (default 4M).
          --silence <seconds>  The link is lost after this long without a keepalive
                               (default 45).
          --count <n>          Exit after n items.
          --json               One JSON object a line on standard output.
          --config <dir>       This device's folder (as for every share command).
          --version            Show the version.
          -h, --help           Show this help.

        EXAMPLES:
          share watch --agent phone
          share watch --agent phone --accept public.plain-text --json
          share watch send --agent phone --to laptop --text "on my way"
        """

    /// The whole help text of `share-watch --help`.
    public static let usage = "USAGE: " + synopsis + "\n\n" + details

    /// The help text with its paragraphs wrapped to `width` columns (indented lines are left as they are).
    public static func usage(width: Int) -> String {
        usage.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            guard line.count > width, !line.hasPrefix(" ") else { return String(line) }
            var lines: [String] = []
            var current = ""
            for word in line.split(separator: " ") {
                if !current.isEmpty, current.count + 1 + word.count > width {
                    lines.append(current)
                    current = ""
                }
                current += (current.isEmpty ? "" : " ") + word
            }
            lines.append(current)
            return lines.joined(separator: "\n")
        }.joined(separator: "\n")
    }

    /// Parses the arguments after `watch`.
    public static func parse(_ arguments: [String]) throws(WatchUsageError) -> WatchCommand {
        var attach = WatchOptions()
        var send = WatchSendOptions()
        var isSend = false
        var index = 0
        func value(_ flag: String) throws(WatchUsageError) -> String {
            index += 1
            guard index < arguments.count else { throw WatchUsageError(description: "\(flag) needs a value") }
            return arguments[index]
        }
        func size(_ flag: String) throws(WatchUsageError) -> UInt64 {
            let text = try value(flag)
            guard let parsed = parseSize(text), parsed > 0 else {
                throw WatchUsageError(description: "\(flag) takes a size such as 256K or 4M, not '\(text)'")
            }
            return parsed
        }
        func seconds(_ flag: String) throws(WatchUsageError) -> Double {
            let text = try value(flag)
            guard let parsed = Double(text), parsed > 0, parsed <= 86_400 else {
                throw WatchUsageError(description: "\(flag) takes seconds (0–86400), not '\(text)'")
            }
            return parsed
        }
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "-h", "--help", "help": return .help
            case "--version": return .version
            case "send" where !isSend: isSend = true
            case "--agent":
                attach.agent = try value(argument)
                send.agent = attach.agent
            case "--config":
                attach.config = try value(argument)
                send.config = attach.config
            case "--json":
                attach.json = true
                send.json = true
            case "--timeout":
                attach.timeout = try seconds(argument)
                send.timeout = attach.timeout
            case "--accept":
                attach.accept = try value(argument).split(separator: ",").map { String($0.filter { !$0.isWhitespace }) }
                    .filter { !$0.isEmpty }
                guard !attach.accept.isEmpty else { throw WatchUsageError(description: "--accept needs types") }
            case "--max-size": attach.maxSize = try size(argument)
            case "--keep": attach.keep = try size(argument)
            case "--into": attach.into = try value(argument)
            case "--silence": attach.silence = try seconds(argument)
            case "--max-backoff": attach.maxBackoff = try seconds(argument)
            case "--count":
                let text = try value(argument)
                guard let count = Int(text), count > 0 else {
                    throw WatchUsageError(description: "--count takes a positive number, not '\(text)'")
                }
                attach.count = count
            case "--to": send.to = try value(argument)
            case "--text": send.texts.append(try value(argument))
            case "--url":
                let link = try value(argument)
                guard let scheme = link.split(separator: ":", maxSplits: 1).first, link.contains(":" as Character),
                    scheme.allSatisfy({ $0.isLetter || $0.isNumber || "+-.".contains($0) })
                else { throw WatchUsageError(description: "'\(link)' is not an absolute URL") }
                send.urls.append(link)
            case "--profile": send.profiles.append(try value(argument))
            default:
                throw WatchUsageError(
                    description: "unknown argument '\(argument)' (see: share watch --help)")
            }
            index += 1
        }
        guard !attach.agent.isEmpty else {
            throw WatchUsageError(
                description: "give the agent to attach to with --agent PEER (a trusted name or HOST:PORT)")
        }
        if isSend {
            guard !send.to.isEmpty else { throw WatchUsageError(description: "send needs --to PEER") }
            guard !(send.texts.isEmpty && send.urls.isEmpty && send.profiles.isEmpty) else {
                throw WatchUsageError(description: "nothing to send: give --text, --url or --profile")
            }
            return .send(send)
        }
        if attach.keep < attach.maxSize {
            throw WatchUsageError(description: "--keep must be at least --max-size, or no item would fit")
        }
        return .attach(attach)
    }

    /// `256K`, `4M`, `1G` or plain bytes.
    static func parseSize(_ text: String) -> UInt64? {
        let units: [Character: UInt64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
        guard let last = text.uppercased().last else { return nil }
        if let unit = units[last] { return UInt64(text.dropLast()).map { $0 * unit } }
        return UInt64(text)
    }
}

extension WatchOptions {
    /// The accept list sent to the agent: every type with the size limit.
    public func acceptList() throws(WatchUsageError) -> AcceptList {
        var entries: [AcceptedType] = []
        for name in accept {
            guard let type = UTType(name) ?? UTType(filenameExtension: name) else {
                throw WatchUsageError(description: "'\(name)' is neither a known type identifier nor a file extension")
            }
            entries.append(AcceptedType(type, maxSize: maxSize))
        }
        return AcceptList(entries)
    }
}
