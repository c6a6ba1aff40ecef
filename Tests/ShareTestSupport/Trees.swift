import Foundation
import Glibc

/// Helpers shared by the test targets: scratch folders, tree snapshots, sample folders, tools.

/// A scratch folder removed when the value is released.
public final class Scratch: Sendable {
    public let url: URL
    public init() {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("share-archive-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit {
        _ = try? Process.run(URL(fileURLWithPath: "/bin/chmod"), arguments: ["-R", "u+rwx", url.path]).waitForExit()
        try? FileManager.default.removeItem(at: url)
    }
    public func path(_ name: String) -> URL { url.appendingPathComponent(name) }
}

/// Every entry under `root`: kind, permissions, whole-second time (files), contents or link target.
public func tree(_ root: URL, times: Bool = true) -> [String: String] {
    var out: [String: String] = [:]
    func walk(_ dir: String, _ rel: String) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: dir) else { return }
        for name in names {
            let full = dir + "/" + name
            let path = rel.isEmpty ? name : rel + "/" + name
            var st = stat()
            guard lstat(full, &st) == 0 else { continue }
            let mode = String(st.st_mode & 0o777, radix: 8)
            let time = times ? " t\(st.st_mtim.tv_sec)" : ""
            switch st.st_mode & S_IFMT {
            case S_IFDIR:
                out[path] = "dir \(mode)"
                walk(full, path)
            case S_IFLNK:
                out[path] = "link -> " + ((try? FileManager.default.destinationOfSymbolicLink(atPath: full)) ?? "?")
            default:
                let data = FileManager.default.contents(atPath: full) ?? Data()
                out[path] = "file \(mode)\(time) \(data.count) \(data.hashValue)"
            }
        }
    }
    walk(root.path, "")
    return out
}

public func write(_ text: String, to url: URL, mode: Int = 0o644) throws {
    try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
    try Data(text.utf8).write(to: url)
    chmod(url.path, mode_t(mode))
}

/// A folder with nested folders, non-ASCII names, an empty folder, an inside link and an outside one, odd modes.
public func sampleFolder(in scratch: Scratch, bigFile: Int = 3 << 20) throws -> URL {
    try sampleFolder(at: scratch.path("sample"), bigFile: bigFile)
}

public func sampleFolder(at root: URL, bigFile: Int = 3 << 20) throws -> URL {
    try write("hello\n", to: root.appendingPathComponent("a.txt"))
    try write("script", to: root.appendingPathComponent("bin/run.sh"), mode: 0o755)
    try write("ünïcödé", to: root.appendingPathComponent("dossier été/résumé 日本.txt"), mode: 0o600)
    try write(
        String(repeating: "long name ", count: 3),
        to: root.appendingPathComponent(String(repeating: "n", count: 200) + "/" + String(repeating: "x", count: 150)))
    var big = [UInt8](repeating: 0, count: bigFile)
    for i in big.indices { big[i] = UInt8(truncatingIfNeeded: i &* 2_654_435_761 >> 13) }
    try FileManager.default.createDirectory(
        at: root.appendingPathComponent("deep/er"), withIntermediateDirectories: true)
    try Data(big).write(to: root.appendingPathComponent("deep/er/big.bin"))
    try FileManager.default.createDirectory(at: root.appendingPathComponent("empty"), withIntermediateDirectories: true)
    try FileManager.default.createSymbolicLink(
        atPath: root.appendingPathComponent("bin/link").path, withDestinationPath: "../a.txt")
    try FileManager.default.createSymbolicLink(
        atPath: root.appendingPathComponent("outside").path, withDestinationPath: "/etc/passwd")
    var times = [timespec(tv_sec: 1_600_000_000, tv_nsec: 0), timespec(tv_sec: 1_600_000_000, tv_nsec: 0)]
    utimensat(AT_FDCWD, root.appendingPathComponent("a.txt").path, &times, 0)
    return root
}

/// Runs a tool and returns its exit status and output.
@discardableResult
public func run(_ tool: String, _ arguments: [String], in directory: URL? = nil) throws -> (Int32, String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: tool)
    process.arguments = arguments
    if let directory { process.currentDirectoryURL = directory }
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    try? pipe.fileHandleForReading.close()  // the process object, and its pipe, outlive this call
    process.waitForExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}
