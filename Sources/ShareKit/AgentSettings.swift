import Foundation

/// The agent's port, kept across restarts: the one `agent.json` names, else one chosen once and written there, so a
/// device that paired with this one (which learned the port) still reaches its agent after it restarts.
public enum AgentPort {
    /// The port in `agent.json`, or one chosen now (free on this machine) and saved there.
    public static func resolve(_ paths: DevicePaths) throws -> Int {
        let file = paths.agentConfigFile
        var object: [String: Any] = [:]
        if let data = PosixFiles.read(file.path) {
            guard let parsed = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
                throw ShareFailure(.configuration, "\(file.path) is not a JSON object; fix or remove it")
            }
            object = parsed
            if let port = object["port"] as? Int, (1...65535).contains(port) { return port }
        }
        let port = try freePort()
        object["port"] = port
        let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
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
