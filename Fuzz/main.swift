// share-fuzz: the fuzz targets of ShareFuzzTargets.
//
// Built by scripts/fuzz.sh with SHARE_FUZZING, AddressSanitizer and coverage instrumentation, it is a libFuzzer
// binary; SHARE_FUZZ_TARGET names the target and the arguments are libFuzzer's (corpus folders, -max_total_time …).
// Built normally, it replays inputs:   share-fuzz TARGET FILE|FOLDER…
// and writes the seed corpus:           share-fuzz --write-seeds FOLDER
import Foundation
import ShareFuzzTargets

#if SHARE_FUZZING
    @_silgen_name("LLVMFuzzerRunDriver")
    func runFuzzerDriver(
        _ argc: UnsafeMutablePointer<Int32>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
    ) -> Int32

    nonisolated(unsafe) var fuzzed = FuzzTarget.frames

    guard let name = ProcessInfo.processInfo.environment["SHARE_FUZZ_TARGET"], let target = FuzzTarget(rawValue: name)
    else {
        FileHandle.standardError.write(
            Data("share-fuzz: set SHARE_FUZZ_TARGET to one of \(FuzzTarget.allCases.map(\.rawValue))\n".utf8))
        exit(64)
    }
    fuzzed = target
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    exit(
        runFuzzerDriver(&argc, &argv) { data, size in
            fuzzed.run(size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size)))
            return 0
        })
#else
    let arguments = Array(CommandLine.arguments.dropFirst())
    if arguments.first == "--write-seeds", arguments.count == 2 {
        try FuzzSeeds.write(to: URL(fileURLWithPath: arguments[1], isDirectory: true))
        exit(0)
    }
    guard arguments.count >= 2, let target = FuzzTarget(rawValue: arguments[0]) else {
        FileHandle.standardError.write(
            Data("usage: share-fuzz TARGET FILE|FOLDER… (targets: \(FuzzTarget.allCases.map(\.rawValue)))\n".utf8))
        exit(64)
    }
    var count = 0
    for path in arguments.dropFirst() {
        for file in FuzzSeeds.inputs(at: URL(fileURLWithPath: path)) {
            target.run(Array(try Data(contentsOf: file)))
            count += 1
        }
    }
    print("\(target.rawValue): \(count) inputs, no crash")
#endif
