import ArgumentParser
import CoreTransferable
import FoundationEssentials
import ShareCommandLine
import ShareKit
import ShareTrust
import ShareProtocol
import ShareEngine
import ShareAgent

/// Output options shared by send and receive.
struct OutputOptions: ParsableArguments {
    @Flag(help: "Print nothing but errors (and received text).")
    var quiet = false

    @Flag(help: "Print one JSON object per line (events and progress).")
    var json = false

    @Flag(name: .shortAndLong, help: "Say what was offered, what the receiver chose and why, for every item.")
    var verbose = false

    var progress: ProgressReporter { ProgressReporter.automatic(quiet: quiet, json: json, verbose: verbose) }
}

/// Type declaration files to load before anything is typed or negotiated.
struct DeclarationOptions: ParsableArguments {
    @Option(
        name: .customLong("declarations"),
        help: ArgumentHelp("An Info.plist-style or JSON file declaring custom types (repeatable).", valueName: "file"))
    var files: [String] = []

    func load() throws {
        for file in files {
            do {
                try UTType.registerDeclarations(contentsOf: URL(fileURLWithPath: file))
            } catch {
                throw ShareError(.dataError, "\(error)")
            }
        }
    }
}

/// Sizes like `512`, `64K`, `10M`, `1.5G` (powers of 1024).
func parseSize(_ text: String) -> UInt64? {
    let units: [Character: Double] = ["K": 1024, "M": 1_048_576, "G": 1_073_741_824, "T": 1_099_511_627_776]
    var body = text.uppercased()
    if body.hasSuffix("IB") { body.removeLast(2) } else if body.hasSuffix("B") { body.removeLast() }
    var factor = 1.0
    if let last = body.last, let unit = units[last] {
        factor = unit
        body.removeLast()
    }
    guard let value = Double(body), value >= 0, value.isFinite else { return nil }
    return UInt64(value * factor)
}

/// A duration such as `7d`, `12h`, `30m` or `90s` (a bare number is seconds); nil when it is not one.
func parseDuration(_ text: String) -> TimeInterval? {
    let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
    var body = text.lowercased()
    var factor = 1.0
    if let last = body.last, let unit = units[last] {
        factor = unit
        body.removeLast()
    }
    guard let value = Double(body), value > 0, value.isFinite else { return nil }
    return value * factor
}

/// A type named on the command line: a declared identifier, or an extension.
func parseType(_ text: String) throws -> UTType {
    if let type = UTType(text) { return type }
    if !text.includes("."), let type = UTType(filenameExtension: text), !type.isDynamic { return type }
    throw ShareError(
        .usage,
        "unknown type '\(text)'; use a declared identifier such as public.plain-text, or declare it with --declarations FILE"
    )
}

/// Where pairing announces a waiting device and looks for one by name (`share pair`, and pairing from `share web`).
struct PairingDiscoveryOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp("UDP port of LAN discovery.", valueName: "port"), transform: PortOption.service)
    var discoveryPort: Int = 21_847

    @Option(
        help: ArgumentHelp(
            "Announce and look for waiting devices on this IPv4 interface address only.", valueName: "address"))
    var discoveryInterface: String?
}
