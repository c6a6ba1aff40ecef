import ShareCommandLine
import ArgumentParser
import ShareKit

struct IdCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "id", abstract: "Print this device's name and ID (creating its identity on first use).")

    @OptionGroup var device: DeviceOptions

    @Option(help: "Rename this device.")
    var name: String?

    func run() throws {
        try ShareCLI.run {
            if let name {
                guard !name.isEmpty, name.count <= 64, !name.contains(where: \.isNewline) else {
                    throw ShareError(.usage, "a device name has 1 to 64 characters on one line")
                }
                _ = try device.loadDevice()
                try LocalDevice.saveName(name, device.paths)
            }
            let local = try device.loadDevice()
            say(local.name)
            say(local.id.description)
        }
    }
}
