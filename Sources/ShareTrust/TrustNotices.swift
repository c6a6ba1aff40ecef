import FoundationEssentials
import ShareDisk
import ShareTLS

/// A signed statement about trust, carried between the owner's devices and kept until each has it: a revocation
/// ("stop trusting this device", signed by one of the owner's devices) or a key rotation ("this device's new
/// certificate is this one", signed by the device's old key).
public struct TrustNotice: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable { case revoke, rotate }

    public var kind: Kind
    /// The revoked device, or the rotating device's old ID.
    public var subject: DeviceID
    /// For a rotation: the new certificate (DER, base 64).
    public var replacement: String?
    /// The signer's certificate (DER, base 64): for a rotation, the subject's own.
    public var issuerCertificate: String
    public var issued: Date
    /// Ed25519 over `signedBytes`, base 64.
    public var signature: String

    /// What is signed: every field but the signature, in a fixed order.
    var signedBytes: [UInt8] {
        let fields = [
            "share-trust-notice-v1", kind.rawValue, subject.description, replacement ?? "", issuerCertificate,
            String(Int64(issued.timeIntervalSince1970)),
        ]
        return Array(fields.joined(separator: "\n").utf8)
    }

    /// A notice signed by `identity`.
    public static func make(_ kind: Kind, subject: DeviceID, replacement: Certificate? = nil, by identity: TLSIdentity)
        throws -> TrustNotice
    {
        var notice = TrustNotice(
            kind: kind, subject: subject,
            replacement: try replacement.map { Data(try $0.derBytes()).base64EncodedString() },
            issuerCertificate: Data(try identity.certificate.derBytes()).base64EncodedString(),
            issued: Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down)), signature: "")
        notice.signature = Data(try identity.key.sign(notice.signedBytes)).base64EncodedString()
        return notice
    }

    /// The signer, once the signature has been checked.
    public func verifiedIssuer() throws -> DeviceID {
        guard let der = Data(base64Encoded: issuerCertificate).map(Array.init),
            let certificate = try? Certificate(der: der), let signatureBytes = Data(base64Encoded: signature)
        else { throw ShareFailure(.dataError, "a trust notice is malformed") }
        guard certificate.verifies(Array(signatureBytes), of: signedBytes) else {
            throw ShareFailure(.dataError, "a trust notice's signature does not verify")
        }
        let issuer = DeviceID(certificateDER: der)
        if kind == .rotate {
            guard issuer == subject else {
                throw ShareFailure(.dataError, "a key rotation is not signed by the rotating device's old key")
            }
            guard let replacementCertificate else {
                throw ShareFailure(.dataError, "a key rotation names no new certificate")
            }
            do {
                try replacementCertificate.checkAsShareDevice()
            } catch {
                throw ShareFailure(.dataError, "a key rotation's new certificate is not a share device's: \(error)")
            }
        }
        return issuer
    }

    /// The new certificate of a rotation.
    public var replacementCertificate: Certificate? {
        replacement.flatMap { Data(base64Encoded: $0) }.flatMap { try? Certificate(der: Array($0)) }
    }

    /// The new device ID of a rotation.
    public var replacementID: DeviceID? {
        replacement.flatMap { Data(base64Encoded: $0) }.map { DeviceID(certificateDER: Array($0)) }
    }
}

/// What applying a notice did here.
public enum TrustNoticeEffect: Sendable, Equatable {
    case revoked(name: String)
    case rotated(name: String, to: DeviceID)
    /// A device of a group (not the owner's) rotated its key: it is dropped and must pair again.
    case mustPairAgain(name: String)
    /// Already applied, or about a device not trusted here.
    case nothing
}

extension TrustStore {
    /// Applies a notice whose signature checked out, as `AccessPolicy` allows: a revocation signed by one of the
    /// owner's devices removes the subject; a rotation signed by the subject's old key replaces an owner's device's
    /// ID (keeping its name, address and relation) and drops any other device, which must pair again.
    public mutating func apply(_ notice: TrustNotice, issuer: DeviceID) throws -> TrustNoticeEffect {
        guard let subject = device(notice.subject) else { return .nothing }
        // A device trusted again after the notice was issued (paired anew) is not undone by the old notice.
        guard subject.added <= notice.issued.addingTimeInterval(1) else { return .nothing }
        switch notice.kind {
        case .revoke:
            guard case .allowed = AccessPolicy.decide(.revokeDevices, peer: device(issuer)) else {
                throw ShareFailure(.refused, "a revocation signed by a device that is not one of the owner's")
            }
            _ = remove(subject.id.description)
            return .revoked(name: subject.name)
        case .rotate:
            guard let newID = notice.replacementID else { return .nothing }
            guard AccessPolicy.followsRotation(of: subject) else {
                _ = remove(subject.id.description)
                return .mustPairAgain(name: subject.name)
            }
            var replaced = subject
            replaced.id = newID
            _ = remove(subject.id.description)
            try add(replaced)
            return .rotated(name: subject.name, to: newID)
        }
    }
}

/// The notices this device holds (`STATE/notices.json`, 0600), and which devices have each: a device that was away
/// gets them when it is next reached.
public struct TrustNoticeBook: Codable, Sendable {
    public struct Entry: Codable, Sendable {
        public var notice: TrustNotice
        /// Device IDs known to hold the notice.
        public var deliveredTo: [String]
    }

    public var entries: [Entry] = []

    public static func file(_ paths: DevicePaths) -> URL { paths.state.appendingPathComponent("notices.json") }

    public static func load(_ paths: DevicePaths) -> TrustNoticeBook {
        LockedJSONFile.read(file(paths), or: TrustNoticeBook())
    }

    /// Loads the book, lets `change` modify it and saves it, under its lock (the CLI and the agent both write it).
    @discardableResult
    public static func update<T>(_ paths: DevicePaths, _ change: (inout TrustNoticeBook) throws -> T) throws -> T {
        try LockedJSONFile.update(file(paths), empty: TrustNoticeBook()) { book, _ in try change(&book) }
    }

    /// Adds a notice (once: the same signature is the same notice); true when it was new.
    @discardableResult
    public mutating func add(_ notice: TrustNotice, deliveredTo: [String] = []) -> Bool {
        guard !entries.contains(where: { $0.notice.signature == notice.signature }) else { return false }
        entries.append(Entry(notice: notice, deliveredTo: deliveredTo))
        return true
    }

    public mutating func markDelivered(_ signature: String, to id: DeviceID) {
        guard let index = entries.firstIndex(where: { $0.notice.signature == signature }) else { return }
        if !entries[index].deliveredTo.contains(id.description) { entries[index].deliveredTo.append(id.description) }
    }
}
