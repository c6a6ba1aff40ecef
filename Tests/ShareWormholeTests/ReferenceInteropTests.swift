import Foundation
import Testing

@testable import ShareWormhole

/// share's SPAKE2, key schedule and secret boxes against magic-wormhole's reference implementation itself
/// (python-spake2 and the `wormhole` package's `_key` module, from Debian's magic-wormhole), run live: the vectors
/// come from the implementation every wormhole client interoperates with, not from our reading of it.
@Suite struct ReferenceInteropTests {
    static let appID = "lothar.com/wormhole/text-or-file-xfer"

    /// Runs `script` with the system Python (where Debian installs python3-spake2); returns its standard output.
    func python(_ script: String, _ arguments: [String] = []) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", script] + arguments
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let output = out.fileHandleForReading.readDataToEndOfFile()
        let errors = err.fileHandleForReading.readDataToEndOfFile()
        process.waitForExit()
        guard process.terminationStatus == 0 else {
            throw ReferenceFailure(message: String(decoding: errors, as: UTF8.self))
        }
        return String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    struct ReferenceFailure: Error { let message: String }

    @Test func theBlindingElementAndPasswordScalarsAreTheReferences() throws {
        let s = try python(
            "from spake2.parameters.ed25519 import ParamsEd25519 as P; print(P.S.to_bytes().hex())")
        #expect(Hex.string(SPAKE2Symmetric.blinding) == s)
        for password in ["", "7-guitarist-revenge", "4-purple-sausages", "ünïcode-✓"] {
            let reference = try python(
                """
                import sys
                from spake2.ed25519_group import Ed25519Group as G
                print(G.scalar_to_bytes(G.password_to_scalar(sys.argv[1].encode())).hex())
                """, [password])
            #expect(Hex.string(SPAKE2Symmetric.passwordScalar(Array(password.utf8))) == reference, "\(password)")
        }
    }

    @Test func theSameEntropyGivesTheReferencesMessage() throws {
        let entropy = (0..<64).map { UInt8(($0 * 37 + 11) & 0xFF) }
        let ours = SPAKE2Symmetric(
            password: Array("7-guitarist-revenge".utf8), identity: Array(Self.appID.utf8), entropy: entropy)
        let reference = try python(
            """
            import sys
            from spake2 import SPAKE2_Symmetric
            entropy = bytes.fromhex(sys.argv[1])
            s = SPAKE2_Symmetric(b"7-guitarist-revenge", idSymmetric=sys.argv[2].encode(), entropy_f=lambda n: entropy[:n])
            print(s.start().hex())
            """, [Hex.string(entropy), Self.appID])
        #expect(Hex.string(ours.message) == reference)
    }

    /// A whole exchange: our message to the reference, its message and a box back. With the same code both hold the
    /// same key, and each opens the other's box (the reference's phase keys and boxes agree with ours); with codes
    /// that differ, the keys differ and nothing opens.
    @Test(arguments: [("7-guitarist-revenge", "7-guitarist-revenge"), ("4-purple-sausages", "4-purple-sausage")])
    func aFullExchangeWithTheReference(ourCode: String, theirCode: String) throws {
        let ours = SPAKE2Symmetric(password: Array(ourCode.utf8), identity: Array(Self.appID.utf8))
        let output = try python(
            """
            import sys
            from spake2 import SPAKE2_Symmetric
            from wormhole._key import derive_phase_key, encrypt_data
            s = SPAKE2_Symmetric(sys.argv[1].encode(), idSymmetric=sys.argv[2].encode())
            message = s.start()
            key = s.finish(bytes.fromhex(sys.argv[3]))
            sealed = encrypt_data(derive_phase_key(key, "theirside", "version"), b"from the reference")
            print(message.hex(), key.hex(), sealed.hex())
            """, [theirCode, Self.appID, Hex.string(ours.message)])
        let parts = output.split(separator: " ").map { Hex.bytes(String($0)) }
        try #require(parts.count == 3)
        let key = try ours.finish(parts[0])
        let theirs = WormholeKeys.phase(key, side: "theirside", phase: "version")
        let sealed = WormholeKeys.encrypt(
            Array("from share".utf8), key: WormholeKeys.phase(key, side: "ourside", phase: "0"))
        let opened = try python(
            """
            import sys
            from wormhole._key import derive_phase_key, decrypt_data
            try:
                print(decrypt_data(derive_phase_key(bytes.fromhex(sys.argv[1]), "ourside", "0"), bytes.fromhex(sys.argv[2])).decode())
            except Exception:
                print("(did not decrypt)")
            """, [Hex.string(parts[1]), Hex.string(sealed)])
        if ourCode == theirCode {
            #expect(key == parts[1])
            #expect(try WormholeKeys.decrypt(parts[2], key: theirs) == Array("from the reference".utf8))
            #expect(opened == "from share")
        } else {
            #expect(key != parts[1])
            #expect(throws: WormholeError.self) { try WormholeKeys.decrypt(parts[2], key: theirs) }
            #expect(opened == "(did not decrypt)")
        }
    }

    @Test func derivedKeysAreTheReferences() throws {
        let key = (0..<32).map { UInt8($0) }
        let reference = try python(
            """
            import sys
            from wormhole._key import derive_key, derive_phase_key
            k = bytes.fromhex(sys.argv[1])
            print(derive_phase_key(k, "abc123", "version").hex(), derive_key(k, b"lothar.com/wormhole/text-or-file-xfer/transit-key").hex(), derive_key(k, b"x", 100).hex())
            """, [Hex.string(key)])
        let ours = [
            WormholeKeys.phase(key, side: "abc123", phase: "version"),
            WormholeKeys.derive(key, purpose: Array("lothar.com/wormhole/text-or-file-xfer/transit-key".utf8)),
            WormholeKeys.derive(key, purpose: Array("x".utf8), count: 100),
        ].map(Hex.string).joined(separator: " ")
        #expect(ours == reference)
    }
}
