import CoreTransferable
import Foundation
import ShareKit
import ShareProtocol
import Testing
import ShareTrust
import ShareReach
import ShareEngine
import ShareAgent

@Suite struct FileNameSanitizingTests {
    @Test(arguments: [
        ("../../etc/passwd", "_.._etc_passwd"), ("/abs/path.txt", "_abs_path.txt"), ("..", "item"), (".", "item"),
        ("a\u{0}b\nc\u{7F}.txt", "abc.txt"), ("...hidden", "hidden"), ("back\\slash", "back_slash"), ("", "item"),
    ])
    func suggestedNamesBecomeOneSafeComponent(_ input: String, _ expected: String) {
        #expect(FileNamesOnDisk.sanitize(input, fallback: "item") == expected)
    }

    @Test func longNamesAreBoundedAndKeepTheirExtension() {
        let name = FileNamesOnDisk.sanitize(String(repeating: "é", count: 400) + ".jpeg", fallback: "item")
        #expect(name.utf8.count <= 200 && name.hasSuffix(".jpeg"))
    }
}

extension EndToEnd {
    /// A sender that suggests hostile names: every file lands inside the target folder, under a safe name.
    @Suite(.serialized) struct HostileNameEndToEndTests {
        @Test func hostileSuggestedNamesStayInsideTheTarget() throws {
            let (laptop, desk) = try TestDevice.pair("laptop", "desk")
            let inbox = try desk.folder("inbox")
            let (receiver, port) = try desk.startReceive(into: inbox)
            defer { receiver.stop() }
            let device = try LocalDevice.loadOrCreate(paths: DevicePaths.resolve(configOverride: laptop.config.path))
            let trust = try TrustStore.load(device.paths.trustFile)
            let names = [
                "../../escape.txt", "/etc/cron.d/evil", "..", "a\u{1B}[31mred.txt",
                String(repeating: "x", count: 1000) + ".bin",
            ]
            let items = names.enumerated().map { index, name in
                OutgoingItem(
                    id: "hostile-\(index)", label: "item \(index)",
                    representations: [
                        OutgoingRepresentation(
                            offered: OfferedRepresentation(
                                contentType: "public.data", kind: .data, size: nil, suggestedFileName: name)
                        ) { .data(Data("payload \(index)".utf8)) }
                    ],
                    declarations: [])
            }
            let session = SendSession(device: device, progress: ProgressReporter())
            let target = try PeerTarget.resolve("127.0.0.1:\(port)", trust: trust)
            let report = try session.run(to: target, trust: trust) { _ in items }
            #expect(report.delivered.count == names.count)
            _ = receiver.wait(timeout: 30)
            let saved = try FileManager.default.contentsOfDirectory(atPath: inbox.path).filter {
                $0 != ".share-partial"
            }
            for name in saved {
                #expect(!name.contains("/") && name != ".." && !name.hasPrefix("."))
                #expect(!name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F })
                #expect(name.utf8.count <= 255)
            }
            #expect(!FileManager.default.fileExists(atPath: desk.directory.appendingPathComponent("escape.txt").path))
            #expect(
                !FileManager.default.fileExists(
                    atPath: inbox.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
                        "escape.txt"
                    ).path))
            #expect(saved.contains("_.._escape.txt"))
            #expect(saved.count == names.count)
        }
    }
}

@Suite struct TerminalOutputTests {
    @Test func controlCharactersAreNeutralized() {
        #expect(ProgressReporter.neutralized("a\u{1B}[31mb\u{7}c\n\td\u{9B}") == "a\\u{1b}[31mb\\u{7}c\n\td\\u{9b}")
        #expect(ProgressReporter.neutralized("héllo ✓") == "héllo ✓")
    }
}
