import Foundation
import Glibc
import Testing

@testable import ShareDisk

/// Removing and copying by path go through folder handles: links are copied as links and never followed, a tree is
/// removed whole, and what a link points to outside is never touched.
@Suite struct PathOperationsTests {
    @Test func aTreeIsCopiedWithItsLinksAsLinksAndRemovedWhole() throws {
        let scratch = try Scratch()
        let source = scratch.inside.appendingPathComponent("tree")
        try FileManager.default.createDirectory(
            at: source.appendingPathComponent("sub"), withIntermediateDirectories: true)
        try Data(repeating: 7, count: 3 << 20).write(to: source.appendingPathComponent("sub/big"))
        try FileManager.default.createSymbolicLink(
            atPath: source.appendingPathComponent("out").path, withDestinationPath: scratch.outside.path)
        let copy = scratch.inside.appendingPathComponent("copy")
        try Data("old".utf8).write(to: copy)
        try PathOperations.copy(source.path, to: copy.path)
        #expect(try Data(contentsOf: copy.appendingPathComponent("sub/big")) == Data(repeating: 7, count: 3 << 20))
        #expect(
            try FileManager.default.destinationOfSymbolicLink(atPath: copy.appendingPathComponent("out").path)
                == scratch.outside.path)
        #expect(try PathOperations.remove(copy.path))
        #expect(!FileManager.default.fileExists(atPath: copy.path))
        #expect(FileManager.default.fileExists(atPath: scratch.outside.appendingPathComponent("secret").path))
        #expect(try PathOperations.remove(copy.path) == false)
        PathOperations.removeIfPresent(source.path)
        #expect(!FileManager.default.fileExists(atPath: source.path))
    }

    @Test func aFileCopyReplacesTheTargetAndLeavesNoTemporaryName() throws {
        let scratch = try Scratch()
        let file = scratch.inside.appendingPathComponent("a")
        try Data("new".utf8).write(to: file)
        let target = scratch.inside.appendingPathComponent("b")
        try Data("older and longer".utf8).write(to: target)
        try PathOperations.copy(file.path, to: target.path)
        #expect(try Data(contentsOf: target) == Data("new".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.inside.path).sorted() == ["a", "b"])
        #expect(throws: DiskError.self) { try PathOperations.copy(scratch.inside.path + "/missing", to: target.path) }
    }
}
