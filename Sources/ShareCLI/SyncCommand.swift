import ArgumentParser
import FoundationEssentials
import ShareText
import ShareThreads
import ShareCommandLine
import ShareEngine
import ShareKit
import ShareTrust

struct SyncCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Folders kept the same on your devices, both ways (the agent keeps them).",
        discussion: helpPage(
            "A shared folder has an ID (never its name: two folders of one name are two folders) and the devices it is shared with: your own devices (trusted with --team). Each device keeps an index of what it holds; changes made on any device reach the others, through any device that is on (a change made on the laptop reaches the phone through the desk while the laptop is off). Two devices changing the same file at once: one version wins everywhere, the other is kept beside it as NAME.sync-conflict-DATE-TIME-DEVICE.EXT. A deletion reaches every device; a deletion at the same time as an edit keeps the edit.",
            "Not synced: what .shareignore at the folder's root names, one pattern a line (the file itself stays on this device): * within a name, ** across folders, ? one character, [a-z] a set; /pattern from the root only, pattern/ folders only; the first pattern that matches decides, and !pattern takes back what it matches; (?i) ignores case, (?d) lets an ignored file go with a folder removed elsewhere; # and // begin comments. A folder ignored ignores all it holds. Ignoring a path never deletes it anywhere.",
            "Versions: a file replaced or removed here by another device's change is kept in the folder's .share-versions for 30 days (--keep-versions DAYS when adding or accepting; 0 keeps none); share sync versions lists them, share sync restore puts one back (and it syncs like any change).",
            "Protection: a folder whose marker (.sharefolder) is gone — an unmounted disk, a moved folder — stops, and nothing in it is taken for deleted until it is back; a scan that finds more than half of a folder gone at once holds those deletions until share sync allow-deletes ID.",
            "Without a subcommand, every folder: its state (up to date, syncing, waiting for a device, out of sync), its devices with when each was last in step, its conflicts, and the folders your other devices offer this one.",
            examples: [
                "share sync add ~/thesis --with desk --with phone", "share sync",
                "share sync accept abcde-fghij-klmno --into ~/thesis",
                "share sync remove abcde-fghij-klmno",
            ]),
        subcommands: [
            SyncList.self, SyncAdd.self, SyncAccept.self, SyncDecline.self, SyncRemove.self, SyncUnshare.self,
            SyncSet.self, SyncPause.self, SyncResume.self, SyncRevert.self, SyncOverride.self, SyncRescan.self,
            SyncAllowDeletes.self,
            SyncVersions.self, SyncRestore.self, SyncChanges.self,
        ],
        defaultSubcommand: SyncList.self)
}

/// The agent's answer to a folder request, or one clear line when no agent runs.
func folderRequest(_ request: ControlRequest, device: DeviceOptions) throws -> ControlResponse {
    guard ControlClient.agentIsRunning(device.paths) else {
        throw ShareError(
            .unavailable, "shared folders are kept by the agent, which is not running; start it with: share agent")
    }
    let answer = try ControlClient.request(request, paths: device.paths)
    guard answer.ok else { throw ShareError(.usage, answer.error ?? "the agent refused") }
    return answer
}

struct SyncList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "Every shared folder and its state, and the folders offered to this device.",
        discussion: helpPage(
            "The state of each folder: up to date, scanning, syncing (files and bytes to come, the rate in bytes and files a second, about how long is left), waiting for a device, out of sync (each path and why), holding deletions, or stopped (its marker gone); its devices with when each was last in step; its conflict copies with both versions' device and time. --json gives all of it as one object; --wait waits until every folder is in step.",
            examples: ["share sync", "share sync list --json", "share sync --wait 60"]))

    @OptionGroup var device: DeviceOptions

    @Flag(help: "One JSON object: the folders and their state, and the offers.")
    var json = false

    @Option(
        help: ArgumentHelp(
            "Wait up to this many seconds until every folder is up to date and in step with every device it is shared with; exit 0 then, 69 if not.",
            valueName: "seconds"))
    var wait: Double?

    func run() throws {
        try ShareCLI.run {
            // The agent answers once every folder settled (or at the deadline); an agent of an earlier version
            // answers at once, and is asked again.
            let deadline = Date().addingTimeInterval(wait ?? 0)
            var answer = try folderRequest(.folders(settledWithin: wait), device: device)
            while wait != nil, !FolderStatus.settled(answer.folders ?? []), Date() < deadline {
                Threads.sleep(seconds: 0.2)
                answer = try folderRequest(
                    .folders(settledWithin: deadline.timeIntervalSinceNow), device: device)
            }
            if json {
                struct Listing: Encodable {
                    var folders: [FolderStatus]
                    var offers: [FolderOffer]
                    var declined: [FolderOffer]
                }
                let data = try JSONEncoder.iso8601.encode(
                    Listing(
                        folders: answer.folders ?? [], offers: answer.offers ?? [],
                        declined: answer.declinedOffers ?? []))
                say(String(decoding: data, as: UTF8.self))
            } else {
                Self.print(answer.folders ?? [], offers: answer.offers ?? [], declined: answer.declinedOffers ?? [])
            }
            if let wait, !FolderStatus.settled(answer.folders ?? []) {
                // Which folders, and which devices have not caught up (the listing above says the rest).
                let behind = (answer.folders ?? []).filter { !FolderStatus.settled([$0]) }.map { folder in
                    let late = folder.peers.filter { !$0.inStep }.map {
                        $0.connected
                            ? $0.name
                            : $0.notSharing == true ? $0.nameAndWhy : "\($0.name) (off)"
                    }
                    return "\(folder.settings.label): \(folder.state) here"
                        + (late.isEmpty ? "" : ", \(late.joined(separator: " and ")) not in step")
                }
                throw ShareError(
                    .unavailable,
                    "not every folder is in step yet after \(Self.seconds(wait)) (\(behind.joined(separator: "; "))); "
                        + "share sync shows where each stands")
            }
        }
    }

    /// `2 s`, `1.5 s`.
    static func seconds(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? "\(Int(value)) s" : "\(value) s"
    }

    static func print(_ folders: [FolderStatus], offers: [FolderOffer], declined: [FolderOffer] = []) {
        if folders.isEmpty && offers.isEmpty && declined.isEmpty {
            say("no shared folders; share one with: share sync add FOLDER --with DEVICE")
            return
        }
        for folder in folders {
            let settings = folder.settings
            var line = "\(settings.label) (\(settings.id)) \(settings.path), \(settings.kind.rawValue): \(folder.state)"
            line += " — \(folder.files) file(s), \(ProgressReporter.bytes(folder.bytes))"
            if folder.neededFiles > 0 {
                line += "; \(folder.neededFiles) file(s), \(ProgressReporter.bytes(folder.neededBytes)) to come"
                if let rate = folder.rate, rate > 0, let left = folder.secondsLeft {
                    line += " at \(ProgressReporter.bytes(UInt64(rate)))/s"
                    if let files = folder.fileRate, files >= 1 { line += " (\(Int(files.rounded())) files/s)" }
                    line += ", about \(ProgressReporter.duration(left)) left"
                }
            }
            if folder.bytesReceived > 0 || folder.bytesFromLocal > 0 {
                line +=
                    "; \(ProgressReporter.bytes(folder.bytesReceived)) crossed, "
                    + "\(ProgressReporter.bytes(folder.bytesFromLocal)) made from copies here"
            }
            say(line)
            if folder.peers.isEmpty, folder.settings.mirror != true {
                say("  shared with no device: share sync add \(folder.settings.path) --with DEVICE shares it")
            }
            for peer in folder.peers {
                // When it was last seen, linked, holding what this device holds (kept through restarts).
                let when = [
                    peer.differing.map { "\($0) file(s) differ" },
                    peer.lastInStep.map { "last in step \(Self.ago($0))" },
                ].compactMap { $0 }.joined(separator: ", ")
                let away =
                    peer.notSharing == true
                    ? "connected, \(peer.notSharingWords)"
                    : peer.reason.map { "away (\($0))" } ?? "away"
                say(
                    "  \(peer.name): \(peer.connected ? "connected" : away), \(peer.inStep && (peer.connected || when.isEmpty) ? "in step" : when.isEmpty ? "not in step" : when)"
                )
            }
            for conflict in folder.conflicts {
                let loser = "\(conflict.loserName ?? conflict.loser)'s of \(conflict.loserTime.map(Self.time) ?? "?")"
                let winner =
                    conflict.winnerIsFolder == true
                    ? "a folder is there (files were made in it on another device meanwhile)"
                    : (conflict.winnerName ?? conflict.winner).map {
                        "\($0)'s of \(conflict.winnerTime.map(Self.time) ?? "?") is there"
                    }
                say(
                    "  conflict: \(conflict.path) — \(loser) kept as \(conflict.copy)"
                        + (winner.map { "; \($0)" } ?? ""))
            }
            // A problem of the whole folder has no path.
            for problem in folder.problems.prefix(10) {
                say("  out of sync: " + (problem.path.isEmpty ? "" : "\(problem.path): ") + problem.reason)
            }
            if folder.problems.count > 10 {
                // The agent lists up to 100.
                let more = folder.problems.count - 10
                say("  … and \(more)\(folder.problems.count >= 100 ? " or more" : "") (share sync --json lists them)")
            }
        }
        for offer in offers {
            say(
                "offered: \(offer.label) (\(offer.id)) from \(offer.fromName); share sync accept \(offer.id) --into FOLDER, or share sync decline \(offer.id)"
            )
        }
        for offer in declined {
            say(
                "declined: \(offer.label) (\(offer.id)) from \(offer.fromName); share sync accept \(offer.id) --into FOLDER takes it after all"
            )
        }
    }

    static func ago(_ date: Date) -> String {
        let seconds = Int(-date.timeIntervalSinceNow)
        if seconds < 5 { return "a moment ago" }
        if seconds < 120 { return "\(seconds) s ago" }
        if seconds < 7200 { return "\(seconds / 60) min ago" }
        return "\(seconds / 3600) h ago"
    }

    static func time(_ date: Date) -> String {
        TimeText.string(secondsSince1970: date.timeIntervalSince1970, format: "%Y-%m-%d %H:%M:%S")
    }
}

struct SyncAdd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add", abstract: "Share a folder with some of your devices (each is offered it).",
        discussion: helpPage(
            "The folder gets an ID and a marker (.sharefolder) at its root; each device named is offered it (share sync accept on that device, or at once where its agent.json says so). Send-only: this device's files are the truth (override); receive-only: what changes here stays here (revert). A .shareignore at the root lists what is not synced (see share sync --help). A folder shared already is shared with the devices named too (a new phone): it keeps its ID, type and settings, and the devices that have it learn of the new one.",
            examples: [
                "share sync add ~/thesis --with desk --with phone", "share sync add ~/photos --with desk --send-only",
                "share sync add ~/backup --with laptop --receive-only", "share sync add ~/thesis --with tablet",
            ]))

    @OptionGroup var device: DeviceOptions

    @Argument(help: ArgumentHelp("The folder to share.", valueName: "folder"))
    var folder: String

    @Option(
        name: .customLong("with"), help: ArgumentHelp("A device to share it with (repeatable).", valueName: "device"))
    var devices: [String] = []

    @Option(help: ArgumentHelp("What the folder is called on the others (default: its name).", valueName: "name"))
    var label: String?

    @Flag(help: "This device's files are the truth: changes made elsewhere are not applied here.")
    var sendOnly = false

    @Flag(help: "This device takes what the others have; its own changes stay here, never sent.")
    var receiveOnly = false

    @OptionGroup var kept: KeptOptions

    func run() throws {
        try ShareCLI.run {
            guard !devices.isEmpty else {
                throw ShareError(.usage, "name at least one device to share \(folder) with: --with DEVICE")
            }
            guard !(sendOnly && receiveOnly) else {
                throw ShareError(.usage, "a folder is --send-only or --receive-only, not both")
            }
            let url = URL(fileURLWithPath: folder).standardizedFileURL.resolvingSymlinksInPath()
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isFolder) else {
                throw ShareError(.noInput, "\(folder) does not exist; name a folder to share")
            }
            guard isFolder.boolValue else { throw ShareError(.noInput, "\(folder) is not a folder") }
            var settings = SharedFolderSettings(
                id: SharedFolderSettings.newID(), label: label ?? SharedFolderSettings.label(url.lastPathComponent),
                path: url.path,
                devices: devices)
            settings.kind = sendOnly ? .sendOnly : receiveOnly ? .receiveOnly : .sendReceive
            try kept.check()
            settings.keepVersions = kept.keepVersions
            settings.maxConflicts = kept.maxConflicts
            let answer = try folderRequest(.folderAdd(settings), device: device)
            let made = answer.folder ?? settings
            // A folder shared already keeps its ID: it is shared with those devices too.
            let too = made.id == settings.id ? "" : " too"
            tell(
                "sharing \(made.path) as \(made.label) (\(made.id)) with \(devices.joined(separator: ", "))\(too); share sync shows how it stands"
            )
        }
    }
}

/// What a folder keeps of the versions other devices' changes replace (`share sync add`, `share sync set`).
struct KeptOptions: ParsableArguments {
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Keep files replaced or removed by another device's change this many days in .share-versions (0: none).",
            valueName: "days"))
    var keepVersions: Int?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "How many conflict copies of one file are kept, the oldest going first (default 10; 0: none, the losing version goes to the versions; -1: no limit).",
            valueName: "n"))
    var maxConflicts: Int?

    /// One line and exit 64 for a number out of range.
    func check() throws {
        if let keepVersions, keepVersions < 0 {
            throw ShareError(.usage, "--keep-versions takes a number of days, 0 or more")
        }
        if let maxConflicts, maxConflicts < -1 {
            throw ShareError(.usage, "--max-conflicts takes a number, 0 or more (or -1: no limit)")
        }
    }
}

struct SyncAccept: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accept", abstract: "Accept a folder another of your devices offered.",
        discussion: helpPage(
            "The folder is synced into the folder given, created if missing (its files are kept: what differs is synced like any change); without --into, into agent.json's folders.path or the inbox for the device that offered it. A folder declined before is taken the same way (share sync lists it as declined).",
            examples: [
                "share sync accept abcde-fghij-klmno --into ~/thesis", "share sync accept abcde-fghij-klmno",
                "share sync accept abcde-fghij-klmno --into ~/backup --receive-only",
            ]))

    @OptionGroup var device: DeviceOptions

    @Argument(
        help: ArgumentHelp(
            "The folder offered: its ID, or its label when no other offer has it (share sync lists the offers).",
            valueName: "id"))
    var offer: String

    @Option(
        help: ArgumentHelp(
            "Where it goes here (default: a folder of its name in the agent's place for it).", valueName: "folder"))
    var into: String?

    @Flag(help: "This device's files are the truth here: changes made elsewhere are not applied.")
    var sendOnly = false

    @Flag(help: "This device takes what the others have; changes made here stay here, listed (share sync revert).")
    var receiveOnly = false

    @OptionGroup var kept: KeptOptions

    func run() throws {
        try ShareCLI.run {
            guard !(sendOnly && receiveOnly) else {
                throw ShareError(.usage, "a folder is --send-only or --receive-only, not both")
            }
            let path = into.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
            let kind: SharedFolderSettings.Kind? = sendOnly ? .sendOnly : receiveOnly ? .receiveOnly : nil
            try kept.check()
            let id = try resolveFolder(offer, device: device, offers: true)
            let answer = try folderRequest(
                .folderAccept(
                    id: id, path: path, kind: kind, keepVersions: kept.keepVersions, maxConflicts: kept.maxConflicts),
                device: device)
            tell("syncing \(answer.folder?.label ?? id) into \(answer.folder?.path ?? path ?? "?")")
        }
    }
}

/// The folder a subcommand acts on, by its ID, label or path, and this device's options.
struct FolderID: ParsableArguments {
    @OptionGroup var device: DeviceOptions

    @Argument(
        help: ArgumentHelp(
            "The folder: its ID, its label when no other folder here has it, or its path.", valueName: "folder"))
    var id: String

    /// The folder's ID (`resolveFolder`).
    func resolved(offers: Bool = false) throws -> String {
        try resolveFolder(id, device: device, offers: offers)
    }
}

/// A folder's ID: `id` itself when a folder here (or, with `offers`, a folder offered) has that ID; else the one
/// folder labelled so (a label two share is refused, naming their IDs), else the folder at that path. An ID
/// nothing matches is left to the agent to refuse.
func resolveFolder(_ id: String, device: DeviceOptions, offers: Bool) throws -> String {
    guard ControlClient.agentIsRunning(device.paths),
        let answer = try? ControlClient.request(.folders(settledWithin: nil), paths: device.paths), answer.ok
    else { return id }
    return try resolveFolder(id, in: answer, offers: offers)
}

/// As above, among the folders and offers of an answer to `folders`.
func resolveFolder(_ id: String, in answer: ControlResponse, offers: Bool) throws -> String {
    let named: [(id: String, label: String, path: String?)] =
        offers
        ? ((answer.offers ?? []) + (answer.declinedOffers ?? [])).map { ($0.id, $0.label, nil) }
        : (answer.folders ?? []).map { ($0.settings.id, $0.settings.label, $0.settings.path) }
    if named.contains(where: { $0.id == id }) { return id }
    let labelled = named.filter { $0.label == id }
    if labelled.count == 1 { return labelled[0].id }
    if labelled.count > 1 {
        throw ShareError(
            .usage,
            "\(labelled.count) \(offers ? "folders offered" : "shared folders") are labelled \(id): "
                + labelled.map { "\($0.id)\($0.path.map { " (\($0))" } ?? "")" }.joined(separator: ", ")
                + "; name one by its ID")
    }
    let path = URL(fileURLWithPath: id).standardizedFileURL.resolvingSymlinksInPath().path
    if let found = named.first(where: {
        $0.path.map { URL(fileURLWithPath: $0).standardizedFileURL.resolvingSymlinksInPath().path } == path
    }) {
        return found.id
    }
    return id
}

struct SyncDecline: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decline", abstract: "Decline a folder offered.",
        discussion: helpPage(
            "The folder is not offered again by that device; the device that shares it sees that you declined it. share sync lists what you declined, and share sync accept ID --into FOLDER takes it after all.",
            examples: ["share sync decline abcde-fghij-klmno"]))

    @OptionGroup var folder: FolderID

    func run() throws {
        try ShareCLI.run {
            let id = try folder.resolved(offers: true)
            _ = try folderRequest(.folderDecline(id: id), device: folder.device)
            tell("declined \(id)")
        }
    }
}

struct SyncRemove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove", abstract: "Stop syncing a folder here (its files stay; the others keep theirs).",
        discussion: helpPage(
            "This device stops syncing the folder and forgets its index; its files stay where they are, and the other devices go on with theirs.",
            examples: ["share sync remove abcde-fghij-klmno"]))

    @OptionGroup var folder: FolderID

    func run() throws {
        try ShareCLI.run {
            let id = try folder.resolved()
            let answer = try folderRequest(.folderRemove(id: id), device: folder.device)
            tell(
                "no longer syncing \(answer.folder?.label ?? id) here; its files stay in \(answer.folder?.path ?? "place")"
            )
        }
    }
}

struct SyncRevert: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revert",
        abstract: "Receive-only: bring the others' versions back over what was changed here (files added here go).",
        discussion: helpPage(
            "What was changed or added here in a receive-only folder goes, and the others' versions come back.",
            examples: ["share sync revert abcde-fghij-klmno"]))

    @OptionGroup var folder: FolderID

    func run() throws {
        try ShareCLI.run {
            let id = try folder.resolved()
            let answer = try folderRequest(.folderRevert(id: id), device: folder.device)
            tell(
                "reverting what was changed in \(answer.folder?.label ?? id) here; the others' versions come back"
            )
        }
    }
}

struct SyncOverride: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "override",
        abstract: "Send-only: push this device's files again everywhere, over what was changed elsewhere.",
        discussion: helpPage(
            "What was changed elsewhere in a send-only folder is replaced, on every device, by this device's version.",
            examples: ["share sync override abcde-fghij-klmno"]))

    @OptionGroup var folder: FolderID

    func run() throws {
        try ShareCLI.run {
            let id = try folder.resolved()
            let answer = try folderRequest(.folderOverride(id: id), device: folder.device)
            tell("pushing this device's \(answer.folder?.label ?? id) again to every device")
        }
    }
}

struct SyncRescan: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rescan",
        abstract:
            "Scan the whole folder now (the agent watches for changes and scans everything every 5 minutes anyway).",
        discussion: helpPage(
            "Answers once the scan is done, with how long it took.",
            examples: ["share sync rescan abcde-fghij-klmno", "share sync rescan abcde-fghij-klmno --json"]))

    @OptionGroup var folder: FolderID

    @Flag(help: "The folder's state after the scan, as JSON.")
    var json = false

    func run() throws {
        try ShareCLI.run {
            let id = try folder.resolved()
            let answer = try folderRequest(.folderRescan(id: id), device: folder.device)
            guard let status = answer.folders?.first else { throw ShareError(.failure, "the agent said nothing") }
            if json {
                say(String(decoding: try JSONEncoder.iso8601.encode(status), as: UTF8.self))
                return
            }
            tell(
                "scanned \(status.settings.label): \(status.files) files, \(ProgressReporter.bytes(status.bytes)) in "
                    + Format.c("%.2f s", status.lastScanSeconds ?? 0))
        }
    }
}

struct SyncAllowDeletes: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "allow-deletes",
        abstract:
            "Let the deletions go that a scan held back: more than half of the folder gone at once (an unmounted disk, a folder emptied by mistake) is not passed on without this.",
        discussion: helpPage(
            "share sync shows such a folder as holding deletions, with how many.",
            examples: ["share sync allow-deletes abcde-fghij-klmno"]))

    @OptionGroup var folder: FolderID

    func run() throws {
        try ShareCLI.run {
            let id = try folder.resolved()
            let answer = try folderRequest(.folderAllowDeletes(id: id), device: folder.device)
            tell(
                "the deletions in \(answer.folder?.label ?? id) go to the other devices with the next scan, now")
        }
    }
}

struct SyncUnshare: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unshare",
        abstract: "Stop sharing a folder with some of its devices (it stays synced here and with the others).",
        discussion: helpPage(
            "Nothing of the folder goes to those devices from this one, or comes from them, from then on; each sees it as not shared by this device and keeps its own copy. What your other devices say they share it with does not bring them back; share sync add PATH --with DEVICE shares it with them again.",
            examples: ["share sync unshare abcde-fghij-klmno --with phone"]))

    @OptionGroup var folder: FolderID

    @Option(
        name: .customLong("with"),
        help: ArgumentHelp("A device to stop sharing it with (repeatable).", valueName: "device"))
    var devices: [String] = []

    func run() throws {
        try ShareCLI.run {
            let id = try folder.resolved()
            guard !devices.isEmpty else {
                throw ShareError(.usage, "name a device to stop sharing \(id) with: --with DEVICE")
            }
            let answer = try folderRequest(.folderUnshare(id: id, devices: devices), device: folder.device)
            let label = answer.folder?.label ?? id
            tell(
                "\(label) (\(id)) is no longer shared with \(devices.joined(separator: ", ")) here; "
                    + "share sync add \(answer.folder?.path ?? "PATH") --with DEVICE shares it again")
        }
    }
}

struct SyncSet: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract:
            "Change a folder's own settings here: its type, its label, how long versions are kept, how many conflict copies.",
        discussion: helpPage(
            "Each device keeps its own: what one sets here changes nothing on the others. A receive-only folder made send-receive or send-only sends what was changed here meanwhile; a send-only one made send-receive or receive-only takes what the others changed. The label is what this device calls the folder (and what it offers it as to a device that has not accepted it yet); its ID stays.",
            examples: [
                "share sync set abcde-fghij-klmno --type receive-only",
                "share sync set abcde-fghij-klmno --label Thesis",
                "share sync set abcde-fghij-klmno --keep-versions 90 --max-conflicts -1",
            ]))

    @OptionGroup var folder: FolderID

    @Option(
        name: .customLong("type"),
        help: ArgumentHelp("send-receive, send-only or receive-only.", valueName: "type"))
    var type: String?

    @Option(help: ArgumentHelp("What this device calls the folder.", valueName: "name"))
    var label: String?

    @OptionGroup var kept: KeptOptions

    func run() throws {
        try ShareCLI.run {
            let id = try folder.resolved()
            guard type != nil || label != nil || kept.keepVersions != nil || kept.maxConflicts != nil else {
                throw ShareError(
                    .usage, "name a setting to change: --type, --label, --keep-versions or --max-conflicts")
            }
            try kept.check()
            let kind = try type.map { name in
                guard let kind = SharedFolderSettings.Kind(rawValue: name) else {
                    throw ShareError(
                        .usage, "--type is send-receive, send-only or receive-only, not '\(name)'")
                }
                return kind
            }
            let answer = try folderRequest(
                .folderSet(
                    id: id, kind: kind, label: label, keepVersions: kept.keepVersions,
                    maxConflicts: kept.maxConflicts),
                device: folder.device)
            guard let settings = answer.folder else { throw ShareError(.failure, "the agent said nothing") }
            let days = settings.keepVersions ?? 30
            let copies = settings.maxConflicts ?? 10
            tell(
                "\(settings.label) (\(id)), \(settings.kind.rawValue): versions kept \(days == 0 ? "not at all" : "\(days) days"), "
                    + "\(copies < 0 ? "every conflict copy" : "\(copies) conflict copies of a file at most") kept")
        }
    }
}

struct SyncPause: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause",
        abstract: "Pause a folder here: nothing in it is scanned, taken from the others or sent until it is resumed.",
        discussion: helpPage(
            "The others see it as not shared here meanwhile; its index stays, and share sync resume catches up with what changed on every side. The setting outlasts a restart.",
            examples: ["share sync pause abcde-fghij-klmno"]))

    @OptionGroup var folder: FolderID

    func run() throws {
        try ShareCLI.run {
            let id = try folder.resolved()
            let answer = try folderRequest(.folderPause(id: id, paused: true), device: folder.device)
            tell(
                "paused \(answer.folder?.label ?? id) (\(id)) here; share sync resume \(id) takes it up again"
            )
        }
    }
}

struct SyncResume: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume", abstract: "Resume a paused folder: it catches up with what changed meanwhile.",
        discussion: helpPage(
            "A full scan of it runs at once, and what changed on the others' side comes.",
            examples: ["share sync resume abcde-fghij-klmno"]))

    @OptionGroup var folder: FolderID

    func run() throws {
        try ShareCLI.run {
            let id = try folder.resolved()
            let answer = try folderRequest(.folderPause(id: id, paused: false), device: folder.device)
            tell("resumed \(answer.folder?.label ?? id) (\(id)); share sync shows it catch up")
        }
    }
}

struct SyncVersions: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "versions",
        abstract: "The versions a folder keeps of files replaced or removed by another device.",
        discussion: helpPage(
            "Newest first: when each was replaced or removed, its size and its path. They are kept in .share-versions inside the folder, as long as the folder keeps them (30 days unless set otherwise).",
            examples: [
                "share sync versions abcde-fghij-klmno", "share sync versions abcde-fghij-klmno notes/plan.txt --json",
            ]))

    @OptionGroup var folder: FolderID

    @Argument(help: ArgumentHelp("A file or folder in it (default: everything).", valueName: "path"))
    var path: String?

    @Flag(help: "The versions as one JSON array.")
    var json = false

    func run() throws {
        try ShareCLI.run {
            let id = try folder.resolved()
            let answer = try folderRequest(.folderVersions(id: id, path: path), device: folder.device)
            let versions = answer.versions ?? []
            if json {
                say(String(decoding: try JSONEncoder.iso8601.encode(versions), as: UTF8.self))
                return
            }
            guard !versions.isEmpty else {
                tell(path.map { "no version of \($0) is kept" } ?? "no versions are kept in this folder")
                return
            }
            for version in versions {
                say("\(SyncRestore.format(version.time))  \(ProgressReporter.bytes(version.size))  \(version.path)")
            }
        }
    }
}

struct SyncChanges: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "changes",
        abstract: "What other devices changed in a folder, as it was applied here: added, changed, renamed, deleted.",
        discussion: helpPage(
            "Newest first, since the agent started (the last 200 of each folder): when, which device's change, what became of the path (added, changed, renamed or deleted; a file, folder or link) and the path. A rename applied by moving the file here names the path it had (a renamed file whose content had to come shows as the old path deleted and the new one added); a change that met one made here names the conflict copy this device's version was kept as. What was changed here is not listed: it is what the others list.",
            examples: [
                "share sync changes", "share sync changes thesis", "share sync changes abcde-fghij-klmno --json",
            ]))

    @OptionGroup var device: DeviceOptions

    @Argument(
        help: ArgumentHelp(
            "The folder: its ID, its label when no other folder here has it, or its path (default: every folder).",
            valueName: "folder"))
    var folder: String?

    @Flag(help: "The changes as one JSON object: each folder's ID and its changes, the latest last.")
    var json = false

    func run() throws {
        try ShareCLI.run {
            let answer = try folderRequest(.folders(settledWithin: nil), device: device)
            let id = try folder.map { try resolveFolder($0, in: answer, offers: false) }
            let folders = (answer.folders ?? []).filter { id == nil || $0.settings.id == id }
            if let id, folders.isEmpty {
                throw ShareError(.usage, "no shared folder \(id) (share sync lists them)")
            }
            if json {
                let object = Dictionary(
                    folders.map { ($0.settings.id, $0.recentChanges ?? []) }, uniquingKeysWith: { first, _ in first })
                say(String(decoding: try JSONEncoder.iso8601.encode(object), as: UTF8.self))
                return
            }
            for status in folders {
                let changes = status.recentChanges ?? []
                let name = "\(ProgressReporter.neutralized(status.settings.label)) (\(status.settings.id))"
                guard !changes.isEmpty else {
                    say("\(name): nothing changed by another device since the agent started")
                    continue
                }
                say("\(name): \(changes.count) change(s) by other devices, newest first")
                for change in changes.reversed() {
                    var line =
                        "  \(SyncList.time(change.at))  \(ProgressReporter.neutralized(change.by))  \(change.action) \(change.kind)  \(ProgressReporter.neutralized(change.path))"
                    if let from = change.from { line += " (was \(ProgressReporter.neutralized(from)))" }
                    if let copy = change.keptAs {
                        line += " (this device's version kept as \(ProgressReporter.neutralized(copy)))"
                    }
                    say(line)
                }
            }
            if folders.isEmpty { say("no shared folders; share one with: share sync add FOLDER --with DEVICE") }
        }
    }
}

struct SyncRestore: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore", abstract: "Put a kept version of a file back; it then syncs like any change made here.",
        discussion: helpPage(
            "The newest version kept, or with --at the newest kept at or before that time (as share sync versions shows it, or ISO 8601). What is at the path now is kept as a version first.",
            examples: [
                "share sync restore abcde-fghij-klmno notes/plan.txt",
                "share sync restore abcde-fghij-klmno notes/plan.txt --at 20261127-093000",
            ]))

    @OptionGroup var folder: FolderID

    @Argument(help: ArgumentHelp("The file's path in the folder.", valueName: "path"))
    var path: String

    @Option(help: ArgumentHelp("The version kept at or before this time.", valueName: "time"))
    var at: String?

    static func format(_ date: Date) -> String {
        TimeText.string(secondsSince1970: date.timeIntervalSince1970, format: "%Y%m%d-%H%M%S")
    }

    /// `YYYYMMDD-HHMMSS`, `YYYY-MM-DDTHH:MM:SS` with a zone (`Z`, `+01:00`), or without one, `YYYY-MM-DD HH:MM:SS`
    /// and `YYYY-MM-DD` (local time).
    static func parse(_ text: String) -> Date? {
        if let seconds = TimeText.seconds(compact: text) { return Date(timeIntervalSince1970: seconds) }
        if text.count > 19, let date = InternetDate.date(text) { return date }
        let characters = Array(text)
        let dashes = characters.count >= 10 && characters[4] == "-" && characters[7] == "-"
        let clock =
            characters.count == 19 && (characters[10] == "T" || characters[10] == " ") && characters[13] == ":"
            && characters[16] == ":"
        guard dashes, characters.count == 10 || clock else { return nil }
        let digits = String(characters.filter(\.isNumber)) + (clock ? "" : "000000")
        guard digits.count == 14 else { return nil }
        return TimeText.seconds(compact: digits).map { Date(timeIntervalSince1970: $0) }
    }

    func run() throws {
        try ShareCLI.run {
            let id = try folder.resolved()
            var time: Date?
            if let at {
                guard let parsed = Self.parse(at) else {
                    throw ShareError(
                        .usage,
                        "--at \(at) is not a time: write it as share sync versions shows it (20261127-093000) or 2026-11-27T09:30:00"
                    )
                }
                time = parsed
            }
            let answer = try folderRequest(.folderRestore(id: id, path: path, at: time), device: folder.device)
            guard let version = answer.versions?.first else { throw ShareError(.failure, "the agent said nothing") }
            tell(
                "put back \(version.path) as it was at \(Self.format(version.time)); it syncs to the other devices now")
        }
    }
}
