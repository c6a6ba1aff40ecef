import FoundationEssentials
import ShareTLS

/// This device: its name, its TLS identity and its directories.
public struct LocalDevice: Sendable {
    public let name: String
    public let identity: TLSIdentity
    public let paths: DevicePaths

    public var id: DeviceID { identity.deviceID }

    /// A device that exists for one exchange only (a send or receive by code): a new identity in memory, nothing
    /// read from or written to `paths`.
    public static func oneOff(name: String, paths: DevicePaths) throws -> LocalDevice {
        LocalDevice(name: name, identity: try TLSIdentity.generate(commonName: "share one-off"), paths: paths)
    }

    /// The same device speaking with another identity (the old key of a rotation, vouching for the new one).
    public func speaking(as identity: TLSIdentity) -> LocalDevice {
        LocalDevice(name: name, identity: identity, paths: paths)
    }

    /// Where the previous identity waits after `share id --rotate`, until the owner's devices have its notice.
    public var rotatedFolder: URL { paths.state.appendingPathComponent("rotated", isDirectory: true) }

    /// The identity this device had before its last rotation, while it still has to vouch for the new one.
    public var previousIdentity: TLSIdentity? {
        guard let keyPEM = PosixFiles.read(rotatedFolder.appendingPathComponent("key.pem").path, limit: 1 << 20),
            let certificatePEM = PosixFiles.read(rotatedFolder.appendingPathComponent("cert.pem").path, limit: 1 << 20),
            let key = try? PrivateKey(pem: String(decoding: keyPEM, as: UTF8.self)),
            let certificate = try? Certificate(pem: String(decoding: certificatePEM, as: UTF8.self))
        else { return nil }
        return try? TLSIdentity(key: key, certificate: certificate)
    }

    /// Makes a new key and certificate for this device and keeps the old ones (for the notice that vouches for the
    /// new ID); returns the old identity and the new.
    public func rotate() throws -> (old: TLSIdentity, new: TLSIdentity) {
        let new = try TLSIdentity.generate(commonName: "share")
        do {
            try DevicePaths.ensurePrivateDirectory(rotatedFolder)
            try AtomicFile.write(
                Data(try identity.key.pemRepresentation().utf8), to: rotatedFolder.appendingPathComponent("key.pem"),
                mode: 0o600)
            try AtomicFile.write(
                Data(try identity.certificate.pemRepresentation().utf8),
                to: rotatedFolder.appendingPathComponent("cert.pem"), mode: 0o600)
            try AtomicFile.write(Data(try new.key.pemRepresentation().utf8), to: paths.keyFile, mode: 0o600)
            try AtomicFile.write(Data(try new.certificate.pemRepresentation().utf8), to: paths.certificateFile)
        } catch {
            throw ShareFailure(.cannotCreate, "cannot write the new identity in \(paths.config.path): \(error)")
        }
        return (identity, new)
    }

    private struct DeviceFile: Codable {
        var name: String
    }

    /// Loads this device's identity, creating key (mode 0600), certificate and name on first use. A half-present
    /// identity (key without certificate or the reverse, or a key that does not match) is an error, never silently
    /// replaced: the device ID would change and every peer would stop trusting it.
    public static func loadOrCreate(paths: DevicePaths, defaultName: String? = nil) throws -> LocalDevice {
        do {
            // The device's folders are its own: keys and trust, the catalog and its media, received state.
            try DevicePaths.ensurePrivateDirectory(paths.config)
            try DevicePaths.ensurePrivateDirectory(paths.data)
        } catch {
            throw ShareFailure(
                .configuration, "cannot create this device's folders under \(paths.config.path): \(error)"
            )
        }
        let hasKey = PosixFiles.exists(paths.keyFile.path)
        let hasCert = PosixFiles.exists(paths.certificateFile.path)
        let name = try loadName(paths) ?? defaultName ?? hostName()
        let identity: TLSIdentity
        switch (hasKey, hasCert) {
        case (false, false):
            do {
                identity = try TLSIdentity.generate(commonName: "share")
                try AtomicFile.write(Data(try identity.key.pemRepresentation().utf8), to: paths.keyFile, mode: 0o600)
                try AtomicFile.write(Data(try identity.certificate.pemRepresentation().utf8), to: paths.certificateFile)
            } catch {
                throw ShareFailure(
                    .configuration, "cannot create this device's identity in \(paths.config.path): \(error)")
            }
        case (true, true):
            do {
                guard let keyPEM = PosixFiles.read(paths.keyFile.path, limit: 1 << 20),
                    let certificatePEM = PosixFiles.read(paths.certificateFile.path, limit: 1 << 20)
                else { throw AtomicFile.posixError("cannot read key.pem or cert.pem") }
                let key = try PrivateKey(pem: String(decoding: keyPEM, as: UTF8.self))
                let cert = try Certificate(pem: String(decoding: certificatePEM, as: UTF8.self))
                identity = try TLSIdentity(key: key, certificate: cert)
            } catch {
                throw ShareFailure(
                    .configuration,
                    "this device's identity in \(paths.config.path) is damaged (\(error)); restore key.pem and cert.pem from a backup, or move both away to create a new identity (peers must then trust it again)"
                )
            }
        default:
            let missing = hasKey ? "cert.pem" : "key.pem"
            throw ShareFailure(
                .configuration,
                "\(missing) is missing from \(paths.config.path); restore it, or move the other file away to create a new identity"
            )
        }
        if !PosixFiles.exists(paths.deviceFile.path) {
            try saveName(name, paths)
        }
        return LocalDevice(name: name, identity: identity, paths: paths)
    }

    public static func loadName(_ paths: DevicePaths) throws -> String? {
        guard let data = PosixFiles.read(paths.deviceFile.path, limit: 1 << 20) else { return nil }
        guard let file = try? JSONDecoder().decode(DeviceFile.self, from: data), !file.name.isEmpty else {
            throw ShareFailure(.dataError, "\(paths.deviceFile.path) is not valid; it should hold {\"name\": \"…\"}")
        }
        return file.name
    }

    /// Renames this device.
    public static func saveName(_ name: String, _ paths: DevicePaths) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try AtomicFile.write(try encoder.encode(DeviceFile(name: name)), to: paths.deviceFile, mode: 0o644)
    }

    public static func hostName() -> String {
        let host = ProcessInfo.processInfo.hostName
        let short = host.split(separator: ".").first.map(String.init) ?? host
        return short.isEmpty ? "share-device" : short
    }
}
