import FoundationEssentials
import ServiceLifecycle
import Synchronization
import ShareTrust
import ShareProtocol
import CoreTransferable
import UniformTypeIdentifiers
import ShareEngine

/// The failure of a part whose threads stopped without being asked.
struct PartFailure: Error, CustomStringConvertible {
    let part: String
    let reason: String
    var description: String { "the agent's \(part) stopped: \(reason)" }
}

/// Runs an `AgentPart` as a service of the agent's group: started when the group runs; stopped on a graceful
/// shutdown or when the group is cancelled; and when the part fails on its own, the service throws, which ends the
/// group (and the process, visibly, with the reason logged) rather than leaving a dead part behind.
struct PartService: Service, CustomStringConvertible {
    let part: any AgentPart
    /// Runs before the part stops (the listener ends the watches' links first).
    let stopFirst: (@Sendable () -> Void)?

    init(_ part: any AgentPart, stopFirst: (@Sendable () -> Void)? = nil) {
        self.part = part
        self.stopFirst = stopFirst
    }

    var description: String { part.partName }

    func run() async throws {
        let signal = EndSignal()
        try part.start { error in signal.end(PartFailure(part: part.partName, reason: "\(error)")) }
        let stop: @Sendable () -> Void = { [part, stopFirst] in
            guard signal.beginStopping() else { return }
            stopFirst?()
            part.stop()
            signal.end(nil)
        }
        try await withTaskCancellationHandler {
            try await withGracefulShutdownHandler {
                try await signal.wait()
            } onGracefulShutdown: {
                stop()
            }
        } onCancel: {
            stop()
        }
    }
}

/// Resolves once: with nil when the part was stopped, with an error when it failed.
final class EndSignal: Sendable {
    private struct State {
        var ended = false
        var stopping = false
        var error: (any Error)?
        var waiter: CheckedContinuation<Void, any Error>?
    }

    private let state = Mutex(State())

    /// True for the first caller only.
    func beginStopping() -> Bool {
        state.withLock { state in
            if state.stopping || state.ended { return false }
            state.stopping = true
            return true
        }
    }

    func end(_ error: (any Error)?) {
        let waiter: CheckedContinuation<Void, any Error>? = state.withLock { state in
            if state.ended { return nil }
            state.ended = true
            state.error = error
            defer { state.waiter = nil }
            return state.waiter
        }
        if let error { waiter?.resume(throwing: error) } else { waiter?.resume() }
    }

    func wait() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let resolved: (ended: Bool, error: (any Error)?) = state.withLock { state in
                if state.ended { return (true, state.error) }
                state.waiter = continuation
                return (false, nil)
            }
            guard resolved.ended else { return }
            if let error = resolved.error { continuation.resume(throwing: error) } else { continuation.resume() }
        }
    }
}
