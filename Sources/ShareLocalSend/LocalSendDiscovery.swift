import ShareThreads
import Synchronization
import FoundationEssentials
import Logging
import ShareTrust
import ShareNet

/// A LocalSend device seen on the network.
public struct LocalSendPeer: Sendable, Equatable {
    public var info: LocalSendInfo
    public var host: String
    public var lastSeen: Date
    /// Whether the fingerprint was proved by the device's certificate (a `register` answer over TLS), rather than
    /// only claimed in an announcement.
    public var proved: Bool

    public var address: LocalSendAddress {
        LocalSendAddress(host: host, port: info.port ?? LocalSend.defaultPort, fingerprint: info.fingerprint)
    }
}

/// The LocalSend devices seen, bounded: at most `perHost` per address and `capacity` in all (the oldest go first),
/// so hundreds of fake announcements from one host cannot push an honest device out.
public final class LocalSendPeers: Sendable {
    private let seen = Mutex<[String: LocalSendPeer]>([:])
    let capacity: Int
    let perHost: Int
    let ownFingerprint: String

    public init(ownFingerprint: String, capacity: Int = 256, perHost: Int = 4) {
        self.ownFingerprint = ownFingerprint.uppercased()
        self.capacity = capacity
        self.perHost = perHost
    }

    /// Records `info` as seen at `host`; false when it is this device or not a LocalSend device's description.
    @discardableResult
    public func saw(_ info: LocalSendInfo, at host: String, proved: Bool) -> Bool {
        let key = info.fingerprint.uppercased()
        guard key != ownFingerprint, !key.isEmpty, key.count <= 128, info.alias.count <= 256 else { return false }
        var info = info
        info.announce = nil
        if let type = info.deviceType, !LocalSend.deviceTypes.contains(type) { info.deviceType = "desktop" }
        seen.withLock { peers in
            // A claim never replaces a proof from another address.
            if let known = peers[key], known.proved, !proved, known.host != host { return }
            peers[key] = LocalSendPeer(
                info: info, host: host, lastSeen: Date(), proved: proved || (peers[key]?.proved ?? false))
            let sameHost = peers.filter { $0.value.host == host }.sorted { $0.value.lastSeen < $1.value.lastSeen }
            for (old, _) in sameHost.dropLast(perHost) { peers[old] = nil }
            // Over capacity, the oldest mere claim goes first: announcements cannot push out a proved device.
            if peers.count > capacity,
                let oldest = peers.filter({ !$0.value.proved }).min(by: { $0.value.lastSeen < $1.value.lastSeen })
                    ?? peers.min(by: { $0.value.lastSeen < $1.value.lastSeen })
            {
                peers[oldest.key] = nil
            }
        }
        return true
    }

    public var all: [LocalSendPeer] {
        seen.withLock { $0.values.sorted { $0.info.alias.lowercased() < $1.info.alias.lowercased() } }
    }

    /// The device named `reference`: its alias (any case), a fingerprint or its start (at least 8 digits).
    public func find(_ reference: String) -> LocalSendPeer? {
        let all = self.all
        if let exact = all.first(where: { $0.info.alias == reference }) { return exact }
        let lower = reference.lowercased()
        let byAlias = all.filter { $0.info.alias.lowercased() == lower }
        if byAlias.count == 1 { return byAlias[0] }
        let upper = reference.uppercased()
        guard upper.count >= 8 else { return nil }
        let byFingerprint = all.filter { $0.info.fingerprint.uppercased().hasPrefix(upper) }
        return byFingerprint.count == 1 ? byFingerprint[0] : nil
    }
}

/// LocalSend's discovery: announcements on its multicast group (UDP), answered by a `register` request over HTTPS
/// (else a multicast answer), and `register` requests to addresses given by hand (LocalSend's HTTP discovery,
/// for networks without multicast). Answers are rate-limited: a flood of announcements costs a bounded number of
/// requests.
public final class LocalSendDiscovery: Sendable {
    static let log = Log.logger("share.localsend.discovery")
    let info: @Sendable () -> LocalSendInfo
    let peers: LocalSendPeers
    let client: LocalSendClient
    let fd: Int32?
    let multicastPort: Int
    let addresses: [LocalSendAddress]
    let interval: Double
    private struct State {
        var stopping = false
        var running = 0
        var lastAnswer: [String: Date] = [:]
        var answersThisSecond = (second: 0, count: 0)
        var answers = 0
    }
    private let state = Guarded(State())

    /// Announcements answered so far.
    public var answered: Int { state.withLock { $0.answers } }

    /// `multicastPort`: nil for no multicast (HTTP discovery of `addresses` only).
    public init(
        info: @escaping @Sendable () -> LocalSendInfo, peers: LocalSendPeers, client: LocalSendClient,
        multicastPort: Int?, interface: String?, addresses: [LocalSendAddress], interval: Double = 30
    ) {
        self.info = info
        self.peers = peers
        self.client = client
        self.addresses = addresses
        self.interval = interval
        self.multicastPort = multicastPort ?? LocalSend.defaultPort
        if let multicastPort {
            do {
                fd = try Syscalls.discoverySocket(
                    port: multicastPort, group: LocalSend.multicastGroup, interface: interface)
            } catch {
                Self.log.warning("LocalSend discovery without multicast", metadata: ["reason": "\(error)"])
                fd = nil
            }
        } else {
            fd = nil
        }
    }

    public func start() {
        spawn("share-localsend-announce") { [self] in
            while true {
                announce()
                for address in addresses { register(at: address) }
                let stop = state.withLock(when: { $0.stopping }, seconds: interval) { state, _ in state.stopping }
                if stop { return }
            }
        }
        guard let fd else { return }
        spawn("share-localsend-listen") { [self] in
            while !state.withLock({ $0.stopping }) {
                guard let (bytes, from) = try? Syscalls.receiveDatagram(fd, limit: 8192, timeout: 0.25) else {
                    continue
                }
                heard(bytes, from: from)
            }
        }
    }

    private func spawn(_ name: String, _ body: @escaping @Sendable () -> Void) {
        state.withLock { $0.running += 1 }
        Threads.start(name: name, stackSize: 8 << 20) { [self] in
            body()
            state.withLock { $0.running -= 1 }
        }
    }

    /// Announces this device on the group (when multicast is there).
    public func announce() {
        guard let fd else { return }
        var message = info()
        message.announce = true
        guard let bytes = try? JSONEncoder().encode(message) else { return }
        Syscalls.sendDatagram(fd, Array(bytes), host: LocalSend.multicastGroup, port: multicastPort)
    }

    /// POSTs this device's description to `address`'s `register` and records the answer, its fingerprint proved by
    /// the certificate.
    public func register(at address: LocalSendAddress) {
        guard let body = try? JSONEncoder().encode(info().answer) else { return }
        guard let answer = try? client.post(address, LocalSend.apiPrefix + "/register", json: Array(body), timeout: 4),
            answer.status == 200, var seen = try? JSONDecoder().decode(LocalSendInfo.self, from: Data(answer.body))
        else { return }
        seen.fingerprint = answer.fingerprint
        if seen.port == nil { seen.port = address.port }
        peers.saw(seen, at: address.host, proved: true)
    }

    /// A datagram from `host`: recorded as a claim, and an announcement answered (rate-limited).
    public func heard(_ bytes: [UInt8], from host: String) {
        guard let seen = try? JSONDecoder().decode(LocalSendInfo.self, from: Data(bytes)),
            peers.saw(seen, at: host, proved: false), seen.announce == true
        else { return }
        // At most one answer per device every 5 s and 20 answers a second in all.
        let now = Date()
        let allowed: Bool = state.withLock { state in
            let key = seen.fingerprint.uppercased()
            if let last = state.lastAnswer[key], now.timeIntervalSince(last) < 5 { return false }
            let second = Int(now.timeIntervalSince1970)
            if state.answersThisSecond.second != second { state.answersThisSecond = (second, 0) }
            guard state.answersThisSecond.count < 20 else { return false }
            state.answersThisSecond.count += 1
            state.answers += 1
            if state.lastAnswer.count > 1024 {
                state.lastAnswer = state.lastAnswer.filter { now.timeIntervalSince($0.value) < 5 }
            }
            state.lastAnswer[key] = now
            return true
        }
        guard allowed else { return }
        let address = LocalSendAddress(
            host: host, port: seen.port ?? LocalSend.defaultPort, fingerprint: seen.fingerprint)
        spawn("share-localsend-answer") { [self] in
            register(at: address)
            if peers.find(seen.fingerprint)?.proved != true, let fd {
                var answer = info()
                answer.announce = false
                if let bytes = try? JSONEncoder().encode(answer) {
                    Syscalls.sendDatagram(fd, Array(bytes), host: LocalSend.multicastGroup, port: multicastPort)
                }
            }
        }
    }

    public func stop() {
        state.withLock { $0.stopping = true }
        state.wait(seconds: 10) { $0.running == 0 }
        if let fd { Syscalls.close(fd) }
    }
}
