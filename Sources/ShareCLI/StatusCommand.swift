import ArgumentParser
import FoundationEssentials
import ShareCommandLine
import ShareKit
import ShareTrust
import ShareProtocol
import ShareEngine
import ShareAgent

struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract:
            "Show the running agent: port, uptime and version, peers, the clipboard item, its sends with progress, and its shared folders.",
        discussion: helpPage(
            "Talks to the agent over its control socket, which only this user can use.",
            examples: ["share status", "share status --json", "share status --wait 3f2a9c1b0d4e"]))

    @OptionGroup var device: DeviceOptions

    @Option(help: ArgumentHelp("Wait until this job is delivered or fails, then show it.", valueName: "job"))
    var wait: String?

    @Flag(help: "One JSON object.")
    var json = false

    func run() throws {
        try ShareCLI.run {
            let paths = device.paths
            if let wait {
                let answer = try ControlClient.request(.wait(id: wait, timeout: nil), paths: paths)
                guard let job = answer.job else { throw ShareError(.failure, "no job \(wait)") }
                try show(jobs: [job], answer: nil)
                if let status = job.exitStatus(), status != .success {
                    throw ShareError(status, "job \(job.id): \(job.lastError ?? "not delivered")")
                }
                return
            }
            var answer = try ControlClient.request(.status, paths: paths)
            // The folders as `share sync` has them (the page asks for them the same way).
            if let folders = try? ControlClient.request(.folders(settledWithin: nil), paths: paths), folders.ok {
                answer.folders = folders.folders
                answer.offers = folders.offers
            }
            try show(jobs: answer.jobs ?? [], answer: answer)
        }
    }

    private func show(jobs: [OutboxJob], answer: ControlResponse?) throws {
        if json {
            var object = answer ?? ControlResponse(ok: true)
            object.jobs = jobs
            try sayJSON(object)
            return
        }
        if let answer {
            say(
                "agent \(answer.name ?? "?") on port \(answer.port ?? 0), up \(Self.duration(answer.uptime ?? 0)), \(answer.version ?? "")"
            )
            let heard = answer.discovered ?? []
            for peer in answer.trusted ?? [] { say("trusted: \(peer)") }
            for watch in answer.watches ?? [] { say("watch: \(ProgressReporter.neutralized(watch))") }
            if let program = answer.program { say("receiving program: \(ProgressReporter.neutralized(program))") }
            for line in answer.reach ?? [] { say(line) }
            if let line = answer.localsend { say(line) }
            let trustedNames = Set((answer.trusted ?? []).map { $0.split(separator: " ").first.map(String.init) ?? $0 })
            for peer in heard {
                let trusted = trustedNames.contains(peer.name) ? "" : ", not trusted"
                say(
                    "heard: \(ProgressReporter.neutralized(peer.name)) at \(peer.address), \(Self.ago(peer.lastSeen)) ago\(trusted)"
                )
            }
            if let item = answer.clipboard {
                say(
                    "clipboard: \(item.summary), copied \(Self.ago(item.copied)) ago, expires in \(Self.duration(item.expires.timeIntervalSinceNow))"
                )
            } else {
                say("clipboard: nothing copied")
            }
            for entry in PendingOffers.load(device.paths).entries where entry.answer == nil {
                say(
                    "pending: \(entry.id) from \(ProgressReporter.neutralized(entry.fromName)), \(entry.itemCount) item(s) waiting for your answer (share accept \(entry.id))"
                        + (entry.senderGone() ? "; \(PendingCommand.gone(entry))" : "")
                )
            }
            if jobs.isEmpty { say("outbox: empty") }
        }
        for job in jobs {
            var line = "job \(job.id) to \(job.to): \(job.state.rawValue) (\(job.summary))"
            if let progress = job.progress { line += ", " + Self.describe(progress) }
            if job.attempts > 0 { line += ", \(job.attempts) attempt(s)" }
            if job.state == .queued, job.attempts > 0 { line += ", " + JobsCommand.nextTry(job) }
            if job.state == .delivered { line += ", \(job.sentWords)" }
            if let error = job.lastError { line += " — \(error)" }
            say(line)
        }
        if let answer {
            for folder in answer.folders ?? [] { say(Self.line(folder)) }
            for offer in answer.offers ?? [] {
                say(
                    "folder offered: \(ProgressReporter.neutralized(offer.label)) (\(offer.id)) from \(ProgressReporter.neutralized(offer.fromName)); share sync accept \(offer.id)"
                )
            }
        }
    }

    /// One line for a shared folder (`share sync` shows the rest):
    /// `folder: thesis (abcde-fghij-klmno) up to date, 31 file(s); desk in step, phone away; 1 conflict copy`.
    static func line(_ folder: FolderStatus) -> String {
        let settings = folder.settings
        var line =
            "folder: \(ProgressReporter.neutralized(settings.label)) (\(settings.id)) \(folder.state), \(folder.files) file(s)"
        if folder.neededFiles > 0 { line += ", \(folder.neededFiles) to come" }
        let peers = folder.peers.map { peer in
            let name = ProgressReporter.neutralized(peer.name)
            if peer.notSharing == true { return "\(name) \(peer.notSharingShort)" }
            if !peer.connected { return "\(name) away" }
            return "\(name) \(peer.inStep ? "in step" : "not in step")"
        }
        if !peers.isEmpty { line += "; " + peers.joined(separator: ", ") }
        if !folder.conflicts.isEmpty {
            line += "; \(folder.conflicts.count) conflict cop\(folder.conflicts.count == 1 ? "y" : "ies")"
        }
        if !folder.problems.isEmpty { line += "; \(folder.problems.count) path(s) out of sync" }
        return line
    }

    /// `[2/3] movie.mp4 45% 1.2 GiB/2.6 GiB at 110.0 MiB/s`
    static func describe(_ progress: TransferProgress) -> String {
        var text = progress.count > 1 ? "[\(progress.number)/\(progress.count)] " : ""
        text += progress.item
        if let total = progress.itemTotal, total > 0 {
            text +=
                " \(min(100, progress.itemBytes * 100 / total))% \(ProgressReporter.bytes(progress.itemBytes))/\(ProgressReporter.bytes(total))"
        } else {
            text += " \(ProgressReporter.bytes(progress.itemBytes))"
        }
        return text + " at \(ProgressReporter.bytes(progress.rate))/s"
    }

    static func ago(_ date: Date) -> String { duration(-date.timeIntervalSinceNow) }

    static func duration(_ seconds: Double) -> String {
        let s = max(0, Int(seconds))
        return s < 60
            ? "\(s) s"
            : s < 3600 ? "\(s / 60) min" : s < 86_400 ? "\(s / 3600) h \(s / 60 % 60) min" : "\(s / 86_400) d"
    }
}
