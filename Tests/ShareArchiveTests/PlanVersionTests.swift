import Foundation
import Glibc
import ShareTestSupport
import Testing

@testable import ShareArchive

/// A plan's version names a stream for resumes (the receiver's ledger keeps it): written out without reflection, it
/// must stay the text the runtime printed, or a partial kept by an earlier build would not be resumed.
@Suite struct PlanVersionTests {
    @Test func kindsAndSourcesPrintAsTheRuntimePrintsThem() {
        let names = ["a", "", "with \"quotes\"", "tab\there", "line\nbreak", "back\\slash", "été 日本 🙂", "\u{7}"]
        for name in names {
            for kind in [
                ArchiveEntryInfo.Kind.file, .directory, .symlink(name), .hardlink(name), .special(name),
            ] {
                #expect(kind.printed == "\(kind)")
            }
            var info = stat()
            info.st_dev = 2049
            info.st_ino = 123_456_789
            let identity = FileIdentity(info)
            for source in [
                ArchivePlan.Entry.Source.none, .file(path: "/tmp/" + name, identity: identity),
                .bytes(Data(name.utf8)),
            ] {
                #expect(source.printed == "\(source)")
            }
        }
    }

    @Test func aFolderPlansTheVersionTheRuntimeWouldPrint() throws {
        let scratch = Scratch()
        let plan = try ArchivePlan.folder(try sampleFolder(in: scratch, bigFile: 1 << 16))
        var text = "\(plan.streamSize)\n"
        for entry in plan.entries {
            text += "\(entry.path)\t\(entry.kind)\t\(entry.size)\t\(entry.mode)\t\(entry.modified)\t\(entry.source)\n"
        }
        #expect(plan.version == StableDigest.hex(text))
    }
}
