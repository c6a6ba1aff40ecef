import ArgumentParser
import Foundation
import ShareKit

struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the running agent: its port, uptime and version, and its queued and finished sends.")

    @OptionGroup var device: DeviceOptions

    @Option(help: ArgumentHelp("Wait until this job is delivered or fails, then show it.", valueName: "job"))
    var wait: String?

    @Flag(help: "One JSON object.")
    var json = false

    func run() throws {
        try ShareCLI.run {
            let paths = device.paths
            if let wait {
                let answer = try ControlClient.request(ControlRequest(op: .wait, id: wait), paths: paths)
                guard let job = answer.job else { throw ShareError(.failure, "no job \(wait)") }
                try show(jobs: [job], answer: nil)
                if let status = job.exitStatus, status != 0 {
                    throw ShareError(
                        ExitStatus(rawValue: status) ?? .failure, "job \(job.id): \(job.lastError ?? "not delivered")")
                }
                return
            }
            let answer = try ControlClient.request(ControlRequest(op: .status), paths: paths)
            try show(jobs: answer.jobs ?? [], answer: answer)
        }
    }

    private func show(jobs: [OutboxJob], answer: ControlResponse?) throws {
        if json {
            var object = answer ?? ControlResponse(ok: true)
            object.jobs = jobs
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .iso8601
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            say(String(decoding: try encoder.encode(object), as: UTF8.self))
            return
        }
        if let answer {
            say(
                "agent \(answer.name ?? "?") on port \(answer.port ?? 0), up \(Int(answer.uptime ?? 0)) s, \(answer.version ?? "")"
            )
        }
        for job in jobs {
            var line = "job \(job.id) to \(job.to): \(job.state.rawValue) (\(job.summary))"
            if job.attempts > 0 { line += ", \(job.attempts) attempt(s)" }
            if job.state == .delivered { line += ", \(ProgressReporter.bytes(job.bytesSent)) sent" }
            if let error = job.lastError { line += " — \(error)" }
            say(line)
        }
    }
}
