import ArgumentParser
import Foundation
import ShareKit
import ShareProfiles

struct ProfileCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "profile", abstract: "Manage this device's profile catalog.",
        subcommands: [Add.self, AddFact.self, List.self, Show.self, Remove.self])

    static func load(_ device: DeviceOptions) throws -> ProfileCatalog {
        try load(device.paths.profilesFile)
    }

    static func load(_ file: URL) throws -> ProfileCatalog {
        do {
            return try ProfileCatalog.load(file)
        } catch {
            throw ShareError(.dataError, "\(error)")
        }
    }

    static func find(_ name: String, in catalog: ProfileCatalog) throws -> Profile {
        guard let profile = catalog.find(name) else {
            throw ShareError(.usage, "no profile is called '\(name)' (see: share profile list)")
        }
        return profile
    }

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a profile.")
        @OptionGroup var device: DeviceOptions
        @Argument(help: "The person's name.") var name: String
        @Option(help: "A short bio.") var bio = ""
        @Option(help: "A fun fact (repeatable).") var fact: [String] = []
        @Option(help: ArgumentHelp("A portrait image file.", valueName: "file")) var portrait: String?
        @Option(help: ArgumentHelp("A video file.", valueName: "file")) var video: String?

        func run() throws {
            try ShareCLI.run {
                var catalog = try ProfileCommand.load(device)
                if catalog.find(name) != nil {
                    throw ShareError(.usage, "a profile called '\(name)' exists; remove it first or pick another name")
                }
                func file(_ path: String?) throws -> URL? {
                    guard let path else { return nil }
                    let url = URL(fileURLWithPath: path).standardizedFileURL
                    guard FileManager.default.isReadableFile(atPath: url.path) else {
                        throw ShareError(.noInput, "\(path) is not a readable file")
                    }
                    return url
                }
                let profile = Profile(
                    name: name, bio: bio, funFacts: fact, video: try file(video), portrait: try file(portrait))
                catalog.upsert(profile)
                try catalog.save()
                say("added profile \(name) (\(profile.id))")
            }
        }
    }

    struct AddFact: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add-fact", abstract: "Add a fun fact read from standard input.")
        @OptionGroup var device: DeviceOptions
        @Argument(help: "The profile's name or id.") var name: String

        func run() throws {
            try ShareCLI.run {
                var catalog = try ProfileCommand.load(device)
                var profile = try ProfileCommand.find(name, in: catalog)
                let text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
                let facts = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
                    .filter { !$0.isEmpty }
                guard !facts.isEmpty else { throw ShareError(.noInput, "standard input held no fun fact") }
                profile.funFacts += facts
                catalog.upsert(profile)
                try catalog.save()
                say("\(profile.name) now has \(profile.funFacts.count) fun facts")
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List profiles.")
        @OptionGroup var device: DeviceOptions

        func run() throws {
            try ShareCLI.run {
                for profile in try ProfileCommand.load(device).profiles {
                    say(
                        "\(profile.name)\t\(profile.id)\t\(profile.funFacts.count) facts\(profile.portrait == nil ? "" : "\tportrait")\(profile.video == nil ? "" : "\tvideo")"
                    )
                }
            }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one profile as JSON.")
        @OptionGroup var device: DeviceOptions
        @Argument(help: "The profile's name or id.") var name: String

        func run() throws {
            try ShareCLI.run {
                let profile = try ProfileCommand.find(name, in: try ProfileCommand.load(device))
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                say(String(decoding: try encoder.encode(profile), as: UTF8.self))
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a profile.")
        @OptionGroup var device: DeviceOptions
        @Argument(help: "The profile's name or id.") var name: String

        func run() throws {
            try ShareCLI.run {
                var catalog = try ProfileCommand.load(device)
                let removed = try ProfileCommand.find(name, in: catalog)
                catalog.remove(removed.id.uuidString)
                try catalog.save()
                say("removed profile \(removed.name)")
            }
        }
    }
}
