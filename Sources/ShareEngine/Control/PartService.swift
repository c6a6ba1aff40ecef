import FoundationEssentials
import ServiceLifecycle
import Synchronization
import ShareTrust
import ShareProtocol
import CoreTransferable
import UniformTypeIdentifiers

/// A part of the agent that runs on threads of its own (blocking sockets never run on Swift's cooperative pool).
package protocol AgentPart: AnyObject, Sendable {
    /// For logs: "listener", "outbox", "control socket", "discovery".
    var partName: String { get }
    /// Starts the part's threads. `failed` is called (at most once) if they stop on their own, not asked to.
    func start(failed: @escaping @Sendable (Error) -> Void) throws
    /// Stops the part and waits for its threads.
    func stop()
}

/// A part that serves a page whose address opens one session: it makes a new address when asked (`share web`).
package protocol PageLinks: AgentPart {
    func freshAddress() -> String
}
