import Foundation
import CoreTransferable
import Logging
import ShareProtocol
import ShareNet
import ShareTrust
import ShareReach
import UniformTypeIdentifiers
import ShareEngine

/// The agent's answers to its control socket, one per request kind.
struct ControlAPI {
    let agent: Agent

    func answer(_ request: ControlRequest) -> ControlResponse {
        switch request {
        case .send(let job):
            do {
                try agent.outbox.add(job)
            } catch {
                return .failure("cannot queue the job: \(error)")
            }
            var response = ControlResponse(ok: true)
            response.job = job
            return response
        case .status:
            return status()
        case .copy(let item):
            do {
                try item.save(agent.device.paths)
            } catch {
                return .failure("cannot keep the clipboard item: \(error)")
            }
            return ControlResponse(ok: true)
        case .notices:
            agent.courier.wake()
            return ControlResponse(ok: true)
        case .wait(let id, let timeout):
            let found = agent.outbox.wait(for: id, timeout: timeout ?? 86_400)
            guard let job = found else {
                return .failure("no job \(id)")
            }
            var response = ControlResponse(ok: true)
            response.job = job
            return response
        case .folders:
            var response = ControlResponse(ok: true)
            response.folders = agent.folders.statuses()
            response.offers = agent.folders.offers
            return response
        case .folderAdd(let settings):
            return folderAnswer { try agent.folders.add(settings) }
        case .folderAccept(let id, let path, let kind, let keepVersions):
            return folderAnswer { try agent.folders.accept(id, into: path, kind: kind, keepVersions: keepVersions) }
        case .folderDecline(let id):
            return folderAnswer {
                try agent.folders.decline(id)
                return nil
            }
        case .folderRemove(let id):
            return folderAnswer { try agent.folders.remove(id) }
        case .folderRevert(let id):
            return folderAnswer { try agent.folders.revert(id) }
        case .folderOverride(let id):
            return folderAnswer { try agent.folders.override(id) }
        case .folderAllowDeletes(let id):
            return folderAnswer { try agent.folders.allowDeletes(id) }
        case .folderVersions(let id, let path):
            return versionsAnswer { try agent.folders.versions(id, path: path) }
        case .folderRestore(let id, let path, let at):
            return versionsAnswer { [try agent.folders.restore(id, path: path, at: at)] }
        case .folderRescan(let id):
            do {
                var response = ControlResponse(ok: true)
                response.folders = [try agent.folders.rescan(id)]
                return response
            } catch let failure as ShareFailure {
                return .failure(failure.message)
            } catch {
                return .failure("\(error)")
            }
        case .pageLink:
            guard let page = agent.page.withLock({ $0 }) else {
                return .failure("the agent serves no page (share agent --web, or \"web\" in agent.json)")
            }
            var response = ControlResponse(ok: true)
            response.link = page.freshAddress()
            return response
        case .receive:
            // Served by the control server itself: the connection stays open for the program.
            return .failure("a receiving program registers on a connection of its own")
        case .cancel(let id):
            if let ended = agent.outbox.all.first(where: { $0.id == id }), ended.state.isFinal {
                return .failure("job \(id) has already ended: \(ended.state.rawValue)")
            }
            switch agent.outbox.cancel(id) {
            case .none:
                return .failure("no job \(id) (share jobs lists them)")
            case .some(let job):
                var response = ControlResponse(ok: true)
                response.job = job
                return response
            }
        }
    }

    /// A folder request's answer: the folder it made or changed, or its failure's sentence.
    private func folderAnswer(_ body: () throws -> SharedFolderSettings?) -> ControlResponse {
        do {
            var response = ControlResponse(ok: true)
            response.folder = try body()
            return response
        } catch let failure as ShareFailure {
            return .failure(failure.message)
        } catch {
            return .failure("\(error)")
        }
    }

    private func versionsAnswer(_ body: () throws -> [FolderVersion]) -> ControlResponse {
        do {
            var response = ControlResponse(ok: true)
            response.versions = try body()
            return response
        } catch let failure as ShareFailure {
            return .failure(failure.message)
        } catch {
            return .failure("\(error)")
        }
    }

    private func status() -> ControlResponse {
        let device = agent.device
        var response = ControlResponse(ok: true)
        response.jobs = agent.outbox.all
        response.name = device.name
        response.id = device.id.description
        response.port = agent.port
        response.inbox = agent.inbox.directory.path
        response.version = "share 0.1 (protocol \(Limits.protocolVersion))"
        response.uptime = Date().timeIntervalSince(agent.started)
        response.clipboard = ClipboardItem.load(device.paths)
        let routes = RouteBook.load(device.paths)
        response.trusted = agent.trust.store.devices.map { device in
            var line = "\(device.name)" + (device.address.map { " \($0)" } ?? "")
            if let last = routes[device.id.description] {
                line += ", last reached \(last.route) (\(last.address)) \(Int(-last.at.timeIntervalSinceNow)) s ago"
            }
            return line
        }
        response.reach = agent.reach.status
        if let part = agent.localSend {
            let seen = part.peers.all.filter(\.proved).count
            response.localsend =
                "LocalSend: port \(part.port), fingerprint \(part.fingerprint.prefix(8))…, \(seen) device(s) seen, "
                + "\(part.inbox.openUploads) upload(s) under way" + (part.inbox.pinLock.map { "; \($0)" } ?? "")
        }
        response.discovered = DiscoveredPeer.load(device.paths)
        response.watches = agent.watches.all.map { "\($0.watch.name) (\($0.attached ? "attached" : "away"))" }
        response.program = agent.router.programs.active.map { program in
            "\(program.registration.name), accepting "
                + program.registration.accept.entries.map(\.contentType).joined(separator: ", ")
        }
        return response
    }
}

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
                    paths: device.paths, progress: ProgressReporter(mode: .quiet, observer: progress),
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
                    device: device, progress: ProgressReporter(mode: .quiet, observer: progress), options: options)
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
