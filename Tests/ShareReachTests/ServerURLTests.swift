import ShareTrust
import ShareTLS
import Testing

@testable import ShareReach

@Suite struct ServerURLTests {
    static let id = DeviceID(certificateDER: Array("a server certificate".utf8))

    @Test func aDiscoveryServerURLKeepsItsPathAndPinsItsID() throws {
        let server = try ServerURL(parsing: "https://203.0.113.10:8443/?id=\(Self.id)")
        #expect(server.kind == .discovery)
        #expect(server.host == "203.0.113.10" && server.port == 8443)
        #expect(server.path == "/v2/")
        #expect(server.id == Self.id)
        #expect(server.canonical == "https://203.0.113.10:8443/v2/?id=\(Self.id)")
        let withPath = try ServerURL(parsing: "https://disco.example.org/v2/?id=\(Self.id)")
        #expect(withPath.port == 443 && withPath.path == "/v2/")
    }

    @Test func aRelayURLAsStrelaysrvPrintsItIsRead() throws {
        let printed =
            "relay://0.0.0.0:22067/?id=\(Self.id)&pingInterval=1m0s&networkTimeout=2m0s&sessionLimitBps=0&globalLimitBps=0&statusAddr=&providedBy="
        let relay = try ServerURL(parsing: printed)
        #expect(relay.kind == .relay && relay.port == 22067 && relay.id == Self.id)
        #expect(relay.canonical == "relay://0.0.0.0:22067/?id=\(Self.id)")
        let v6 = try ServerURL(parsing: "relay://[2001:db8::1]:22067/?id=\(Self.id)")
        #expect(v6.host == "2001:db8::1" && v6.address.description == "[2001:db8::1]:22067")
        // The earlier check characters name the same certificate.
        let earlier = try ServerURL(parsing: "relay://192.0.2.1:22067/?id=\(Self.id.earlierDescription)")
        #expect(earlier.id == Self.id)
    }

    @Test(arguments: [
        "relay://203.0.113.10:22067", "relay://203.0.113.10:22067/?id=NOTANID", "http://203.0.113.10/?id=X",
        "tcp://203.0.113.10:22000", "relay://:22067/?id=X", "",
    ])
    func aURLWithoutAPinOrOfAnotherKindIsRefused(_ text: String) {
        #expect(throws: ShareFailure.self) { try ServerURL(parsing: text) }
    }

    @Test func lookedUpAddressesBecomeDirectAttemptsOnlyWhenTheyNameAHost() {
        #expect(Reach.directAddress("tcp://192.0.2.2:22000") == PeerAddress(host: "192.0.2.2", port: 22000))
        #expect(Reach.directAddress("tcp6://[2001:db8::2]:7001") == PeerAddress(host: "2001:db8::2", port: 7001))
        #expect(Reach.directAddress("tcp://0.0.0.0:22000") == nil)
        #expect(Reach.directAddress("tcp://:22000") == nil)
        #expect(Reach.directAddress("quic://192.0.2.2:22000") == nil)
        #expect(Reach.directAddress("relay://192.0.2.2:22067/?id=X") == nil)
    }
}
