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
        /// The mailbox server cannot be reached, is not one, or refused us (an unknown or used nameplate).
        case server = "server"
        /// Nobody came within the code's lifetime.
        case expired = "expired"
        /// The other side ended the exchange (a refusal, a transfer it cannot take).
        case refused = "refused"
        /// No transfer connection could be made, or it broke.
        case transit = "transit"
        /// What the other side sent is not what it offered (a size that lies, a digest that differs, an unsafe
        /// name or archive).
        case hostile = "hostile"
        /// Writing the received item failed (no space, no permission).
        case disk = "disk"
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
