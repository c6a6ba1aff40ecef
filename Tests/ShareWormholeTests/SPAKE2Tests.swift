import Testing

@testable import ShareWormhole

/// SPAKE2 between two share ends, and what it refuses.
@Suite struct SPAKE2Tests {
    let id = Array("lothar.com/wormhole/text-or-file-xfer".utf8)

    @Test func theSameCodeGivesBothSidesTheSameKeyAndAnotherCodeDoesNot() throws {
        let a = SPAKE2Symmetric(password: Array("7-guitarist-revenge".utf8), identity: id)
        let b = SPAKE2Symmetric(password: Array("7-guitarist-revenge".utf8), identity: id)
        let c = SPAKE2Symmetric(password: Array("7-guitarist-revenue".utf8), identity: id)
        #expect(try a.finish(b.message) == b.finish(a.message))
        #expect(try a.finish(c.message) != c.finish(a.message))
        #expect(a.message != b.message)
    }

    @Test func malformedReflectedAndSmallOrderMessagesAreRefused() {
        let a = SPAKE2Symmetric(password: Array("1-a-b".utf8), identity: id)
        let b = SPAKE2Symmetric(password: Array("1-a-b".utf8), identity: id)
        var asA = b.message
        asA[0] = UInt8(ascii: "A")
        let identity = [UInt8(ascii: "S"), 1] + [UInt8](repeating: 0, count: 31)
        // A point of order 8 (the encoding of (0, -1) is 0xec ff … 7f).
        let smallOrder = [UInt8(ascii: "S"), 0xEC] + [UInt8](repeating: 0xFF, count: 30) + [0x7F]
        for bad in [[], Array(b.message.prefix(20)), asA, a.message, identity, smallOrder] {
            #expect(throws: WormholeError.self) { try a.finish(bad) }
        }
    }

    @Test func codesAreWordsOfTheListAndParse() throws {
        for _ in 0..<50 {
            let code = WormholeCode.random(nameplate: "17", count: 3)
            #expect(WormholeCode.oddWords.contains(code.words[0]))
            #expect(WormholeCode.evenWords.contains(code.words[1]))
            #expect(WormholeCode.oddWords.contains(code.words[2]))
            #expect(try WormholeCode(parsing: code.description) == code)
        }
        #expect(WormholeCode.oddWords.count == 256 && WormholeCode.evenWords.count == 256)
        for bad in ["", "7", "guitarist-revenge", "7-", "7--x", "x7-a-b", "7-a b"] {
            #expect(throws: WormholeError.self) { try WormholeCode(parsing: bad) }
        }
    }
}
