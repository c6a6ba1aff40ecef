import CoreTransferable
import Foundation
import ProfileModel
import ShareKit
import UniformTypeIdentifiers

// profile-app send --to DEVICE --name NAME [--bio TEXT] [--fact TEXT]… [--video FILE] [--queue] [--config DIR]
// profile-app receive [--as profile|text|video] [--port N] [--agent] [--count N] [--into DIR] [--config DIR]

let usage = """
    usage: profile-app send --to DEVICE --name NAME [--bio TEXT] [--fact TEXT]... [--video FILE] [--queue] [--config DIR]
           profile-app receive [--as profile|text|video] [--port N] [--agent] [--count N] [--into DIR] [--config DIR]
    """

/// The arguments after the command: `--flag` alone, or `--option value` (repeatable).
struct Arguments {
    var values: [String: [String]] = [:]
    var flags: Set<String> = []

    init(_ arguments: ArraySlice<String>, flags known: Set<String>) throws {
        var rest = arguments[...]
        while let word = rest.popFirst() {
            guard word.hasPrefix("--") else { throw Failure("unexpected argument '\(word)'") }
            let name = String(word.dropFirst(2))
            if known.contains(name) {
                flags.insert(name)
            } else if let value = rest.popFirst() {
                values[name, default: []].append(value)
            } else {
                throw Failure("--\(name) needs a value")
            }
        }
    }

    func one(_ name: String) -> String? { values[name]?.last }
}

struct Failure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// One line on standard output, written at once (another process may be waiting for it).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func send(_ arguments: Arguments, client: ShareClient) async throws {
    guard let peer = arguments.one("to"), let name = arguments.one("name") else {
        throw Failure("send needs --to and --name")
    }
    var profile = Profile(name: name, bio: arguments.one("bio") ?? "")
    profile.addFunFacts(arguments.values["fact"] ?? [])
    var options = ShareClient.SendOptions()
    options.queue = arguments.flags.contains("queue")
    var items = [ShareItem(profile, preview: SharePreview(name))]
    if let video = arguments.one("video") {
        let file = URL(fileURLWithPath: video)
        items.append(ShareItem(Video(file: file), preview: SharePreview("\(name)'s video")))
    }
    let delivery = try await client.send(items, to: peer, options: options)
    if let job = delivery.job {
        say("queued \(name) for \(peer) with the agent (job \(job))")
        return
    }
    for item in delivery.delivered { say("delivered \(item.label): \(item.outcome)") }
    for item in delivery.refused { say("refused \(item.label): \(item.reason)") }
    if delivery.delivered.isEmpty { throw Failure("\(peer) took nothing") }
}

func receive(_ arguments: Arguments, client: ShareClient) async throws {
    let wanted = arguments.one("as") ?? "profile"
    let types: [any Transferable.Type]
    switch wanted {
    case "profile": types = [Profile.self, String.self]
    case "text": types = [String.self]
    case "video": types = [Video.self]
    default: throw Failure("--as takes profile, text or video")
    }
    var options = ShareClient.ReceiveOptions()
    options.name = "profile-app"
    if arguments.flags.contains("agent") {
        options.mode = .agent
    } else {
        options.mode = .listen(host: "127.0.0.1", port: Int(arguments.one("port") ?? "0") ?? 0)
    }
    // A received video is moved into the current folder.
    if let into = arguments.one("into"), !FileManager.default.changeCurrentDirectoryPath(into) {
        throw Failure("cannot use \(into) as the folder for received videos")
    }
    options.refused = { item in say("refused \(item.label) from \(item.from): \(item.reason)") }
    let count = Int(arguments.one("count") ?? "1") ?? 1
    let incoming = try client.receive(accepting: types, options: options)
    switch incoming.source {
    case .agent: say("receiving through the agent")
    case .listening(let port): say("listening on port \(port)")
    }
    var received = 0
    for try await item in incoming {
        let what = "\(item.preview.title) from \(item.from) as \(item.contentType.identifier)"
        if item.canLoad(Profile.self) {
            let profile = try await item.load(Profile.self)
            say("profile \(profile.name): \(profile.bio) [\(profile.funFacts.joined(separator: "; "))] — \(what)")
        } else if item.canLoad(Video.self) {
            let video = try await item.load(Video.self)
            let size = (try? FileManager.default.attributesOfItem(atPath: video.file.path)[.size] as? Int) ?? 0
            say("video \(video.file.lastPathComponent) (\(size) bytes) — \(what)")
        } else {
            say("text \(try await item.load(String.self)) — \(what)")
        }
        received += 1
        if received == count { break }
    }
}

let all = CommandLine.arguments.dropFirst()
do {
    guard let command = all.first else { throw Failure(usage) }
    let arguments = try Arguments(all.dropFirst(), flags: ["queue", "agent"])
    let client = try ShareClient(configDirectory: arguments.one("config"))
    switch command {
    case "send": try await send(arguments, client: client)
    case "receive": try await receive(arguments, client: client)
    default: throw Failure(usage)
    }
} catch {
    FileHandle.standardError.write(Data("profile-app: \(error)\n".utf8))
    exit(1)
}
