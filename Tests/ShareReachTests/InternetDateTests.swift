import Foundation
import ShareTrust
import Testing

/// share's date text is Foundation's `.iso8601` text, computed without Foundation's calendar: both directions are
/// checked against Foundation itself, so files written by either read back the same.
@Suite struct InternetDateTests {
    /// Whole seconds from 1601 to 2400, with the edges of months, leap days and the epoch.
    static let samples: [Double] = {
        var generator = SystemRandomNumberGenerator()
        var values: [Double] = [0, -1, 86_399, 86_400, 951_782_400, 951_868_799, 4_107_542_400, -11_644_473_600]
        for _ in 0..<2000 {
            values.append(Double(Int64.random(in: -11_644_473_600...13_569_465_600, using: &generator)))
        }
        return values
    }()

    struct Box: Codable, Equatable { var at: Date }

    @Test func writesWhatFoundationWrites() throws {
        let foundation = JSONEncoder()
        foundation.dateEncodingStrategy = .iso8601
        let ours = JSONEncoder()
        ours.dateEncodingStrategy = .internetDate
        for seconds in Self.samples {
            let box = Box(at: Date(timeIntervalSince1970: seconds))
            #expect(try ours.encode(box) == foundation.encode(box), "\(seconds)")
        }
    }

    @Test func readsWhatFoundationWritesAndFoundationReadsWhatItWrites() throws {
        let foundationOut = JSONEncoder()
        foundationOut.dateEncodingStrategy = .iso8601
        let foundationIn = JSONDecoder()
        foundationIn.dateDecodingStrategy = .iso8601
        let oursOut = JSONEncoder()
        oursOut.dateEncodingStrategy = .internetDate
        let oursIn = JSONDecoder()
        oursIn.dateDecodingStrategy = .internetDate
        for seconds in Self.samples {
            let box = Box(at: Date(timeIntervalSince1970: seconds))
            #expect(try oursIn.decode(Box.self, from: foundationOut.encode(box)) == box)
            #expect(try foundationIn.decode(Box.self, from: oursOut.encode(box)) == box)
        }
    }

    @Test func fractionsAndOffsetsAreRead() {
        #expect(InternetDate.date("2026-11-25T06:38:07Z") == Date(timeIntervalSince1970: 1_795_588_687))
        #expect(InternetDate.date("2026-11-25T07:38:07+01:00") == Date(timeIntervalSince1970: 1_795_588_687))
        #expect(InternetDate.date("2026-11-24T21:08:07-09:30") == Date(timeIntervalSince1970: 1_795_588_687))
        #expect(InternetDate.date("2026-11-25T06:38:07.250Z") == Date(timeIntervalSince1970: 1_795_588_687.25))
        #expect(InternetDate.string(Date(timeIntervalSince1970: 1_795_588_687.9)) == "2026-11-25T06:38:07Z")
    }

    @Test(arguments: [
        "", "2026-11-25", "2026-11-25T06:38:07", "2026-13-01T00:00:00Z", "2026-02-29T00:00:00Z",
        "2026-11-25T24:00:00Z", "2026-11-25T06:38:07ZZ", "2026-11-25T06:38:07.Z", "2026-11-25T06:38:07+0100",
        "20x6-11-25T06:38:07Z",
    ])
    func malformedTextIsRefused(_ text: String) {
        #expect(InternetDate.date(text) == nil)
    }
}
