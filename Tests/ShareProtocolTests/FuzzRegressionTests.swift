import Foundation
import ShareProtocol
import Testing

@testable import ShareFuzzTargets

/// Every committed fuzz input — the seed corpus and each crash the fuzzer ever found (`Fuzz/regressions/`) — runs
/// through its target on every test run: a decoder that traps again fails here, without the fuzzer.
@Suite struct FuzzRegressionTests {
    static let fuzzFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Fuzz").standardizedFileURL

    @Test(arguments: FuzzTarget.allCases)
    func committedInputsDoNotCrash(_ target: FuzzTarget) throws {
        let seeds = FuzzSeeds.inputs(at: Self.fuzzFolder.appendingPathComponent("corpus/\(target.rawValue)"))
        let regressions = FuzzSeeds.inputs(at: Self.fuzzFolder.appendingPathComponent("regressions/\(target.rawValue)"))
        #expect(!seeds.isEmpty, "no seed corpus for \(target.rawValue)")
        for file in seeds + regressions {
            target.run(Array(try Data(contentsOf: file)))
        }
    }

    /// The seeds are what the sender's own encoders produce, so they reach deep: the whole-session seed takes a
    /// receiver through both items to the end, and truncating it anywhere never gets further than that.
    @Test func theSessionSeedCompletesAReceiveAndItsPrefixesDoNot() throws {
        let session = Array(try Data(contentsOf: Self.fuzzFolder.appendingPathComponent("corpus/frames/session")))
        #expect(FuzzTarget.receiveFrames(session))
        for cut in stride(from: 0, to: session.count - 1, by: 97) {
            #expect(!FuzzTarget.receiveFrames(Array(session[0..<cut])), "cut at \(cut)")
        }
    }

    @Test func theCommittedSeedsAreTheOnesTheEncodersProduce() throws {
        for (target, seeds) in FuzzSeeds.all() {
            for (name, bytes) in seeds {
                let file = Self.fuzzFolder.appendingPathComponent("corpus/\(target.rawValue)/\(name)")
                #expect(
                    Array(try Data(contentsOf: file)) == bytes, "regenerate with: share-fuzz --write-seeds Fuzz/corpus")
            }
        }
    }
}
