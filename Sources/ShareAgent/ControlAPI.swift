import FoundationEssentials
import ShareProtocol
import ShareTrust
import ShareReach
import UniformTypeIdentifiers
import ShareEngine

/// The agent's answers to its control socket, one per request kind.
struct ControlAPI {
    let agent: Agent

    /// `hungUp`: whether the client went away (a wait ends then).
    func answer(_ request: ControlRequest, hungUp: @escaping @Sendable () -> Bool = { false }) -> ControlResponse {
        switch request {
        case .send(let job):
            do {
                try agent.outbox.add(job)
            } catch {
                let failure = error as? ShareFailure
                return .failure(
                    "cannot queue the job: \(failure?.message ?? "\(error)")", code: failure?.code ?? .failure)
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
            let found = agent.outbox.wait(for: id, timeout: timeout ?? 86_400, until: hungUp)
            guard let job = found else {
                return .failure("no job \(id) (share jobs lists them)", code: .usage)
            }
            var response = ControlResponse(ok: true)
            response.job = job
            return response
        case .folders(let within):
            var response = ControlResponse(ok: true)
            response.folders =
                within.map { agent.folders.statuses(settlingWithin: $0, until: hungUp) } ?? agent.folders.statuses()
            response.offers = agent.folders.offers
            let declined = agent.folders.declinedOffers
            response.declinedOffers = declined.isEmpty ? nil : declined
            return response
        case .folderAdd(let settings):
            return folderAnswer { try agent.folders.add(settings) }
        case .folderAccept(let id, let path, let kind, let keepVersions, let maxConflicts):
            return folderAnswer {
                try agent.folders.accept(
                    id, into: path, kind: kind, keepVersions: keepVersions, maxConflicts: maxConflicts)
            }
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
        case .folderPause(let id, let paused):
            return folderAnswer { try agent.folders.pause(id, paused) }
        case .folderSet(let id, let kind, let label, let keepVersions, let maxConflicts):
            return folderAnswer {
                try agent.folders.set(
                    id, kind: kind, label: label, keepVersions: keepVersions, maxConflicts: maxConflicts)
            }
        case .folderUnshare(let id, let devices):
            return folderAnswer { try agent.folders.unshare(id, from: devices) }
        case .folderVersions(let id, let path):
            return versionsAnswer { try agent.folders.versions(id, path: path) }
        case .folderRestore(let id, let path, let at):
            return versionsAnswer { [try agent.folders.restore(id, path: path, at: at)] }
        case .folderRescan(let id):
            do {
                var response = ControlResponse(ok: true)
                response.folders = [try agent.folders.rescan(id)]
                return response
            } catch {
                return .failure(error)
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
                return .failure("no job \(id) (share jobs lists them)", code: .usage)
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
        } catch {
            return .failure(error)
        }
    }

    private func versionsAnswer(_ body: () throws -> [FolderVersion]) -> ControlResponse {
        do {
            var response = ControlResponse(ok: true)
            response.versions = try body()
            return response
        } catch {
            return .failure(error)
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
