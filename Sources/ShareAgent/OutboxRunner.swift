import FoundationEssentials
import ShareLocalSendRoute
import CoreTransferable
import ShareNet
import ShareTrust
import ShareReach
import ShareEngine

/// One attempt at an outbox job: the items are checked and planned again (a file may have changed or gone).
enum OutboxRunner {
    static let log = Log.logger("share.outbox")

    static func run(
        _ job: OutboxJob, device: LocalDevice, watches: WatchLinks, reach: ReachSettings,
        cancellation: SendCancellation, progress: @escaping @Sendable (TransferProgress) -> Void
    ) -> Result<SendReport, ShareFailure> {
        var log = Self.log
        log[metadataKey: "job"] = "\(job.id)"
        log[metadataKey: "to"] = "\(job.to)"
        log[metadataKey: "attempt"] = "\(job.attempts)"
        do {
            let trust = try TrustStore.load(device.paths.trustFile)
            // The items are made again at each attempt: files and folders may have changed or gone.
            let makeItems: (PeerRelation) throws -> [OutgoingItem]
            if let queued = job.items {
                let catalog = device.paths.profilesFile
                makeItems = { _ in try queued.map { try $0.outgoing(catalogFile: catalog) } }
            } else {
                // A job written by an earlier version describes its items.
                var items = SendItems()
                try items.add(
                    paths: job.files.map { URL(fileURLWithPath: $0) }, type: job.contentType.flatMap(UTType.init))
                try items.add(previews: (job.previews ?? []).map { URL(fileURLWithPath: $0) })
                for forwarded in job.forwarded ?? [] {
                    try items.add(forwarded: forwarded, via: device.name)
                }
                items.texts = job.texts
                items.urls = job.urls.compactMap { URL(string: $0) }
                try items.add(profiles: job.profiles, all: job.allProfiles, catalogFile: device.paths.profilesFile)
                makeItems = { try items.items(for: $0) }
            }
            var report: SendReport
            if let fingerprint = job.localsend {
                // A LocalSend device: found again by its fingerprint; away, the job waits like any other.
                guard let phone = LocalSendSeen.load(device.paths).first(where: { $0.fingerprint == fingerprint })
                else {
                    throw ShareFailure(.unavailable, "\(job.to) (LocalSend) is not on the network now")
                }
                let sent = try LocalSendSend.run(
                    outgoing: makeItems(AccessPolicy.visibility(for: .localSend)), to: phone, pin: job.localsendPin,
                    name: device.name,
                    paths: device.paths, progress: ProgressReporter(observer: progress),
                    cancellation: cancellation)
                report = SendReport(localSend: sent)
            } else if job.via == nil, let watch = trust.find(job.to), watches.watch(watch.id) != nil {
                // A watch is reached over the link it opened to this agent, never by connecting to it.
                report = try watches.deliver(
                    to: watch.id, name: watch.name, items: makeItems(AccessPolicy.visibility(for: watch)),
                    device: device, progress: progress)
            } else {
                let target = try PeerTarget.resolve(
                    job.via ?? job.to, device: device, trust: trust, beyondLAN: !reach.isEmpty)
                var options = SendOptions()
                options.reach = reach
                options.forwardTo = job.via == nil ? nil : job.to
                options.cancellation = cancellation
                let session = SendSession(
                    device: device, progress: ProgressReporter(observer: progress), options: options)
                report = try session.run(to: target, trust: trust, makeItems: makeItems)
            }
            log.info(
                "delivered",
                metadata: [
                    "delivered": "\(report.delivered.count)", "refused": "\(report.refused.count)",
                    "sent": "\(report.bytesSent)", "skipped": "\(report.bytesSkipped)",
                    "crossed": "\(report.linkBytes)", "fromCopy": "\(report.bytesFromBasis)",
                ])
            return .success(report)
        } catch let error as ShareFailure {
            log.notice("attempt failed", metadata: ["reason": "\(error.message)"])
            return .failure(error)
        } catch {
            log.error("attempt failed", metadata: ["reason": "\(error)"])
            return .failure(ShareFailure(.failure, "\(error)"))
        }
    }
}
