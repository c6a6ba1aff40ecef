import Foundation
import Testing

@testable import ShareTLS

@Suite struct CredentialsTests {
    @Test func generatedIdentityRoundTripsThroughPEM() throws {
        let identity = try TLSIdentity.generate(commonName: "test")
        let keyPEM = try identity.key.pemRepresentation()
        let certPEM = try identity.certificate.pemRepresentation()
        #expect(keyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        #expect(certPEM.hasPrefix("-----BEGIN CERTIFICATE-----"))
        let reloaded = try TLSIdentity(key: PrivateKey(pem: keyPEM), certificate: Certificate(pem: certPEM))
        #expect(reloaded.deviceID == identity.deviceID)
        #expect(try Certificate(der: identity.certificate.derBytes()).deviceID() == identity.deviceID)
    }

    @Test func deviceIDIsTheDigestOfTheDER() throws {
        let identity = try TLSIdentity.generate(commonName: "x")
        #expect(identity.deviceID.bytes == SHA256Hasher.hash(try identity.certificate.derBytes()))
    }

    @Test func mismatchedKeyAndCertificateAreRefused() throws {
        let a = try TLSIdentity.generate(commonName: "a")
        let b = try TLSIdentity.generate(commonName: "b")
        let error = try #require(throws: TLSError.self) { try TLSIdentity(key: a.key, certificate: b.certificate) }
        #expect(error.kind == .badCredentials)
    }

    @Test func garbagePEMIsAClearError() {
        #expect(throws: TLSError.self) { try PrivateKey(pem: "not a key") }
        #expect(throws: TLSError.self) {
            try Certificate(pem: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
        }
        #expect(throws: TLSError.self) { try Certificate(der: [0x30, 0x03, 0x01]) }
        // The error queue is drained: a following call starts clean.
        #expect(TLSError.drainQueue().isEmpty)
    }
}
