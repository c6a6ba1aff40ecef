import Foundation
import Testing

extension EndToEnd {
    /// The rough edges a new user meets first: help, versions, file problems.
    @Suite(.serialized) struct HelpTextTests {
        static let commands: [[String]] = [
            ["send"], ["receive"], ["agent"], ["copy"], ["paste"], ["id"], ["inbox"], ["pair"], ["peers"], ["ping"],
            ["status"], ["jobs"], ["cancel"], ["pending"], ["accept"], ["decline"], ["trust"], ["trust", "add"],
            ["trust", "list"], ["trust", "remove"], ["trust", "revoke"], ["profile"], ["profile", "add"],
            ["profile", "add-fact"], ["profile", "list"], ["profile", "show"], ["profile", "remove"],
            ["profile", "export"], ["profile", "import"], ["web"], ["mirror"], ["sync"], ["sync", "list"],
            ["sync", "add"], ["sync", "accept"], ["sync", "decline"], ["sync", "remove"], ["sync", "revert"],
            ["sync", "override"], ["sync", "rescan"], ["sync", "allow-deletes"], ["sync", "versions"],
            ["sync", "restore"], ["sync", "unshare"], ["sync", "set"], ["sync", "pause"], ["sync", "resume"],
            ["sync", "changes"], [],
        ]

        /// Every command's help ends with examples, and its paragraphs are wrapped once, to the terminal: at 80
        /// columns no line is longer, and no sentence breaks in the middle of a short line.
        @Test(arguments: commands)
        func everyCommandHasExamplesAndFitsEightyColumns(_ command: [String]) throws {
            let process = try BackgroundShare(command + ["--help"], environment: ["COLUMNS": "80"])
            #expect(process.wait(timeout: 30) == 0)
            let help = process.stdout.text
            #expect(help.contains("EXAMPLES:"), "share \(command.joined(separator: " ")) --help: \(help)")
            for line in help.split(separator: "\n") where !line.hasPrefix("USAGE") && !line.hasPrefix("  share ") {
                #expect(line.count <= 80, "\(line.count) columns: \(line)")
            }
        }

        @Test func theWatchHasOneUsageAndAVersion() throws {
            let help = try BackgroundShare(["watch", "--help"], environment: ["COLUMNS": "80"])
            #expect(help.wait(timeout: 30) == 0)
            #expect(help.stdout.text.components(separatedBy: "USAGE:").count - 1 == 1, "\(help.stdout.text)")
            #expect(help.stdout.text.contains("EXAMPLES:"))
            let version = try BackgroundShare(["watch", "--version"])
            #expect(version.wait(timeout: 30) == 0)
            #expect(version.stdout.text.hasPrefix("share-watch 0.1 (protocol "), "\(version.stdout.text)")
            let main = try BackgroundShare(["--version"])
            #expect(main.wait(timeout: 30) == 0 && main.stdout.text.hasPrefix("share 0.1 (protocol "))
        }

        /// Every port option of every command is checked the same way: a number outside its range is a usage error
        /// naming the range, never a port wrapped into another one.
        @Test(arguments: [
            ["receive", "--port", "99999"], ["receive", "--port", "65536"], ["pair", "--port", "99999"],
            ["pair", "--agent-port", "0"], ["pair", "--discovery-port", "70000"], ["web", "--port", "65536"],
            ["web", "--discovery-port", "0"], ["agent", "--port", "99999"], ["agent", "--web-port", "99999"],
            ["agent", "--localsend-port", "99999"], ["agent", "--localsend-multicast-port", "65536"],
            ["agent", "--discovery-port", "0"], ["send", "--text", "x", "--to", "127.0.0.1:99999"],
            ["ping", "127.0.0.1:70000"],
        ])
        func everyPortOutsideItsRangeIsAUsageError(_ arguments: [String]) throws {
            let device = try TestDevice("ports")
            let result = device.run(arguments, timeout: 20)
            #expect(result.status == 64, "share \(arguments.joined(separator: " ")): \(result.stderr)")
            #expect(result.stderr.contains("65535"), "share \(arguments.joined(separator: " ")): \(result.stderr)")
            #expect(!result.stderr.contains("waiting on port"), "\(result.stderr)")
        }

        /// An option's default is said once: by the option's own text or by the help printer, never both.
        @Test(arguments: commands)
        func everyDefaultIsSaidOnce(_ command: [String]) throws {
            let process = try BackgroundShare(command + ["--help"], environment: ["COLUMNS": "200"])
            #expect(process.wait(timeout: 30) == 0)
            let help = process.stdout.text.split(separator: "\n").joined(separator: " ")
                .split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
            let doubled = try Regex(#"\(default[^)]*\)\.? \(default: "#)
            #expect(help.firstMatch(of: doubled) == nil, "share \(command.joined(separator: " ")) --help: \(help)")
        }

        /// A folder that cannot be written gets one plain sentence and its exit status, not a type name.
        @Test func aReadOnlyFolderIsOnePlainSentence() throws {
            guard getuid() == 0 else {
                print("skipped: mounting a read-only tmpfs needs root")
                return
            }
            let desk = try TestDevice("desk")
            let folder = try desk.folder("read-only")
            let mounted = runTool("/bin/mount", ["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", folder.path])
            try #require(mounted.status == 0, "\(mounted.output)")
            defer { _ = runTool("/bin/umount", ["-l", folder.path]) }
            let result = desk.run(["receive", "--into", folder.path, "--port", "0", "--timeout", "2"])
            #expect(result.status == 73, "\(result.stderr)")
            #expect(failureLines(result.stderr).count == 1, "\(result.stderr)")
            #expect(result.stderr.contains("read-only") && !result.stderr.contains("Error"), "\(result.stderr)")
        }
    }
}
