import ShareProfileModel
import ArgumentParser
import CoreTransferable
import FoundationEssentials
import ShareNet
import Glibc
import ShareText
import ShareCommandLine
import ShareArchive
import ShareDisk
import ShareKit
import ShareProfiles
import ShareTrust
import ShareProtocol
import ShareEngine
import ShareAgent

struct ProfileCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "profile", abstract: "Manage this device's profile catalog.",
        discussion: helpPage(
            "Profiles are what the sample app shares: a name, a bio, fun facts, a portrait and a video. share send --profile sends one; share send --profiles sends the whole catalog as one archive.",
            examples: [
                "share profile add Juan --bio \"Loves hiking\" --fact \"Has climbed Aneto\" --portrait juan.jpg",
                "share profile list", "share profile export friends.tar.zst",
            ]), subcommands: [Add.self, AddFact.self, List.self, Show.self, Remove.self, Export.self, Import.self])

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
        static let configuration = CommandConfiguration(
            abstract: "Add a profile.",
            discussion: helpPage(examples: [
                "share profile add Juan --bio \"Loves hiking\" --fact \"Has climbed Aneto\" --portrait juan.jpg"
            ]))
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
                tell("added profile \(name) (\(profile.id))")
            }
        }
    }

    struct AddFact: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add-fact", abstract: "Add a fun fact read from standard input.",
            discussion: helpPage(examples: ["echo \"Speaks four languages\" | share profile add-fact Juan"]))
        @OptionGroup var device: DeviceOptions
        @Argument(help: "The profile's name or id.") var name: String

        func run() throws {
            try ShareCLI.run {
                var catalog = try ProfileCommand.load(device)
                var profile = try ProfileCommand.find(name, in: catalog)
                let input: [UInt8]
                do {
                    input = try Syscalls.readToEnd(0)
                } catch {
                    throw ShareError(.ioError, "cannot read standard input: \(error)")
                }
                let text = String(decoding: input, as: UTF8.self)
                let facts = text.split(whereSeparator: \.isNewline).map { $0.trimmedSpaces }
                    .filter { !$0.isEmpty }
                guard !facts.isEmpty else { throw ShareError(.noInput, "standard input held no fun fact") }
                profile.funFacts += facts
                catalog.upsert(profile)
                try catalog.save()
                tell("\(profile.name) now has \(profile.funFacts.count) fun facts")
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List profiles.", discussion: helpPage(examples: ["share profile list"]))
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
        static let configuration = CommandConfiguration(
            abstract: "Show one profile as JSON.", discussion: helpPage(examples: ["share profile show Juan"]))
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
        static let configuration = CommandConfiguration(
            abstract: "Remove a profile.", discussion: helpPage(examples: ["share profile remove Juan"]))
        @OptionGroup var device: DeviceOptions
        @Argument(help: "The profile's name or id.") var name: String

        func run() throws {
            try ShareCLI.run {
                var catalog = try ProfileCommand.load(device)
                let removed = try ProfileCommand.find(name, in: catalog)
                catalog.remove(removed.id.uuidString)
                try catalog.save()
                tell("removed profile \(removed.name)")
            }
        }
    }

    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write profiles to a file: .tar, .tar.zst or .zip (portraits and videos included) or .csv.",
            discussion: helpPage(
                "CSV cannot carry portraits or videos: it is refused when a profile has one.",
                examples: ["share profile export friends.tar.zst", "share profile export friends.csv Juan Ana"]))
        @OptionGroup var device: DeviceOptions
        @Argument(
            help: ArgumentHelp("The file to write (FILE.tar, FILE.tar.zst, FILE.zip or FILE.csv).", valueName: "file"))
        var file: String
        @Option(help: ArgumentHelp("Only this profile (repeatable); all when omitted.", valueName: "name"))
        var profile: [String] = []
        @Flag(help: "Replace the file if it exists.") var force = false

        func validate() throws {
            guard ProfileFileFormat(file) != nil else {
                throw ValidationError("'\(file)' must end in .tar, .tar.zst, .tzst, .zip or .csv")
            }
        }

        func run() throws {
            try ShareCLI.run {
                let catalog = try ProfileCommand.load(device)
                let chosen =
                    try profile.isEmpty ? catalog.profiles : profile.map { try ProfileCommand.find($0, in: catalog) }
                guard !chosen.isEmpty else { throw ShareError(.noInput, "the profile catalog is empty") }
                let url = URL(fileURLWithPath: file)
                if FileManager.default.fileExists(atPath: url.path), !force {
                    throw ShareError(.cannotCreate, "\(file) exists; pass --force to replace it")
                }
                let archive = ProfilesArchive(profiles: chosen)
                do {
                    switch ProfileFileFormat(file)! {
                    case .csv:
                        let data = try blockingAwait { try await archive.exported(as: .commaSeparatedText) }
                        try data.write(to: url, options: .atomic)
                    case .tar: try archive.write(to: url, format: .pax)
                    case .tarZstd: try archive.write(to: url, format: .pax, compression: .zstd(level: 3))
                    case .zip: try archive.write(to: url, format: .zip)
                    }
                } catch let error as TransferableSupportError where error.code == .exportingConditionFailed {
                    throw ShareError(
                        .dataError,
                        "CSV cannot carry portraits or videos, and these profiles have some; export .tar, .tar.zst or .zip instead"
                    )
                } catch let error as ShareError {
                    throw error
                } catch {
                    throw ShareError(.cannotCreate, "cannot write \(file): \(error)")
                }
                tell("exported \(chosen.count) profile(s) to \(file)")
            }
        }
    }

    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Import profiles from a file written by export (or any tar, zip or CSV of the same shape).",
            discussion: helpPage(
                "A profile whose id is already in the catalog is updated, never duplicated.",
                examples: ["share profile import friends.tar.zst"]))
        @OptionGroup var device: DeviceOptions
        @Argument(help: ArgumentHelp("The file to read.", valueName: "file")) var file: String

        func run() throws {
            try ShareCLI.run {
                let url = URL(fileURLWithPath: file)
                guard FileManager.default.isReadableFile(atPath: url.path) else {
                    throw ShareError(.noInput, "\(file) is not a readable file")
                }
                let paths = device.paths
                let result: ProfilesArchive.ImportResult
                if ProfileFileFormat(file) == .csv {
                    let archive: ProfilesArchive
                    do {
                        let data = try Data(contentsOf: url)
                        archive = try blockingAwait {
                            try await ProfilesArchive(importing: data, contentType: .commaSeparatedText)
                        }
                    } catch {
                        throw ShareError(.dataError, "\(file): \(error)")
                    }
                    do {
                        result = try archive.merge(into: paths.profilesFile)
                    } catch {
                        throw ShareError(.dataError, "\(error)")
                    }
                } else {
                    let staging = ".import-\(UUID().uuidString)"
                    let data: Directory
                    do {
                        data = try Directory.open(paths.data.path, create: true, mode: 0o700)
                    } catch {
                        throw ShareError(.cannotCreate, "\(error)")
                    }
                    defer { _ = try? data.removeTree(staging) }
                    do {
                        let folder = try data.directory(staging, create: true)
                        try ProfilesArchive.extract(url, into: folder)
                        result = try ProfilesArchive.importBundle(at: folder, into: paths.profilesFile, media: data)
                    } catch let error as ArchiveError {
                        throw ShareError(error.kind == .noSpace ? .ioError : .dataError, "\(file): \(error.message)")
                    } catch {
                        throw ShareError(.dataError, "\(file): \(error)")
                    }
                }
                tell(
                    "imported \(result.added) new and updated \(result.updated) profile(s): \(result.names.joined(separator: ", "))"
                )
            }
        }
    }
}

/// The file formats profiles export to, by file name.
enum ProfileFileFormat {
    case tar, tarZstd, zip, csv

    init?(_ name: String) {
        let lower = name.lowercased()
        if lower.hasSuffix(".tar.zst") || lower.hasSuffix(".tzst") {
            self = .tarZstd
        } else if lower.hasSuffix(".tar") {
            self = .tar
        } else if lower.hasSuffix(".zip") {
            self = .zip
        } else if lower.hasSuffix(".csv") {
            self = .csv
        } else {
            return nil
        }
    }
}
