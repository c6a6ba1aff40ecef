import Foundation
import ShareTLS
import Testing

@testable import ShareProtocol

/// Commit, then reveal: the pairing exchange as pure values, and the argument of docs/SECURITY.md checked by
/// simulation: a man in the middle who grinds his certificates matches the old code every time, and the new one no
/// more often than chance.
@Suite struct PairingMachineTests {
    let hasher = TestSHA()

    func certificate() -> [UInt8] { randomBytes(300) }

    func pair(digits: Int = 8) -> (PairingMachine, PairingMachine) {
        let (a, b) = (certificate(), certificate())
        let exporter = randomBytes(32)
        return (
            PairingMachine(
                role: .initiator, ownCertificate: a, peerCertificate: b, nonce: randomBytes(32), exporter: exporter,
                digits: digits),
            PairingMachine(
                role: .responder, ownCertificate: b, peerCertificate: a, nonce: randomBytes(32), exporter: exporter,
                digits: digits)
        )
    }

    @Test func twoHonestSidesShowTheSameEightDigitCode() throws {
        var (a, b) = pair()
        let revealA = try a.received(b.commitment(using: hasher))
        let revealB = try b.received(a.commitment(using: hasher))
        let codeA = try a.received(revealB, using: hasher)
        let codeB = try b.received(revealA, using: hasher)
        #expect(codeA == codeB)
        #expect(codeA.count == 9 && codeA.split(separator: " ").map(\.count) == [4, 4], "\(codeA)")
    }

    @Test func aRevealBeforeItsCommitmentIsRefused() throws {
        var (a, _) = pair()
        let error = #expect(throws: ProtocolError.self) {
            _ = try a.received(PairReveal(nonce: Hex.string(randomBytes(32))), using: hasher)
        }
        #expect(error?.message.contains("before committing") == true)
        // A second commitment is refused too.
        var (c, d) = pair()
        _ = try c.received(d.commitment(using: hasher))
        #expect(throws: ProtocolError.self) { _ = try c.received(d.commitment(using: hasher)) }
    }

    @Test func aRevealThatDoesNotMatchItsCommitmentIsRefused() throws {
        var (a, b) = pair()
        _ = try a.received(b.commitment(using: hasher))
        // b reveals a different nonce than it committed to (an attacker changing its mind after seeing a's).
        let error = #expect(throws: ProtocolError.self) {
            _ = try a.received(PairReveal(nonce: Hex.string(randomBytes(32))), using: hasher)
        }
        #expect(error?.message.contains("does not match its commitment") == true)
    }

    /// The old code (version 1) came from the two certificates alone: a man in the middle, who presents certificates
    /// of his own to each side, grinds them until both sides' codes agree. With 2 digits he always succeeds within a
    /// few hundred certificates; with 8 digits the review needed 179 million (19 s on one core).
    @Test func againstTheOldCodeGrindingCertificatesAlwaysWins() {
        func oldCode(_ a: [UInt8], _ b: [UInt8]) -> UInt64 {
            let (first, second) = a.lexicographicallyPrecedes(b) ? (a, b) : (b, a)
            let digest = hasher.digest(Array("share-pairing-v1".utf8) + first + second)
            return digest.prefix(5).reduce(UInt64(0)) { ($0 << 8) | UInt64($1) } % 100
        }
        var wins = 0
        for _ in 0..<50 {
            let (laptop, desk) = (certificate(), certificate())
            let towardDesk = certificate()
            let target = oldCode(towardDesk, desk)
            for _ in 0..<5_000 where oldCode(laptop, certificate()) == target {
                wins += 1
                break
            }
        }
        #expect(wins == 50)
    }

    /// Against commitments, the same attacker commits to his nonce before he learns the honest one on each side, so
    /// whatever he grinds, the two codes agree only by chance: about 1 % with 2 digits.
    @Test func againstCommitmentsTheAttackerMatchesOnlyByChance() throws {
        var matches = 0
        let attempts = 2_000
        for _ in 0..<attempts {
            let (laptop, desk, mallory1, mallory2) = (certificate(), certificate(), certificate(), certificate())
            // Mallory and the desk: she finishes this session first and learns the desk's code.
            let exporterDesk = randomBytes(32)
            var deskSide = PairingMachine(
                role: .responder, ownCertificate: desk, peerCertificate: mallory2, nonce: randomBytes(32),
                exporter: exporterDesk, digits: 2)
            var malloryToDesk = PairingMachine(
                role: .initiator, ownCertificate: mallory2, peerCertificate: desk, nonce: randomBytes(32),
                exporter: exporterDesk, digits: 2)
            let deskReveal = try deskSide.received(malloryToDesk.commitment(using: hasher))
            let malloryReveal = try malloryToDesk.received(deskSide.commitment(using: hasher))
            let deskCode = try deskSide.received(malloryReveal, using: hasher)
            _ = try malloryToDesk.received(deskReveal, using: hasher)
            // Mallory and the laptop: she knows the code to hit, but must commit before the laptop reveals: whatever
            // nonce and certificate she picks, the laptop's nonce, unknown to her then, decides the code.
            let exporterLaptop = randomBytes(32)
            var laptopSide = PairingMachine(
                role: .initiator, ownCertificate: laptop, peerCertificate: mallory1, nonce: randomBytes(32),
                exporter: exporterLaptop, digits: 2)
            var malloryToLaptop = PairingMachine(
                role: .responder, ownCertificate: mallory1, peerCertificate: laptop, nonce: randomBytes(32),
                exporter: exporterLaptop, digits: 2)
            let laptopReveal = try laptopSide.received(malloryToLaptop.commitment(using: hasher))
            let malloryReveal2 = try malloryToLaptop.received(laptopSide.commitment(using: hasher))
            let laptopCode = try laptopSide.received(malloryReveal2, using: hasher)
            _ = try malloryToLaptop.received(laptopReveal, using: hasher)
            if laptopCode == deskCode { matches += 1 }
        }
        // 1 % of 2,000 is 20; a binomial spread of ±4.5: far from the old "every time".
        #expect(matches >= 3 && matches <= 45, "\(matches) of \(attempts)")
    }
}
