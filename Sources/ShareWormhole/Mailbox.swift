import ShareHTTP
import FoundationEssentials
import ShareText
import Glibc
import ShareNet

/// One connection to a magic-wormhole mailbox (rendezvous) server: JSON requests with an id, the server's answers
/// and the messages both sides add to the mailbox, in the order the server relays them. Our own messages come back
/// too; they are skipped here.
final class Mailbox {
    private let socket: WebSocket
    let side: String
    private var queued: [[String: Any]] = []
    /// The side that added the message `next` returned last.
    private(set) var lastSide: String?

    /// A message the other side added.
    struct Message {
        var phase: String
        var body: [UInt8]
    }

    init(url: String, appID: String, side: String, timeout: Double) throws(WormholeError) {
        do {
            socket = try WebSocket(url: url, role: "mailbox server", timeout: timeout)
        } catch {
            throw WormholeError(.server, error.message)
        }
        self.side = side
        _ = try expect("welcome", deadline: Date().addingTimeInterval(timeout))
        try request(["type": "bind", "appid": appID, "side": side, "client_version": ["share", "0.1"]])
    }

    func request(_ body: [String: Any]) throws(WormholeError) {
        var body = body
        body["id"] = Hex.string(Sodium.randomBytes(2))
        guard let text = try? JSONText.string(body) else {
            throw WormholeError(.badMessage, "cannot encode a mailbox request")
        }
        do {
            try socket.send(text)
        } catch {
            throw WormholeError(.server, error.message)
        }
    }

    /// Waits for the server's answer of `type` (messages that arrive meanwhile are kept for `next`).
    func expect(_ type: String, deadline: Date) throws(WormholeError) -> [String: Any] {
        while true {
            let answer = try read(deadline: deadline)
            if answer["type"] as? String == type { return answer }
            if answer["type"] as? String == "message" { queued.append(answer) }
        }
    }

    /// The next message the other side added, in order.
    func next(deadline: Date) throws(WormholeError) -> Message {
        while true {
            let answer = queued.isEmpty ? try read(deadline: deadline) : queued.removeFirst()
            guard answer["type"] as? String == "message", let from = answer["side"] as? String, from != side else {
                continue
            }
            guard let phase = answer["phase"] as? String, let body = answer["body"] as? String,
                let bytes = Hex.parse(body)
            else { throw WormholeError(.badMessage, "the mailbox relayed a malformed message") }
            lastSide = from
            return Message(phase: phase, body: bytes)
        }
    }

    func close() { socket.close() }

    private func read(deadline: Date) throws(WormholeError) -> [String: Any] {
        while true {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { throw WormholeError(.expired, "nobody used the code in time") }
            socket.setTimeout(left)
            let text: String?
            do {
                text = try socket.receive()
            } catch {
                if deadline.timeIntervalSinceNow <= 0.05 {
                    throw WormholeError(.expired, "nobody used the code in time")
                }
                throw WormholeError(.server, error.message)
            }
            guard let text else { throw WormholeError(.server, "the mailbox server closed the connection") }
            guard let object = JSONText.object(text.utf8) else {
                throw WormholeError(.server, "the mailbox server sent something that is not JSON")
            }
            switch object["type"] as? String {
            case "ack": continue
            case "error":
                let said = object["error"] as? String ?? "unknown error"
                throw WormholeError(.server, "the mailbox server refused: \(said)")
            default: return object
            }
        }
    }
}

extension Hex {
    static func parse(_ text: String) -> [UInt8]? {
        guard text.utf8.count % 2 == 0,
            text.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else { return nil }
        return bytes(text)
    }
}
