import FoundationEssentials
import ShareText
import Glibc

/// Where and how a code exchange runs.
public struct WormholeOptions: Sendable {
    /// The mailbox server the `wormhole` command uses by default.
    public static let publicServer = "ws://relay.magic-wormhole.io:4000/v1"
    /// The application id of `wormhole send` / `wormhole receive` (texts, files and folders).
    public static let transferAppID = "lothar.com/wormhole/text-or-file-xfer"

    public var server = publicServer
    public var appID = transferAppID
    /// Words after the nameplate in a code this side makes.
    public var words = 2
    /// How long a code waits for the other side (then it expires: nothing more can use it).
    public var lifetime: Double = 600

    public init() {}
}

/// One magic-wormhole exchange through a mailbox: a code (made here or typed), SPAKE2 and the version exchange that
/// proves both sides know it, then numbered encrypted messages each way. A wrong code is found at the version
/// exchange: both sides stop, and the mailbox is closed as "scary" (the nameplate is burnt).
public final class WormholeSession {
    public let code: WormholeCode
    public let options: WormholeOptions
    private let mailbox: Mailbox
    private let deadline: Date
    private var key: [UInt8]?
    private var theirSide: String?
    private var sent = 0
    private var received = 0
    private var mailboxID: String?
    private var nameplateReleased = false
    /// What the other side said of itself in the version exchange (`app_versions`).
    public private(set) var theirVersions: [String: Any] = [:]

    /// Makes a new code: asks the server for a nameplate and claims it.
    public static func allocate(options: WormholeOptions) throws(WormholeError) -> WormholeSession {
        let mailbox = try Mailbox(
            url: options.server, appID: options.appID, side: newSide(), timeout: min(30, options.lifetime))
        let deadline = Date().addingTimeInterval(options.lifetime)
        try mailbox.request(["type": "allocate"])
        guard let nameplate = try mailbox.expect("allocated", deadline: deadline)["nameplate"] as? String else {
            throw WormholeError(.server, "the mailbox server allocated no nameplate")
        }
        let code = WormholeCode.random(nameplate: nameplate, count: options.words)
        return try WormholeSession(code: code, options: options, mailbox: mailbox, deadline: deadline)
    }

    /// Joins the exchange of a code the other side made.
    public static func join(_ code: WormholeCode, options: WormholeOptions) throws(WormholeError) -> WormholeSession {
        let mailbox = try Mailbox(
            url: options.server, appID: options.appID, side: newSide(), timeout: min(30, options.lifetime))
        return try WormholeSession(
            code: code, options: options, mailbox: mailbox, deadline: Date().addingTimeInterval(options.lifetime))
    }

    private init(code: WormholeCode, options: WormholeOptions, mailbox: Mailbox, deadline: Date)
        throws(WormholeError)
    {
        self.code = code
        self.options = options
        self.mailbox = mailbox
        self.deadline = deadline
        try mailbox.request(["type": "claim", "nameplate": code.nameplate])
        guard let id = try mailbox.expect("claimed", deadline: deadline)["mailbox"] as? String else {
            throw WormholeError(.server, "the mailbox server gave no mailbox for nameplate \(code.nameplate)")
        }
        mailboxID = id
        try mailbox.request(["type": "open", "mailbox": id])
    }

    /// SPAKE2 and the version exchange; returns once both sides have shown they hold the same key. `versions` is
    /// what this side says of itself (`app_versions`).
    public func establish(versions: [String: Any] = [:]) throws(WormholeError) {
        let pake = SPAKE2Symmetric(password: code.password, identity: Array(options.appID.utf8))
        try add(phase: "pake", body: try json(["pake_v1": Hex.string(pake.message)]))
        let theirs = try mailbox.next(deadline: deadline)
        guard theirs.phase == "pake", let payload = try? object(theirs.body),
            let message = (payload["pake_v1"] as? String).flatMap(Hex.parse)
        else {
            throw WormholeError(.badPAKE, "the other side's first message is not a key exchange")
        }
        let key = try pake.finish(message)
        self.key = key
        try releaseNameplate()
        try add(
            phase: "version",
            body: WormholeKeys.encrypt(
                try json(["app_versions": versions]), key: WormholeKeys.phase(key, side: mailbox.side, phase: "version")
            ))
        let version = try mailbox.next(deadline: deadline)
        guard version.phase == "version" else {
            throw WormholeError(.badMessage, "the other side skipped the version exchange")
        }
        // The side that sent it is only known from the relayed message; the phase key binds it.
        guard let side = try theirSideOf(version) else {
            close(mood: "scary")
            throw WormholeError(
                .wrongCode, "the code was wrong: the other side typed a different one (or someone guessed and failed)")
        }
        theirSide = side.side
        theirVersions = (try? object(side.plaintext))?["app_versions"] as? [String: Any] ?? [:]
    }

    /// Sends the next numbered message.
    public func send(_ message: [String: Any]) throws(WormholeError) {
        guard let key else { preconditionFailure("establish() first") }
        let phase = String(sent)
        sent += 1
        try add(
            phase: phase,
            body: WormholeKeys.encrypt(
                try json(message), key: WormholeKeys.phase(key, side: mailbox.side, phase: phase)))
    }

    /// The other side's next numbered message; its `error` field is thrown as a refusal.
    public func receive() throws(WormholeError) -> [String: Any] {
        guard let key, let theirSide else { preconditionFailure("establish() first") }
        let message = try mailbox.next(deadline: deadline)
        guard message.phase == String(received) else {
            throw WormholeError(.badMessage, "the other side's messages arrived out of order (\(message.phase))")
        }
        received += 1
        let plaintext = try WormholeKeys.decrypt(
            message.body, key: WormholeKeys.phase(key, side: theirSide, phase: message.phase))
        guard let decoded = try? object(plaintext) else {
            throw WormholeError(.badMessage, "the other side sent a message that is not a JSON object")
        }
        if let error = decoded["error"] as? String { throw WormholeError(.refused, "the other side: \(error)") }
        return decoded
    }

    /// A key for `purpose` derived from the exchange's key (the transit key, share's session).
    public func derivedKey(purpose: String, count: Int = 32) -> [UInt8] {
        guard let key else { preconditionFailure("establish() first") }
        return WormholeKeys.derive(key, purpose: Array(purpose.utf8), count: count)
    }

    /// Closes the mailbox: "happy" after a transfer, "scary" after a wrong code, "errory" after a failure.
    public func close(mood: String) {
        try? releaseNameplate()
        if let id = mailboxID {
            try? mailbox.request(["type": "close", "mailbox": id, "mood": mood])
            _ = try? mailbox.expect("closed", deadline: Date().addingTimeInterval(5))
            mailboxID = nil
        }
        mailbox.close()
    }

    private func releaseNameplate() throws(WormholeError) {
        guard !nameplateReleased else { return }
        nameplateReleased = true
        try mailbox.request(["type": "release", "nameplate": code.nameplate])
    }

    private func theirSideOf(_ message: Mailbox.Message) throws(WormholeError) -> (side: String, plaintext: [UInt8])? {
        guard let key, let side = mailbox.lastSide else { return nil }
        guard let plaintext = Sodium.open(message.body, key: WormholeKeys.phase(key, side: side, phase: "version"))
        else { return nil }
        return (side, plaintext)
    }

    private func add(phase: String, body: [UInt8]) throws(WormholeError) {
        try mailbox.request(["type": "add", "phase": phase, "body": Hex.string(body)])
    }

    private func json(_ value: [String: Any]) throws(WormholeError) -> [UInt8] {
        guard let data = try? JSONText.bytes(value, sortedKeys: true) else {
            throw WormholeError(.badMessage, "cannot encode a message")
        }
        return data
    }

    private func object(_ bytes: [UInt8]) throws -> [String: Any] {
        guard let value = try JSONText.value(bytes) as? [String: Any] else {
            throw WormholeError(.badMessage, "not a JSON object")
        }
        return value
    }

    private static func newSide() -> String { Hex.string(Sodium.randomBytes(5)) }
}
