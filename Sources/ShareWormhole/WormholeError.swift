/// What went wrong in a magic-wormhole exchange, with a stable code.
public struct WormholeError: Error, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// The code is not of the form NUMBER-WORD-….
        case badCode = "bad-code"
        /// The other side's SPAKE2 message is malformed, not a group element, or reflects ours.
        case badPAKE = "bad-pake"
        /// A message did not decrypt: the two sides typed different codes (or someone in the middle guessed wrong).
        case wrongCode = "wrong-code"
        /// A decrypted message is not what the protocol allows.
        case badMessage = "bad-message"
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
