import Testing

@testable import ShareReach

@Suite struct RelayMessageTests {
    /// An invitation as strelaysrv 1.19 sent it, captured on loopback: from (32), key (32), address (16, an
    /// IPv4-mapped ::ffff:127.0.0.1), port 22067, server socket.
    static let captured: [UInt8] = Hex.parse(
        "00000020" + "0c3d2e57afb482452c6ad41897140fc2bc5f00d7ed9224923eda79b002961f59"
            + "00000020" + "0425e786fb2517a00afcbc06e28270482b049a0cd7546f754924c347877177d1"
            + "00000010" + "00000000000000000000ffff7f000001" + "00005633" + "00000001")

    @Test func anInvitationFromStrelaysrvDecodes() throws {
        let message = try RelayMessage.decode(type: 6, body: Self.captured)
        guard case .sessionInvitation(let invitation) = message else {
            Issue.record("not an invitation: \(message)")
            return
        }
        #expect(invitation.from == Hex.parse("0c3d2e57afb482452c6ad41897140fc2bc5f00d7ed9224923eda79b002961f59"))
        #expect(invitation.port == 22067 && invitation.serverSocket)
        #expect(invitation.host == "127.0.0.1")
        #expect(
            RelayMessage.sessionInvitation(invitation).encoded() == [0x9E, 0x79, 0xBC, 0x40, 0, 0, 0, 6, 0, 0, 0, 100]
                + Self.captured)
    }

    @Test func everyMessageRoundTrips() throws {
        let messages: [RelayMessage] = [
            .ping, .pong, .joinRelayRequest, .joinSessionRequest(key: [1, 2, 3]),
            .response(code: 0, message: "success"),
            .response(code: 1, message: "not found"), .connectRequest(id: [UInt8](repeating: 5, count: 32)),
            .sessionInvitation(
                SessionInvitation(from: [1], key: [2, 2], address: [], port: 1, serverSocket: false)),
        ]
        for message in messages {
            let bytes = message.encoded()
            let (type, length) = try RelayMessage.parseHeader(Array(bytes.prefix(12)))
            #expect(length == bytes.count - 12 && length % 4 == 0)
            #expect(try RelayMessage.decode(type: type, body: Array(bytes.dropFirst(12))) == message)
        }
    }

    @Test func anEmptyOrUnspecifiedAddressMeansTheRelayItself() {
        #expect(SessionInvitation(from: [], key: [], address: [], port: 1, serverSocket: true).host == nil)
        #expect(SessionInvitation(from: [], key: [], address: [0, 0, 0, 0], port: 1, serverSocket: true).host == nil)
        let v6 = SessionInvitation(
            from: [], key: [], address: [0x20, 0x01, 0x0D, 0xB8] + [UInt8](repeating: 0, count: 11) + [1], port: 1,
            serverSocket: true)
        #expect(v6.host == "2001:db8:0:0:0:0:0:1")
    }

    @Test func wrongMagicOversizedAndShortMessagesAreRefused() {
        #expect(throws: RelayProtocolError.self) { try RelayMessage.parseHeader([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]) }
        #expect(throws: RelayProtocolError.self) {
            try RelayMessage.parseHeader([0x9E, 0x79, 0xBC, 0x40, 0, 0, 0, 6, 0, 1, 0, 0])
        }
        #expect(throws: RelayProtocolError.self) { try RelayMessage.decode(type: 6, body: [0, 0, 0, 32, 1, 2]) }
        #expect(throws: RelayProtocolError.self) { try RelayMessage.decode(type: 3, body: [0, 0, 1, 0]) }
        #expect(throws: RelayProtocolError.self) { try RelayMessage.decode(type: 42, body: []) }
    }
}

enum Hex {
    static func parse(_ text: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            out.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return out
    }
}
