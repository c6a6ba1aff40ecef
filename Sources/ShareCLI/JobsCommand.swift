import ArgumentParser
import FoundationEssentials
import ShareCommandLine
import ShareKit
import ShareTrust
import ShareProtocol
import ShareEngine
import ShareAgent

struct JobsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "jobs",
        abstract:
            "List the agent's sends: queued, running (with progress) and finished ones; then what its shared folders pulled.",
        discussion: helpPage(
            "Finished jobs are listed for 7 days, then forgotten. A job to a device that cannot be reached keeps trying for 7 days (agent.json: giveUpAfter), then fails with that reason. After the sends, each shared folder's last pulls since the agent started: from which device, how many files, what crossed the link and what was made from copies already here (share sync --json has them as recentPulls; --json here lists the sends only).",
            examples: ["share jobs", "share jobs --json | jq -r '.[] | select(.state == \"queued\") | .id'"]))

    @OptionGroup var device: DeviceOptions

    @Flag(help: "One JSON array of jobs.")
    var json = false

    func run() throws {
        try ShareCLI.run {
            let answer = try ControlClient.request(.status, paths: device.paths)
            let jobs = answer.jobs ?? []
            if json {
                try sayJSON(jobs)
                return
            }
            let folders = (try? ControlClient.request(.folders(settledWithin: nil), paths: device.paths))?.folders ?? []
            let pulls = folders.flatMap { folder in
                (folder.recentPulls ?? []).suffix(5).reversed().map { Self.line($0, of: folder.settings) }
            }
            if jobs.isEmpty && pulls.isEmpty {
                tell("no jobs: sends through the agent, and what its shared folders pull, are listed here")
                return
            }
            for job in jobs { say(Self.line(job)) }
            for line in pulls { say(line) }
        }
    }

    /// `docs (abcde-fghij-klmno)  pulled from laptop  2 min ago  3 file(s), 3.5 KB crossed, 47.7 MiB made from
    /// copies here`
    static func line(_ pull: FolderStatus.Pull, of folder: SharedFolderSettings) -> String {
        "\(folder.label) (\(folder.id))  pulled from \(ProgressReporter.neutralized(pull.from))  "
            + "\(SyncList.ago(pull.at))  \(pull.files) file(s), \(ProgressReporter.bytes(pull.crossed)) crossed, "
            + "\(ProgressReporter.bytes(pull.fromLocal)) made from copies here"
    }

    /// "next try in 8 s" (or "trying now").
    static func nextTry(_ job: OutboxJob) -> String {
        let seconds = Int(job.nextAttempt.timeIntervalSinceNow.rounded(.up))
        return seconds > 0 ? "next try in \(seconds) s" : "trying now"
    }

    /// `3f2a9c1b0d4e  desk  running  report.pdf, text  [1/2] report.pdf 45% … — last error`
    static func line(_ job: OutboxJob) -> String {
        var line = "\(job.id)  \(job.to)  \(job.state.rawValue)  \(job.summary)"
        if let progress = job.progress { line += "  " + StatusCommand.describe(progress) }
        if job.attempts > 0 { line += "  \(job.attempts) attempt(s)" }
        if job.state == .queued, job.attempts > 0 { line += ", " + Self.nextTry(job) }
        if job.state == .delivered {
            line += "  \(job.sentWords)"
        }
        if let error = job.lastError { line += " — \(error)" }
        return line
    }
}

struct CancelCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract: "Cancel a queued or running send of the agent.",
        discussion: helpPage(
            "A running send stops at once; the receiver keeps what it verified, so sending the same files again resumes. Files forwarded to a watch and kept only for this job are removed.",
            examples: ["share jobs", "share cancel 3f2a9c1b0d4e"]))

    @OptionGroup var device: DeviceOptions

    @Argument(help: ArgumentHelp("The job's ID (see: share jobs).", valueName: "job"))
    var job: String

    func run() throws {
        try ShareCLI.run {
            // A job that names nothing is a wrong argument (the agent's answer says so: exit status 64).
            let answer = try ControlClient.request(.cancel(id: job), paths: device.paths)
            guard let cancelled = answer.job else { throw ShareError(.failure, "the agent did not say") }
            tell("cancelled job \(cancelled.id) to \(cancelled.to) (\(cancelled.summary))")
        }
    }
}
