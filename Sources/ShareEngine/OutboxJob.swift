import ShareThreads
import Synchronization
import FoundationEssentials
import ShareText
import ShareNet
import ShareTrust
import ShareProtocol
import CoreTransferable
import UniformTypeIdentifiers

/// A send the agent owns: what to send, to whom, and how far it got. Persisted as JSON in the outbox, so it
/// survives the agent being stopped or killed; a job that was running is resumed (the receiver's ledger says what
/// it already holds).
package struct OutboxJob: Codable, Sendable, Equatable {
    package enum State: String, Codable, Sendable {
        /// `delivered`: at least one item arrived (`refused` counts any that did not); `declined`: the receiver's
        /// user said no to every item; `refused`: the receiver refused every item (its limits, its types, its policy).
        /// `mirroring`: a mirror job of an earlier version (now a shared folder; such a job ends when loaded).
        case queued, running, delivered, declined, refused, failed, cancelled, mirroring
        package var isFinal: Bool { ![.queued, .running, .mirroring].contains(self) }
    }

    /// Whether a refusal's reason is a person's answer (the receiver writes "declined on NAME").
    package static func isDeclined(_ reason: String) -> Bool { reason.hasPrefix("declined on ") }

    /// The final state of a session that ended with these items delivered and these refused.
    package static func finalState(delivered: Int, refusals: [String]) -> State {
        guard delivered == 0, !refusals.isEmpty else { return .delivered }
        return refusals.allSatisfy { isDeclined($0) } ? .declined : .refused
    }

    /// A job an earlier version ended as `delivered` although nothing arrived is read as what it was.
    package mutating func upgradeFinalState() {
        guard state == .delivered, delivered == 0, refused > 0, let lastError else { return }
        let reasons = lastError.components(separatedBy: "; ").map { $0.split(separator: ":", maxSplits: 1).last ?? "" }
        state = Self.finalState(
            delivered: 0, refusals: reasons.map { $0.trimmedSpaces })
    }

    package var id: String
    package var to: String
    /// Absolute paths of files and folders.
    package var files: [String] = []
    /// The content type given with `--type`, for the files.
    package var contentType: String?
    /// Preview images of the files (`--preview`), in order.
    package var previews: [String]?
    package var texts: [String] = []
    package var urls: [String] = []
    /// Profile names or ids from the catalog; `allProfiles` sends the whole catalog as one bundle.
    package var profiles: [String] = []
    package var allProfiles = false
    /// Send through this device's agent, which passes the items on to `to` (its watch).
    package var via: String?
    /// Items this agent received to pass on to its watch: kept in the agent's forwarding folder, sent as they
    /// arrived, and removed once the job has ended. (Stored under the key `relayed`, as earlier versions wrote it.)
    package var forwarded: [ForwardedItem]?
    package var created = Date()
    package var state = State.queued
    package var attempts = 0
    package var nextAttempt = Date()
    package var lastError: String?
    /// Why the job failed (or had items refused), once final; nil when everything was delivered.
    package var failure: ShareFailure.Code?
    /// What earlier versions recorded instead of `failure`: the exit status `share send` would have returned.
    package var exitStatus: Int32?
    package var delivered = 0
    package var refused = 0
    package var bytesSent: UInt64 = 0
    package var bytesSkipped: UInt64 = 0
    /// What crossed the link for it (both ways, in the attempt that delivered it), and what the receiver made from
    /// the copy it had.
    package var bytesCrossed: UInt64?
    package var bytesFromCopy: UInt64?
    /// How far the attempt in progress got, while the job is running.
    package var progress: TransferProgress?
    /// Failed attempts in a row that moved no bytes; the backoff grows with these only.
    package var failuresWithoutProgress: Int?
    /// When the job ended (delivered, failed, cancelled); finished jobs are pruned some time after.
    package var finished: Date?
    /// Someone waits for it (`share send --wait`): it runs at the agent's normal CPU priority, not the lower one of
    /// background transfers.
    package var foreground: Bool?
    /// The job is for a LocalSend device (`to` is the name it was seen with): its certificate's fingerprint, by
    /// which it is found again wherever it is on the network, and the PIN it asked for, if any.
    package var localsend: String?
    package var localsendPin: String?
    /// The items, as `ShareClient` hands them over (references to files, folders and bundles; other values exported
    /// into `STATE/outbox/<id>/`). Jobs of earlier versions describe theirs with `files`, `texts`, `urls` and
    /// `profiles` instead, which are still read.
    package var items: [QueuedItem]?
    /// Set by earlier versions' `share mirror` (now a shared folder: such a job ends when loaded).
    package var mirror: MirrorJob?

    private enum CodingKeys: String, CodingKey {
        case id, to, files, contentType, previews, texts, urls, profiles, allProfiles, via, created, state, attempts,
            nextAttempt
        case lastError, exitStatus, failure, delivered, refused, bytesSent, bytesSkipped, bytesCrossed, bytesFromCopy
        case progress
        case failuresWithoutProgress, finished, foreground, items, localsend, localsendPin, mirror
        case forwarded = "relayed"
    }

    /// "1.0 GiB sent: 134.0 KiB crossed, 1.0 GiB made from the copy there" (what crossed only when it differs).
    package var sentWords: String {
        let bytes = ProgressReporter.bytes
        var words = "\(bytes(bytesSent)) sent"
        if let fromCopy = bytesFromCopy, fromCopy > 0 {
            words += ": \(bytes(bytesCrossed ?? 0)) crossed, \(bytes(fromCopy)) made from the copy there"
        } else if let crossed = bytesCrossed, crossed * 20 < bytesSent * 19 {
            words += ": \(bytes(crossed)) crossed"
        }
        return words
    }

    /// The device and the way a job goes to it: jobs with the same destination go in the order they were made.
    package var destination: String {
        [to.lowercased(), via?.lowercased() ?? "", localsend ?? "", mirror == nil ? "" : "mirror"]
            .joined(separator: "\u{0}")
    }

    /// Whether `other` goes to the same device by the same way.
    package func sameDestination(as other: OutboxJob) -> Bool { destination == other.destination }

    package init(to: String) {
        id = String(UUID().uuidString.replacing("-", with: "").prefix(12)).lowercased()
        self.to = to
    }

    package var summary: String {
        if let mirror { return "mirror of \(mirror.folder)" }
        var parts = files.map { PathText.lastComponent($0) }
        parts += texts.map { _ in "text" } + urls + profiles.map { "profile \($0)" } + (forwarded ?? []).map(\.label)
        parts += (items ?? []).map(\.label)
        if allProfiles { parts.append("all profiles") }
        return parts.joined(separator: ", ")
    }
}

/// What a mirror job keeps current: a folder (absolute path).
package struct MirrorJob: Codable, Sendable, Equatable {
    package var folder: String
    package init(folder: String) { self.folder = folder }
    /// The name the folder's copy gets on the receiver.
    package var name: String { PathText.lastComponent(folder) }
}

/// An item received by the agent to pass on to its watch: where it is kept, and what it is.
package struct ForwardedItem: Codable, Sendable, Equatable {
    package var path: String
    package var contentType: String
    package var label: String
    /// The device it came from.
    package var from: String

    package init(path: String, contentType: String, label: String, from: String) {
        self.path = path
        self.contentType = contentType
        self.label = label
        self.from = from
    }
}

extension OutboxJob {
    /// Where a job's exported values are kept until it ends: `STATE/outbox/<job>/` (0700).
    package static func exportFolder(_ paths: DevicePaths, job: String) -> URL {
        paths.state.appendingPathComponent("outbox/\(job)", isDirectory: true)
    }
}
