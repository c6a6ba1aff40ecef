import ArgumentParser
import FoundationEssentials
import ShareLocalSendRoute
import ShareText
import ShareCommandLine
import ShareKit
import ShareLocalSend
import ShareTLS
import ShareTrust
import ShareProtocol
import ShareEngine
import ShareAgent

struct TrustCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trust", abstract: "Manage the devices this one trusts.",
        discussion: helpPage(
            "share pair is the usual way to trust a device; trust add takes an ID read from the other device.",
            examples: [
                "share trust list",
                "share trust add 5FTPM5D-ADMTWYP-IFE6IJG-XOWY2Y3-GJD2ZH6-Z7POH2V-64U2JYD-CECTUAN --name desk --team",
                "share trust revoke old-phone",
            ]), subcommands: [Add.self, List.self, Remove.self, Revoke.self])

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Trust a device by its ID.",
            discussion: helpPage(
                "--team marks the device as one of your own (it may paste your clipboard and receive team-only representations); --group NAME puts it in a group; without either it is a friend. --watch, with --team, lets it attach to this device's agent as your watch.",
                examples: [
                    "share trust add 5FTPM5D-ADMTWYP-IFE6IJG-XOWY2Y3-GJD2ZH6-Z7POH2V-64U2JYD-CECTUAN --name desk --team --address 192.168.1.20:7001"
                ]))

        @OptionGroup var device: DeviceOptions

        @Argument(
            help:
                "The device's ID, as `share id` prints it on that device; with --localsend, a LocalSend device's fingerprint or the name it was seen with (share peers)."
        )
        var deviceID: String

        @Flag(
            help:
                "The device is a LocalSend device (a phone): trust it by its certificate's fingerprint. It may only send into the inbox; with --no-ask its uploads need no answer."
        )
        var localsend = false

        @Option(help: "A name to refer to the device by.")
        var name: String?

        @Option(help: ArgumentHelp("Where the device's agent listens.", valueName: "host:port"))
        var address: String?

        @Flag(help: "The device is one of your own (receives .team representations).")
        var team = false

        @Option(
            help: ArgumentHelp("The device belongs to this group (receives .group representations).", valueName: "name")
        )
        var group: String?

        @Flag(
            inversion: .prefixedNo,
            help: "With --team: the device is your watch, and may attach to this device's agent as one.")
        var watch: Bool?

        @Flag(
            inversion: .prefixedNo,
            help: ArgumentHelp(
                "Whether this device's offers to the agent wait for your answer (share pending, share accept). "
                    + "Default: they do, unless the device is one of your own (--team)."))
        var ask: Bool?

        func validate() throws {
            if team && group != nil { throw ValidationError("--team and --group exclude each other") }
            if watch == true && !team {
                throw ValidationError("--watch needs --team: a watch is one of your own devices")
            }
            if let address, PeerAddress(parsing: address) == nil {
                throw ValidationError("'\(address)' is not HOST:PORT")
            }
        }

        func run() throws {
            if localsend { return try trustLocalSend() }
            try ShareCLI.run {
                let id: DeviceID
                do {
                    id = try DeviceID(parsing: deviceID)
                } catch {
                    throw ShareError(.dataError, "'\(deviceID)' is not a device ID: \(error)")
                }
                _ = try device.loadDevice()
                let (entry, existed) = try TrustStore.update(device.paths.trustFile) { store in
                    let existing = store.device(id)
                    let relation: TrustRelation =
                        team ? .team : group.map { .group($0) } ?? existing?.relation ?? .trusted
                    let entry = TrustedDevice(
                        id: id, name: name ?? existing?.name ?? id.short,
                        address: address.flatMap(PeerAddress.init(parsing:)) ?? existing?.address, relation: relation,
                        watch: watch ?? (AccessPolicy.mayBeWatch(relation) && existing?.watch == true),
                        ask: ask ?? existing?.ask)
                    try store.add(entry)
                    return (entry, existing != nil)
                }
                tell(
                    "\(existed ? "updated" : "trusted") \(entry.name) (\(id)) as \(entry.relation)"
                        + (entry.watch ? ", a watch" : "")
                        + (entry.asks ? "; its offers wait for your answer (share pending)" : ""))
            }
        }
    }

    struct List: ParsableCommand {
        func localSendLines() -> [String] {
            LocalSendTrust.load(device.paths).devices.map { entry in
                if json {
                    let object: [String: Any] = [
                        "fingerprint": entry.fingerprint, "name": entry.name, "relation": "localsend",
                        "asks": entry.asks,
                    ]
                    let data = (try? JSONText.bytes(object, sortedKeys: true)) ?? []
                    return String(decoding: data, as: UTF8.self)
                }
                return "\(entry.name)\tLocalSend \(entry.fingerprint)\tlocalsend\(entry.asks ? "" : " (no ask)")\t-"
            }
        }

        static let configuration = CommandConfiguration(
            abstract: "List trusted devices.",
            discussion: helpPage(examples: ["share trust list", "share trust list --json"]))

        @OptionGroup var device: DeviceOptions

        @Flag(help: "One JSON object per line.")
        var json = false

        func run() throws {
            try ShareCLI.run {
                let store = try device.loadTrust()
                let phones = localSendLines()
                defer { for line in phones { say(line) } }
                if store.devices.isEmpty && phones.isEmpty && !json {
                    tell("no trusted devices; add one with: share pair, or share trust add DEVICE-ID")
                }
                for entry in store.devices {
                    if json {
                        let object: [String: Any] = [
                            "id": entry.id.description, "name": entry.name, "address": entry.address?.description ?? "",
                            "relation": entry.relation.description, "watch": entry.watch, "asks": entry.asks,
                        ]
                        let data = try JSONText.bytes(object, sortedKeys: true)
                        say(String(decoding: data, as: UTF8.self))
                    } else {
                        say(
                            "\(entry.name)\t\(entry.id)\t\(entry.relation)\(entry.watch ? " (watch)" : "")\t\(entry.address?.description ?? "-")"
                        )
                    }
                }
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop trusting a device.",
            discussion: helpPage(
                "Only on this device; share trust revoke removes it from all your own devices.",
                examples: ["share trust remove desk"]))

        @OptionGroup var device: DeviceOptions

        @Argument(help: "The device's name or ID.")
        var reference: String

        func run() throws {
            try ShareCLI.run {
                let phone = try LocalSendTrust.update(device.paths) { trust -> LocalSendTrust.Device? in
                    guard
                        let index = trust.devices.firstIndex(where: {
                            $0.name == reference || $0.fingerprint == reference.uppercased()
                        })
                    else { return nil }
                    return trust.devices.remove(at: index)
                }
                if let phone {
                    tell("no longer trusting the LocalSend device \(phone.name) (\(phone.fingerprint))")
                    return
                }
                let removed = try TrustStore.update(device.paths.trustFile) { store in
                    guard let removed = store.remove(reference) else {
                        throw ShareError(.usage, "no trusted device is called '\(reference)' (see: share trust list)")
                    }
                    return removed
                }
                let dropped = PendingOffers.forget(from: removed.id, paths: device.paths)
                tell(
                    "no longer trusting \(removed.name) (\(removed.id))"
                        + (dropped > 0 ? "; its \(dropped) offer(s) waiting for your answer are gone" : ""))
            }
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop trusting a device on all your own devices (lost or sold): a signed revocation they apply.",
            discussion: helpPage(
                "The device is removed here at once. Your other devices (trusted with --team) apply the revocation when the agent reaches them; one that is away applies it when it is next reached, and carries it on to the others.",
                examples: ["share trust revoke old-phone"]))

        @OptionGroup var device: DeviceOptions

        @Argument(help: "The device's name or ID.")
        var reference: String

        func run() throws {
            try ShareCLI.run {
                let local = try device.loadDevice()
                let removed = try TrustStore.update(device.paths.trustFile) { store in
                    guard let removed = store.remove(reference) else {
                        throw ShareError(.usage, "no trusted device is called '\(reference)' (see: share trust list)")
                    }
                    return removed
                }
                PendingOffers.forget(from: removed.id, paths: local.paths)
                let notice = try TrustNotice.make(.revoke, subject: removed.id, by: local.identity)
                try TrustNoticeBook.update(local.paths) { $0.add(notice, deliveredTo: [local.id.description]) }
                if (try? ControlClient.request(.notices, paths: local.paths)) != nil {
                    tell("revoked \(removed.name) (\(removed.id)); the agent tells your other devices")
                } else {
                    tell(
                        "revoked \(removed.name) (\(removed.id)); start this device's agent (share agent) to tell your other devices"
                    )
                }
            }
        }
    }
}

extension TrustCommand.Add {
    /// `share trust add --localsend FINGERPRINT|NAME`: a LocalSend device trusted by its certificate's fingerprint.
    func trustLocalSend() throws {
        try ShareCLI.run {
            if team || group != nil || watch != nil || address != nil {
                throw ShareError(
                    .usage,
                    "--localsend takes only --name and --ask/--no-ask: a LocalSend device only sends into the inbox")
            }
            _ = try device.loadDevice()
            var fingerprint = deviceID.uppercased()
            var seenName: String?
            if LocalSend.fingerprintBytes(fingerprint) == nil {
                guard let seen = LocalSendSeen.find(deviceID, in: LocalSendSeen.load(device.paths)) else {
                    throw ShareError(
                        .usage,
                        "'\(deviceID)' is neither a fingerprint (64 hexadecimal digits) nor a LocalSend device seen here (share peers lists them)"
                    )
                }
                fingerprint = seen.fingerprint
                seenName = seen.alias
            }
            let entry = LocalSendTrust.Device(
                fingerprint: fingerprint, name: name ?? seenName ?? String(fingerprint.prefix(8)), ask: ask,
                added: Date())
            try LocalSendTrust.update(device.paths) { trust in
                trust.devices.removeAll { $0.fingerprint == fingerprint }
                trust.devices.append(entry)
            }
            tell(
                "trusted the LocalSend device \(entry.name) (\(fingerprint))"
                    + (entry.asks
                        ? "; its uploads wait for your answer (share pending)" : "; its uploads need no answer"))
        }
    }
}
