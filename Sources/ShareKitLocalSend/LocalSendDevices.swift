import FoundationEssentials
import ShareEngine
import ShareKit
import ShareLocalSendRoute
import ShareTrust

extension ShareClient {
    /// Lets `send` reach LocalSend devices by the name they announce (a phone this device's agent has seen, listed by
    /// `share peers`) when no trusted device has that name: queued in the agent's outbox (`options.queue`, the PIN
    /// in `options.localSendPin`) or sent from this process by LocalSend's upload. Turned on once per process; the
    /// `share` command does it at its start.
    public static func reachLocalSendDevices() {
        reach(LocalSendDevices())
    }
}

/// LocalSend devices, for `ShareClient`.
struct LocalSendDevices: OtherDevices {
    func send(_ items: [ShareItem], to name: String, from client: ShareClient, options: ShareClient.SendOptions)
        throws -> ShareClient.Delivery?
    {
        let device = client.device
        guard let phone = LocalSendSeen.find(name, in: LocalSendSeen.load(device.paths)) else { return nil }
        var delivery = ShareClient.Delivery()
        if options.queue {
            var job = OutboxJob(to: phone.alias)
            job.localsend = phone.fingerprint
            job.localsendPin = options.localSendPin
            job.foreground = options.waiting ? true : nil
            let folder = OutboxJob.exportFolder(device.paths, job: job.id)
            job.items = try items.map { try $0.queued(for: AccessPolicy.visibility(for: .localSend), into: folder) }
            let answer = try ControlClient.request(.send(job), paths: device.paths)
            delivery.job = answer.job?.id ?? job.id
            return delivery
        }
        let progress = options.progress ?? ProgressReporter(events: options.events)
        let report = try LocalSendSend.run(
            items, to: phone, pin: options.localSendPin, name: device.name, paths: device.paths, progress: progress,
            answerTimeout: options.waitForAnswer)
        delivery.delivered = report.delivered.map { ($0, "saved", nil) }
        delivery.refused = report.refused
        delivery.route = "LocalSend"
        delivery.bytesSent = report.bytes
        delivery.wireBytes = report.bytes
        delivery.linkBytes = report.bytes
        delivery.seconds = report.seconds
        if let first = report.refused.first {
            throw ShareFailure(.refused, "\(first.label) has no form a LocalSend device takes: \(first.reason)")
        }
        return delivery
    }
}
