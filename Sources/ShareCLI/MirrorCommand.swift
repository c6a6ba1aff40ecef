import ArgumentParser
import FoundationEssentials
import ShareThreads
import ShareCommandLine
import ShareEngine
import ShareKit
import ShareTrust

struct MirrorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mirror",
        abstract: "Keep a copy of a folder current on one of your devices (a send-only shared folder).",
        discussion: helpPage(
            "The folder becomes a send-only shared folder (share sync) with that device: the agent watches it and, a moment after it changes, the device's agent brings its copy in step — new and changed files (each as a delta against the copy's version), renamed ones (moved where the content already is) and removed ones. A device that is away catches up when it is back. The copy lives in the receiving agent's inbox for this device, in a folder of the same name (another name when that is taken by another folder); a file changed or removed there is put back, what was changed kept beside it as NAME.sync-conflict-DATE-TIME-DEVICE.EXT. One way only: nothing changed on the copy comes back. Only your own devices (trusted with --team) keep mirrored folders.",
            "share sync lists it, with how the copy stands; share sync remove ID stops it.",
            examples: ["share mirror ~/Documents/thesis --to desk", "share mirror photos --to desk --wait 60"]))

    @OptionGroup var device: DeviceOptions

    @Argument(help: ArgumentHelp("The folder to mirror.", valueName: "folder"))
    var folder: String

    @Option(help: ArgumentHelp("The device that keeps the copy (a trusted device's name or ID).", valueName: "device"))
    var to: String

    @Option(
        help: ArgumentHelp(
            "Wait up to this many seconds for the copy to be current; exit 0 then, 69 if it is not yet.",
            valueName: "seconds"))
    var wait: Double?

    func run() throws {
        try ShareCLI.run {
            let url = URL(fileURLWithPath: folder).standardizedFileURL.resolvingSymlinksInPath()
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isFolder), isFolder.boolValue else {
                throw ShareError(.noInput, "\(folder) is not a folder; share mirror keeps a folder current")
            }
            let trust = try device.loadTrust()
            guard let peer = trust.find(to) else {
                throw ShareError(.usage, "no trusted device is called '\(to)' (see: share trust list)")
            }
            let listed = try folderRequest(.folders(), device: device).folders ?? []
            var id: String
            if let existing = listed.first(where: {
                $0.settings.path == url.path && $0.settings.devices.contains(peer.id.description)
            }) {
                id = existing.settings.id
            } else {
                var settings = SharedFolderSettings(
                    id: SharedFolderSettings.newID(), label: url.lastPathComponent, path: url.path, kind: .sendOnly,
                    devices: [peer.id.description])
                settings.mirror = true
                id = (try folderRequest(.folderAdd(settings), device: device).folder ?? settings).id
            }
            tell("mirroring \(url.path) to \(peer.name) (folder \(id)); share sync shows how the copy stands")
            guard let wait else { return }
            let deadline = Date().addingTimeInterval(wait)
            // Current: this device holds its folder as scanned, and the device holds it too.
            var reason: String?
            func current() throws -> Bool {
                let folder = try folderRequest(.folders(), device: device).folders?.first { $0.settings.id == id }
                let status = folder?.peers.first { $0.id == peer.id.description }
                reason = status?.reason ?? reason
                return folder?.lastScan != nil && status.map { $0.connected && $0.inStep } ?? false
            }
            while try !current() {
                guard Date() < deadline else {
                    throw ShareError(
                        .unavailable,
                        "the copy on \(peer.name) is not current yet"
                            + (reason.map { ": \($0)" } ?? "; it keeps being kept"))
                }
                Threads.sleep(seconds: 0.2)
            }
            tell("the copy on \(peer.name) is current")
        }
    }
}
