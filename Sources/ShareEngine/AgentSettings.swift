import FoundationEssentials
import ShareText
import ShareReach
import ShareNet
import ShareTrust
import ShareProtocol
import CoreTransferable
import UniformTypeIdentifiers

/// `CONFIG/agent.json` as a JSON object, read without writing anything (nil when it is missing or not an object).
package enum AgentConfigObject {
    package static func read(_ paths: DevicePaths) -> [String: Any]? {
        PosixFiles.read(paths.agentConfigFile.path).flatMap {
            JSONText.object($0)
        }
    }
}

/// The agent's port, kept across restarts: the one `agent.json` names, else one chosen once and written there, so a
/// device that paired with this one (which learned the port) still reaches its agent after it restarts.
package enum AgentPort {
    /// Where this device's agent can be reached: the port the running agent listens on (asked over its control
    /// socket, so an agent started with `--port 0` is found), else the saved one (`resolve`).
    package static func current(_ paths: DevicePaths) throws -> Int {
        if ControlClient.agentIsRunning(paths), let port = try? ControlClient.request(.status, paths: paths).port,
            (1...65535).contains(port)
        {
            return port
        }
        return try resolve(paths)
    }

    /// The port in `agent.json`, if one was chosen (the port other devices learned at pairing); nothing is written.
    package static func saved(_ paths: DevicePaths) -> Int? {
        guard let port = AgentConfigObject.read(paths)?["port"] as? Int, (1...65535).contains(port) else { return nil }
        return port
    }

    /// The port in `agent.json`, or one chosen now (free on this machine) and saved there.
    package static func resolve(_ paths: DevicePaths) throws -> Int {
        let file = paths.agentConfigFile
        var object: [String: Any] = [:]
        if let data = PosixFiles.read(file.path) {
            guard let parsed = JSONText.object(data) else {
                throw ShareFailure(.configuration, "\(file.path) is not a JSON object; fix or remove it")
            }
            object = parsed
            if let port = object["port"] as? Int, (1...65535).contains(port) { return port }
        }
        let port = try freePort()
        object["port"] = port
        let data = try Data(JSONText.bytes(object, sortedKeys: true, pretty: true))
        do {
            try DevicePaths.ensurePrivateDirectory(paths.config)
            try AtomicFile.write(data, to: file, mode: 0o600, durable: true)
        } catch {
            throw ShareFailure(.cannotCreate, "cannot save the agent's port in \(file.path): \(error)")
        }
        return port
    }

    /// A port nothing listens on now, from the range the system hands out.
    static func freePort() throws -> Int {
        do {
            let (fd, port) = try Syscalls.listen(host: "::", port: 0)
            Syscalls.close(fd)
            return port
        } catch let error as Syscalls.SocketError {
            throw ShareFailure(.unavailable, "cannot find a free port for the agent: \(error.message)")
        }
    }
}

extension ReachSettings {
    /// The servers `CONFIG/agent.json` names (`discoveryServers`, `relays`): none when the file or the keys are
    /// absent, which keeps everything on the LAN. Used by the agent and by every command that connects.
    package static func load(_ paths: DevicePaths) throws -> ReachSettings { try load(file: paths.agentConfigFile) }

    /// The servers a settings file names.
    package static func load(file: URL) throws -> ReachSettings {
        guard let data = PosixFiles.read(file.path) else { return ReachSettings() }
        guard let object = JSONText.object(data) else {
            throw ShareFailure(.configuration, "\(file.path) is not a JSON object; fix or remove it")
        }
        return ReachSettings(
            discoveryServers: try servers(object, key: "discoveryServers", kind: .discovery, file: file),
            relays: try servers(object, key: "relays", kind: .relay, file: file))
    }

    static func servers(_ object: [String: Any], key: String, kind: ServerURL.Kind, file: URL) throws -> [ServerURL] {
        guard let value = object[key] else { return [] }
        guard let list = value as? [String] else {
            throw ShareFailure(.configuration, "\(file.path): '\(key)' must be a list of strings (URLs)")
        }
        return try list.map { text in
            let server: ServerURL
            do {
                server = try ServerURL(parsing: text)
            } catch {
                throw ShareFailure(.configuration, "\(file.path): \(key): \(error)")
            }
            guard server.kind == kind else {
                throw ShareFailure(
                    .configuration,
                    "\(file.path): \(key): '\(text)' is a \(server.kind == .relay ? "relay" : "discovery server"); list it under \(server.kind == .relay ? "relays" : "discoveryServers")"
                )
            }
            return server
        }
    }
}

/// `share servers add/remove`: edits the server lists in `agent.json`, keeping every other setting.
package enum ServerList {
    /// Adds `server` to its list; false when it was there already.
    @discardableResult
    package static func add(_ server: ServerURL, paths: DevicePaths) throws -> Bool {
        try edit(paths) { object in
            let key = server.kind == .relay ? "relays" : "discoveryServers"
            var list = object[key] as? [String] ?? []
            if list.contains(where: { (try? ServerURL(parsing: $0)) == server }) { return false }
            list.append(server.canonical)
            object[key] = list
            return true
        }
    }

    /// Removes the server `reference` names (its URL, or its host or HOST:PORT); the removed URLs.
    package static func remove(_ reference: String, paths: DevicePaths) throws -> [String] {
        try edit(paths) { object in
            var removed: [String] = []
            for key in ["discoveryServers", "relays"] {
                guard let list = object[key] as? [String] else { continue }
                let kept = list.filter { text in
                    guard let server = try? ServerURL(parsing: text) else { return text != reference }
                    let named =
                        text == reference || server.canonical == reference || server.host == reference
                        || server.address.description == reference
                        || (try? ServerURL(parsing: reference)) == server
                    if named { removed.append(text) }
                    return !named
                }
                object[key] = kept.isEmpty ? nil : kept
            }
            return removed
        }
    }

    private static func edit<T>(_ paths: DevicePaths, _ change: (inout [String: Any]) throws -> T) throws -> T {
        let file = paths.agentConfigFile
        var object: [String: Any] = [:]
        if let data = PosixFiles.read(file.path) {
            guard let parsed = JSONText.object(data) else {
                throw ShareFailure(.configuration, "\(file.path) is not a JSON object; fix or remove it")
            }
            object = parsed
        }
        let result = try change(&object)
        let data = try Data(JSONText.bytes(object, sortedKeys: true, pretty: true))
        do {
            try DevicePaths.ensurePrivateDirectory(paths.config)
            try AtomicFile.write(data, to: file, mode: 0o600, durable: true)
        } catch {
            throw ShareFailure(.cannotCreate, "cannot save \(file.path): \(error)")
        }
        return result
    }
}
