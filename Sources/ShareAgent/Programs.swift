import Synchronization
import CoreTransferable
import FoundationEssentials
import Logging
import ShareProtocol
import ShareNet
import ShareTrust
import UniformTypeIdentifiers
import ShareEngine

/// The program receiving through the agent, when one is (`ShareClient.receive`): while its control connection is
/// open, what peers send to this device is negotiated with its accept list, kept in its folder and handed to it;
/// without one, the agent's own accept list and inbox apply. One program at a time: a second is told which one
/// receives.
final class RegisteredPrograms: Sendable {
    static let log = Log.logger("share.agent")

    /// One registered program and its connection.
    final class Program: Sendable {
        let registration: ProgramRegistration
        let stream: ControlStream

        init(_ registration: ProgramRegistration, stream: ControlStream) {
            self.registration = registration
            self.stream = stream
        }

        /// Hands over an item kept for it (it stays in the program's folder even if the program has gone).
        func deliver(_ item: ReceivedItem) {
            if !stream.send(ProgramEvent(item: item)) {
                RegisteredPrograms.log.notice(
                    "the receiving program went before an item was handed over; it stays in its folder",
                    metadata: ["program": "\(registration.name)", "path": "\(item.path)"])
            }
        }

        /// Tells it what was refused, and why.
        func refused(_ items: [(label: String, reason: String)], from peer: String) {
            for item in items {
                stream.send(ProgramEvent(refused: RefusedItem(label: item.label, from: peer, reason: item.reason)))
            }
        }
    }

    private let current = Mutex<Program?>(nil)

    /// The program receiving now (its connection still open), if any.
    var active: Program? {
        current.withLock { current in
            if let program = current, !program.stream.isOpen { current = nil }
            return current
        }
    }

    /// Registers a program; refused while another one's connection is open, or when its folder is not an absolute
    /// path.
    func register(_ registration: ProgramRegistration, stream: ControlStream) -> ControlResponse {
        guard registration.directory.hasPrefix("/"), !registration.accept.entries.isEmpty,
            registration.name.utf8.count <= 256
        else {
            return .failure(
                "a receiving program needs an absolute folder, a name and at least one accepted type", code: .usage)
        }
        let declared = registration.accept.declarations.flatMap { [$0.identifier] + $0.conformsTo }
        if let bad = declared.first(where: { !UTTypeDeclaration.isValidIdentifier($0) }) {
            return .failure("the program declares a type with an invalid identifier: \(bad)", code: .usage)
        }
        return current.withLock { current in
            if let other = current, other.stream.isOpen {
                return .failure(
                    "\(other.registration.name) already receives through this agent; stop it first, or receive "
                        + "with ShareClient.ReceiveOptions.mode = .listen")
            }
            current = Program(registration, stream: stream)
            Self.log.info(
                "a program receives through the agent",
                metadata: [
                    "program": "\(registration.name)",
                    "accepts": "\(registration.accept.entries.map(\.contentType).joined(separator: ", "))",
                ])
            return ControlResponse(ok: true)
        }
    }
}
