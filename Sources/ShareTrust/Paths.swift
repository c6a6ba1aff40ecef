import ShareDisk
import FoundationEssentials
import Glibc

/// Where a device keeps its files. Several devices can share one machine through `--config` or
/// `SHARE_CONFIG_DIR` (tests and the demo do).
public struct DevicePaths: Sendable {
    /// Keys, certificate, device name, trust store, config. Mode 0700.
    public let config: URL
    /// Profiles and received data by default.
    public let data: URL
    /// Agent state (queues, partials, sockets).
    public let state: URL

    public init(config: URL, data: URL, state: URL) {
        self.config = config
        self.data = data
        self.state = state
    }

    /// Resolves directories: an explicit `--config` or `SHARE_CONFIG_DIR` puts everything under that folder (data and
    /// state in subfolders) so each test device is self-contained; otherwise the XDG directories.
    public static func resolve(
        configOverride: String?, environment: [String: String] = ProcessInfo.processInfo.environment
    )
        -> DevicePaths
    {
        if let explicit = configOverride ?? environment["SHARE_CONFIG_DIR"], !explicit.isEmpty {
            let root = URL(fileURLWithPath: explicit, isDirectory: true).standardizedFileURL
            return DevicePaths(
                config: root, data: root.appendingPathComponent("data", isDirectory: true),
                state: root.appendingPathComponent("state", isDirectory: true))
        }
        let home =
            environment["HOME"].map { URL(fileURLWithPath: $0, isDirectory: true) }
            ?? FileManager.default.homeDirectoryForCurrentUser
        func xdg(_ key: String, _ fallback: String) -> URL {
            if let value = environment[key], value.hasPrefix("/") {
                return URL(fileURLWithPath: value, isDirectory: true).appendingPathComponent("share", isDirectory: true)
            }
            return home.appendingPathComponent(fallback, isDirectory: true).appendingPathComponent(
                "share", isDirectory: true)
        }
        return DevicePaths(
            config: xdg("XDG_CONFIG_HOME", ".config"), data: xdg("XDG_DATA_HOME", ".local/share"),
            state: xdg("XDG_STATE_HOME", ".local/state"))
    }

    public var keyFile: URL { config.appendingPathComponent("key.pem") }
    public var certificateFile: URL { config.appendingPathComponent("cert.pem") }
    public var deviceFile: URL { config.appendingPathComponent("device.json") }
    public var trustFile: URL { config.appendingPathComponent("trust.json") }
    public var profilesFile: URL { data.appendingPathComponent("profiles.json") }
    /// The agent's settings.
    public var agentConfigFile: URL { config.appendingPathComponent("agent.json") }
    /// The agent's default inbox.
    public var inbox: URL { data.appendingPathComponent("inbox", isDirectory: true) }
    /// What the receiver remembers of the files it delivered (for later versions to arrive as deltas).
    public var versions: URL { state.appendingPathComponent("versions", isDirectory: true) }

    /// Creates `url` (and parents) with mode 0700 if missing, and tightens an existing one to 0700 (through a handle
    /// of the folder itself).
    public static func ensurePrivateDirectory(_ url: URL) throws {
        do {
            try Directory.open(url.path, create: true, mode: 0o700).setMode(0o700)
        } catch let error as DiskError {
            throw AtomicFile.FileError(description: error.message)
        }
    }
}
