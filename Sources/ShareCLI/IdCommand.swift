import FoundationEssentials
import ShareNet
import ShareText
import ShareCommandLine
import ArgumentParser
import ShareKit
import ShareTLS
import ShareTrust
import ShareProtocol
import ShareEngine
import ShareAgent

struct IdCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "id", abstract: "Print this device's name and ID (creating its identity on first use).",
        discussion: helpPage(
            "The ID is the SHA-256 of this device's certificate, in eight groups of seven characters; another device trusts this one by it (share pair exchanges it for you).",
            examples: [
                "share id", "share id --name desk", "share id --json", "share id --rotate",
                "share id --certificate /var/lib/share-relay/cert.pem",
            ]))

    @OptionGroup var device: DeviceOptions

    @Option(help: "Rename this device.")
    var name: String?

    @Flag(
        help: ArgumentHelp(
            "Make a new key for this device. The old key vouches for the new one to your own devices (trusted with "
                + "--team), which take the new ID without pairing again; other devices are told to pair again. "
                + "Restart the agent afterwards: it carries the news to devices that are away."))
    var rotate = false

    @Flag(help: "One JSON object: name and id.")
    var json = false

    @Option(
        help: ArgumentHelp(
            "Print the device ID of this PEM certificate instead (a relay's or discovery server's, for its URL's ?id=).",
            valueName: "file"))
    var certificate: String?

    func run() throws {
        try ShareCLI.run {
            if let certificate {
                guard let pem = PosixFiles.read(certificate, limit: 1 << 20) else {
                    throw ShareError(.noInput, "\(certificate): cannot read it; check the path")
                }
                let id: DeviceID
                do {
                    id = try Certificate(pem: String(decoding: pem, as: UTF8.self)).deviceID()
                } catch {
                    throw ShareError(.dataError, "\(certificate) is not a PEM certificate: \(error)")
                }
                say(id.description)
                return
            }
            if rotate {
                let local = try device.loadDevice()
                guard local.previousIdentity == nil else {
                    throw ShareError(
                        .usage,
                        "the previous rotation has not reached all your devices yet (see the agent's log); rotate again once it has"
                    )
                }
                let (old, new) = try local.rotate()
                let notice = try TrustNotice.make(
                    .rotate, subject: old.deviceID, replacement: new.certificate, by: old)
                try TrustNoticeBook.update(local.paths) { $0.add(notice) }
                _ = try? ControlClient.request(.notices, paths: local.paths)
                tell("new ID of \(local.name): \(new.deviceID) (was \(old.deviceID))")
                tell("restart this device's agent: it tells your devices, with the old key, to trust the new one")
                return
            }
            if let name {
                guard !name.isEmpty, name.count <= 64, !name.contains(where: \.isNewline) else {
                    throw ShareError(.usage, "a device name has 1 to 64 characters on one line")
                }
                _ = try device.loadDevice()
                try LocalDevice.saveName(name, device.paths)
            }
            let local = try device.loadDevice()
            if json {
                let object = ["name": local.name, "id": local.id.description]
                let data = try JSONText.bytes(object, sortedKeys: true)
                say(String(decoding: data, as: UTF8.self))
                return
            }
            say(local.name)
            say(local.id.description)
        }
    }
}
