import FoundationEssentials
import Glibc
import ShareThreads
import ShareTrust
import ShareNet

/// A TCP address in a transit hint.
public struct TransitHint: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }
    public var description: String { host.includes(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// `tcp:HOST:PORT`, as the `wormhole` command's `--transit-helper` takes it (`HOST:PORT` also accepted).
    public init(parsing text: String) throws(WormholeError) {
        var rest = Substring(text)
        if rest.hasPrefix("tcp:") { rest = rest.dropFirst(4) }
        guard let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]),
            (1...65535).contains(port), colon > rest.startIndex
        else {
            throw WormholeError(.server, "'\(text)' is not a transit relay (give tcp:HOST:PORT)")
        }
        var host = String(rest[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        self.init(host: host, port: port)
    }
}

/// magic-wormhole's transit protocol (as `wormhole send`/`receive` speak it): both sides offer direct TCP hints
/// (their listening addresses) and relay hints; every hint is tried at once (relays a little later, so a direct
/// path wins when there is one); each connection proves knowledge of the transit key with a handshake line, the
/// sender picks the first to finish and says "go" on it ("nevermind" on the others). The winner then carries
/// records: a 4-byte length and a secret box whose nonce is a counter, one key per direction.
public final class Transit: Sendable {
    public enum Role: Sendable { case sender, receiver }

    public static var abilities: [[String: Any]] { [["type": "direct-tcp-v1"], ["type": "relay-v1"]] }
    /// How much later than the direct hints a relay is tried (the reference's RELAY_DELAY).
    public static let relayDelay = 2.0

    public let role: Role
    /// This side's id at the relay (8 random bytes in hex).
    let side = Hex.string(Sodium.randomBytes(8))
    private let relays: [TransitHint]
    private let listener: (fd: Int32, port: Int)?
    private let advertised: [String]

    private struct State {
        /// Whether the accept loop owns (and will close) the listening socket.
        var listening = false
        var theirDirect: [TransitHint] = []
        var theirRelays: [TransitHint] = []
        var winner: TransitConnection?
        var running = 0
        var finished = false
        var failures: [String] = []
    }
    private let state = Guarded(State())

    /// `listen`: accept direct connections, advertised under `addresses` (nil: every non-loopback address of this
    /// machine, or 127.0.0.1 when it has none).
    public init(role: Role, relays: [TransitHint], listen: Bool, addresses: [String]? = nil) {
        self.role = role
        self.relays = relays
        if listen, let socket = try? Syscalls.listen(host: "::", port: 0) {
            listener = socket
            advertised = addresses ?? Syscalls.interfaceAddresses()
        } else {
            listener = nil
            advertised = []
        }
    }

    deinit {
        if let listener, !state.withLock({ $0.listening }) { Syscalls.close(listener.fd) }
    }

    /// Our `hints-v1`: each listening address, then each relay.
    public var hints: [[String: Any]] {
        var hints: [[String: Any]] = []
        if let listener {
            for host in advertised {
                hints.append(["type": "direct-tcp-v1", "priority": 0.0, "hostname": host, "port": listener.port])
            }
        }
        for relay in relays {
            hints.append([
                "type": "relay-v1",
                "hints": [["type": "direct-tcp-v1", "priority": 0.0, "hostname": relay.host, "port": relay.port]],
            ])
        }
        return hints
    }

    /// The other side's `hints-v1` (unknown kinds, such as Tor's, are skipped; at most 32 of each kind are used).
    public func add(theirHints hints: [Any]) {
        func parse(_ any: Any) -> TransitHint? {
            guard let hint = any as? [String: Any], hint["type"] as? String == "direct-tcp-v1",
                let host = hint["hostname"] as? String, !host.isEmpty, host.utf8.count < 256,
                let port = hint["port"] as? Int, (1...65535).contains(port)
            else { return nil }
            return TransitHint(host: host, port: port)
        }
        var direct: [TransitHint] = []
        var relayed: [TransitHint] = []
        for case let hint as [String: Any] in hints {
            switch hint["type"] as? String {
            case "direct-tcp-v1":
                if let parsed = parse(hint) { direct.append(parsed) }
            case "relay-v1":
                for inner in hint["hints"] as? [Any] ?? [] {
                    if let parsed = parse(inner) { relayed.append(parsed) }
                }
            default:
                continue
            }
        }
        state.withLock { state in
            for hint in direct where state.theirDirect.count < 32 && !state.theirDirect.contains(hint) {
                state.theirDirect.append(hint)
            }
            for hint in relayed where state.theirRelays.count < 32 && !state.theirRelays.contains(hint) {
                state.theirRelays.append(hint)
            }
        }
    }

    /// Races every way to the other side and returns the connection both agreed on. `key` is the transit key
    /// (derived from the wormhole's key).
    public func connect(key: [UInt8], timeout: Double = 60) throws(WormholeError) -> TransitConnection {
        Syscalls.ignoreSIGPIPE()
        let expectations = Handshakes(key: key, role: role)
        let (theirDirect, theirRelays, listening) = state.withLock { state in
            state.running = 0
            defer { state.listening = listener != nil }
            return (state.theirDirect, state.theirRelays, !state.listening ? listener : nil)
        }
        var relaysToTry = relays
        for relay in theirRelays where !relaysToTry.contains(relay) { relaysToTry.append(relay) }
        let deadline = Date().addingTimeInterval(timeout)
        if let listening {
            start { self.acceptLoop(listening.fd, port: listening.port, expectations, deadline: deadline) }
        }
        for hint in theirDirect {
            start { self.attempt(hint, relay: false, expectations, delay: 0, deadline: deadline) }
        }
        let delay = theirDirect.isEmpty && listener == nil ? 0 : Self.relayDelay
        for hint in relaysToTry {
            start { self.attempt(hint, relay: true, expectations, delay: delay, deadline: deadline) }
        }
        // The accept loop closes the listening socket as it ends (closing it here could let its number be reused
        // by another socket while the loop still polls it).
        let (winner, running, failures) = state.withLock(
            when: { $0.winner != nil || $0.running == 0 }, seconds: max(0, deadline.timeIntervalSinceNow)
        ) { state, _ in
            state.finished = true
            return (state.winner, state.running, state.failures)
        }
        if let winner { return winner }
        if running > 0 {
            throw WormholeError(.transit, "no connection to the other side within \(Int(timeout)) s")
        }
        let detail = failures.isEmpty ? "no address to try" : failures.prefix(3).joined(separator: "; ")
        throw WormholeError(.transit, "cannot connect to the other side (\(detail))")
    }

    private func start(_ body: @escaping @Sendable () -> Void) {
        state.withLock { $0.running += 1 }
        Threads.start(name: "share-transit", stackSize: 256 << 10) {
            body()
            self.state.withLock { $0.running -= 1 }
        }
    }

    private var isFinished: Bool { state.withLock { $0.finished || $0.winner != nil } }

    private func acceptLoop(_ listener: Int32, port: Int, _ expectations: Handshakes, deadline: Date) {
        let acceptor = Acceptor(
            listening: listener, port: port, name: "transit",
            limits: .serial)
        defer { acceptor.close() }
        while !isFinished, Date() < deadline {
            guard let accepted = try? acceptor.next(timeout: 0.2) else { continue }
            start {
                self.negotiate(
                    accepted.fd, description: "direct from \(accepted.peer)", expectations, deadline: deadline)
            }
        }
    }

    private func attempt(_ hint: TransitHint, relay: Bool, _ expectations: Handshakes, delay: Double, deadline: Date) {
        if delay > 0 {
            state.wait(seconds: delay) { $0.winner != nil || $0.finished }
        }
        guard !isFinished else { return }
        let fd: Int32
        do {
            fd = try Syscalls.connect(
                host: hint.host, port: hint.port, timeout: min(10, max(1, deadline.timeIntervalSinceNow)))
        } catch {
            fail("\(hint): \(error)")
            return
        }
        if relay {
            Syscalls.setTimeouts(fd, seconds: 30)
            do {
                try Syscalls.writeAll(fd, Array("please relay \(expectations.relayToken) for side \(side)\n".utf8))
                guard try Syscalls.readExactly(fd, 3) == Array("ok\n".utf8) else {
                    throw WormholeError(.transit, "not a transit relay")
                }
            } catch {
                Syscalls.close(fd)
                fail("relay \(hint): \(error)")
                return
            }
        }
        negotiate(fd, description: relay ? "via relay \(hint)" : "direct to \(hint)", expectations, deadline: deadline)
    }

    /// The key handshake on one connection, then the sender's decision.
    private func negotiate(_ fd: Int32, description: String, _ expectations: Handshakes, deadline: Date) {
        Syscalls.setTimeouts(fd, seconds: max(1, min(30, deadline.timeIntervalSinceNow)))
        do {
            try Syscalls.writeAll(fd, expectations.ours)
            guard try Syscalls.readExactly(fd, expectations.theirs.count) == expectations.theirs else {
                throw WormholeError(.transit, "the handshake does not match the transit key")
            }
            switch role {
            case .sender:
                // The decision is made under the lock, and "go" is on the wire before the winner is handed to
                // the caller (whose first record must follow it).
                let wins = try state.withLock { state -> Bool in
                    guard state.winner == nil && !state.finished else { return false }
                    try Syscalls.writeAll(fd, Array("go\n".utf8))
                    state.winner = TransitConnection(fd: fd, role: role, key: expectations.key, route: description)
                    return true
                }
                if !wins {
                    try? Syscalls.writeAll(fd, Array("nevermind\n".utf8))
                    Syscalls.close(fd)
                }
            case .receiver:
                guard try Syscalls.readExactly(fd, 3) == Array("go\n".utf8) else {
                    throw WormholeError(.transit, "the sender chose another connection")
                }
                let wins = state.withLock { state -> Bool in
                    guard state.winner == nil && !state.finished else { return false }
                    state.winner = TransitConnection(fd: fd, role: role, key: expectations.key, route: description)
                    return true
                }
                if !wins { Syscalls.close(fd) }
            }
        } catch {
            Syscalls.close(fd)
            fail("\(description): \(error)")
        }
    }

    private func fail(_ message: String) {
        state.withLock { state in
            if state.failures.count < 16 { state.failures.append(message) }
        }
    }
}

/// What each side says and expects on a transit connection, from the transit key.
struct Handshakes: Sendable {
    let key: [UInt8]
    let ours: [UInt8]
    let theirs: [UInt8]
    let relayToken: String

    init(key: [UInt8], role: Transit.Role) {
        self.key = key
        let sender = Array(
            "transit sender \(Hex.string(WormholeKeys.derive(key, purpose: Array("transit_sender".utf8)))) ready\n\n"
                .utf8)
        let receiver = Array(
            "transit receiver \(Hex.string(WormholeKeys.derive(key, purpose: Array("transit_receiver".utf8)))) ready\n\n"
                .utf8)
        ours = role == .sender ? sender : receiver
        theirs = role == .sender ? receiver : sender
        relayToken = Hex.string(WormholeKeys.derive(key, purpose: Array("transit_relay_token".utf8)))
    }
}

/// The connection a transit race chose: encrypted records both ways (or, between two share ends, the raw byte
/// pipe for share's own TLS session: `takeDescriptor`).
public final class TransitConnection {
    public let route: String
    private var fd: Int32
    private let sendKey: [UInt8]
    private let receiveKey: [UInt8]
    private var sendNonce: UInt64 = 0
    private var receiveNonce: UInt64 = 0
    /// Reused for every record: what the socket gave, a record's header, its box, its plaintext, and the frame sent.
    private var inbox = [UInt8](repeating: 0, count: 1 << 20)
    private var header = [UInt8](repeating: 0, count: 4)
    private var sealed: [UInt8] = []
    private var plain: [UInt8] = []
    private var outbox: [UInt8] = []
    private var inboxStart = 0
    private var inboxEnd = 0
    /// Bytes received and sent on the connection (records with their framing).
    public private(set) var bytesIn: UInt64 = 0
    public private(set) var bytesOut: UInt64 = 0

    init(fd: Int32, role: Transit.Role, key: [UInt8], route: String) {
        self.fd = fd
        self.route = route
        let senderKey = WormholeKeys.derive(key, purpose: Array("transit_record_sender_key".utf8))
        let receiverKey = WormholeKeys.derive(key, purpose: Array("transit_record_receiver_key".utf8))
        sendKey = role == .sender ? senderKey : receiverKey
        receiveKey = role == .sender ? receiverKey : senderKey
    }

    deinit { close() }

    /// Sets how long a read or write may block.
    public func setTimeout(_ seconds: Double) { if fd >= 0 { Syscalls.setTimeouts(fd, seconds: seconds) } }

    public func close() {
        if fd >= 0 {
            Syscalls.close(fd)
            fd = -1
        }
    }

    /// Hands the socket over (no records are read or written on it afterwards).
    public func takeDescriptor() -> Int32 {
        let taken = fd
        fd = -1
        return taken
    }

    /// Sends one record (framed in a buffer kept for the connection: no allocation per record).
    public func send(_ record: UnsafeRawBufferPointer) throws(WormholeError) {
        let boxed = record.count + Sodium.macBytes + Sodium.nonceBytes
        if outbox.count < 4 + boxed { outbox = [UInt8](repeating: 0, count: 4 + boxed) }
        var counter = sendNonce.bigEndian
        sendNonce += 1
        let sealed = outbox.withUnsafeMutableBytes { out -> Bool in
            out.storeBytes(of: UInt32(boxed).bigEndian, toByteOffset: 0, as: UInt32.self)
            let nonce = UnsafeMutableRawBufferPointer(rebasing: out[4..<(4 + Sodium.nonceBytes)])
            nonce.initializeMemory(as: UInt8.self, repeating: 0)
            withUnsafeBytes(of: &counter) {
                UnsafeMutableRawBufferPointer(rebasing: nonce[(Sodium.nonceBytes - 8)...]).copyMemory(from: $0)
            }
            return Sodium.seal(
                record, nonce: UnsafeRawBufferPointer(nonce), key: sendKey,
                into: UnsafeMutableRawBufferPointer(rebasing: out[(4 + Sodium.nonceBytes)..<(4 + boxed)]))
        }
        guard sealed else { throw WormholeError(.transit, "a record could not be sealed") }
        do {
            try outbox.withUnsafeBytes {
                try Syscalls.writeAll(fd, UnsafeRawBufferPointer(rebasing: $0[0..<(4 + boxed)]))
            }
        } catch {
            throw WormholeError(.transit, "the transfer connection broke: \(error)")
        }
        bytesOut += UInt64(4 + boxed)
    }

    public func send(_ record: [UInt8]) throws(WormholeError) {
        let failure = record.withUnsafeBytes { raw -> WormholeError? in
            do throws(WormholeError) {
                try send(raw)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    /// The next record (at most `limit` bytes of plaintext), as a copy.
    public func receive(limit: Int = 4 << 20) throws(WormholeError) -> [UInt8] {
        try receive(limit: limit) { Array($0) }
    }

    /// Hands the next record's plaintext (at most `limit` bytes) to `body`, decrypted into a buffer kept for the
    /// connection (valid only during the call). A record out of order or that does not authenticate ends the
    /// transfer.
    public func receive<T>(limit: Int, _ body: (UnsafeRawBufferPointer) throws(WormholeError) -> T)
        throws(WormholeError) -> T
    {
        try fill(4, into: &header)
        let length = header.withUnsafeBytes { Int(UInt32(bigEndian: $0.loadUnaligned(as: UInt32.self))) }
        guard length >= Sodium.nonceBytes + Sodium.macBytes, length - Sodium.nonceBytes - Sodium.macBytes <= limit
        else {
            throw WormholeError(.badMessage, "the other side sent a record of \(length) bytes")
        }
        try fill(length, into: &sealed)
        var expected = [UInt8](repeating: 0, count: Sodium.nonceBytes)
        withUnsafeBytes(of: receiveNonce.bigEndian) { expected.replaceSubrange((Sodium.nonceBytes - 8)..., with: $0) }
        guard sealed.prefix(Sodium.nonceBytes).elementsEqual(expected) else {
            throw WormholeError(.badMessage, "the other side's records arrived out of order")
        }
        receiveNonce += 1
        let count = length - Sodium.nonceBytes - Sodium.macBytes
        if plain.count < count { plain = [UInt8](repeating: 0, count: count) }
        let opened = sealed.withUnsafeBytes { box in
            plain.withUnsafeMutableBytes { out in
                Sodium.open(
                    UnsafeRawBufferPointer(rebasing: box[Sodium.nonceBytes..<length]),
                    nonce: UnsafeRawBufferPointer(rebasing: box[0..<Sodium.nonceBytes]), key: receiveKey,
                    into: UnsafeMutableRawBufferPointer(rebasing: out[0..<count]))
            }
        }
        guard opened else { throw WormholeError(.badMessage, "a record from the other side did not authenticate") }
        let result = plain.withUnsafeBytes { raw -> Result<T, WormholeError> in
            do throws(WormholeError) {
                return .success(try body(UnsafeRawBufferPointer(rebasing: raw[0..<count])))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Exactly `count` bytes from the socket into the front of `buffer` (grown when needed), read in large blocks.
    private func fill(_ count: Int, into buffer: inout [UInt8]) throws(WormholeError) {
        if buffer.count < count { buffer = [UInt8](repeating: 0, count: count) }
        var filled = 0
        while filled < count {
            if inboxStart == inboxEnd {
                let n = inbox.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
                if n < 0, errno == EINTR { continue }
                if n < 0 {
                    let reason = errno == EAGAIN ? "the other side stalled" : String(cString: strerror(errno))
                    throw WormholeError(.transit, "the transfer connection broke: \(reason)")
                }
                if n == 0 { throw WormholeError(.transit, "the other side closed the transfer connection") }
                inboxStart = 0
                inboxEnd = n
                bytesIn += UInt64(n)
            }
            let step = min(count - filled, inboxEnd - inboxStart)
            buffer.withUnsafeMutableBytes { out in
                inbox.withUnsafeBytes { source in
                    UnsafeMutableRawBufferPointer(rebasing: out[filled..<(filled + step)]).copyMemory(
                        from: UnsafeRawBufferPointer(rebasing: source[inboxStart..<(inboxStart + step)]))
                }
            }
            inboxStart += step
            filled += step
        }
    }
}
