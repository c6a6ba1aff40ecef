import ArgumentParser
import Foundation
import ShareCommandLine
import ShareEngine
import ShareKit
import ShareTrust

struct MirrorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mirror",
        abstract: "Keep a copy of a folder current on one of your devices (a job of the agent).",
        discussion: helpPage(
            "The agent watches the folder and, about a second after it changes, sends what changed: new and changed files (each as a delta against the copy's earlier version), renamed and removed ones. A device that is away catches up when it is back. The copy lives in the receiving device's inbox (or where share receive saves), in a folder of the same name; a file changed there since the last update is kept aside as NAME.sync-conflict-DATE-TIME.EXT, never overwritten. One way only: nothing changed on the copy comes back. Only your own devices (trusted with --team) keep mirrored folders.",
            "share jobs lists the job (state mirroring when the copy is current); share cancel ID stops it.",
            examples: ["share mirror ~/Documents/thesis --to desk", "share mirror photos --to desk --wait 60"]))

    @OptionGroup var device: DeviceOptions

    @Argument(help: ArgumentHelp("The folder to mirror.", valueName: "folder"))
    var folder: String

    @Option(help: ArgumentHelp("The device that keeps the copy (a trusted device's name or ID).", valueName: "device"))
    var to: String

    @Option(
        help: ArgumentHelp(
            "Wait up to this many seconds for the first update to be delivered; exit 0 once the copy is current.",
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
            guard ControlClient.agentIsRunning(device.paths) else {
                throw ShareError(
                    .unavailable, "share mirror is a job of the agent, which is not running; start it with: share agent"
                )
            }
            var job = OutboxJob(to: peer.name)
            job.mirror = MirrorJob(folder: url.path)
            let answer = try ControlClient.request(.send(job), paths: device.paths)
            let queued = answer.job ?? job
            tell(
                "mirroring \(url.path) to \(peer.name) (job \(queued.id)); share jobs lists it, share cancel \(queued.id) stops it"
            )
            guard let wait else { return }
            let waited = try ControlClient.request(.wait(id: queued.id, timeout: wait), paths: device.paths)
            guard let now = waited.job, now.state == .mirroring else {
                let state = waited.job.map { "\($0.state.rawValue)" + ($0.lastError.map { ": \($0)" } ?? "") }
                throw ShareError(
                    .unavailable, "the copy on \(peer.name) is not current yet (\(state ?? "unknown")); the job goes on"
                )
            }
            tell("the copy on \(peer.name) is current")
        }
    }
}
