import Foundation

/// How long a test may wait for something, on this machine now: every deadline of the tests and their fixtures is a
/// quiet machine's figure times `Patience.factor`. A sanitizer makes every share process several times slower, and a
/// machine busier than it has cores (other work beside the suite) stretches every wait by its load per core; a deadline
/// that does not scale with both fails on one machine and passes on another. `SHARE_TEST_PATIENCE` sets the factor.
/// Processes a test starts get the factor in `SHARE_TEST_PATIENCE`, so fixtures written in other languages (the
/// Python peers, the browser test) scale their own deadlines alike.
public enum Patience {
    /// At least 1: 3 under a sanitizer, times the 1-minute load average per core when that is above 1, at most 12.
    public static var factor: Double {
        let environment = ProcessInfo.processInfo.environment
        if let fixed = environment["SHARE_TEST_PATIENCE"].flatMap(Double.init), fixed >= 1 { return fixed }
        let sanitizer: Double = environment["SHARE_SANITIZER"] == nil ? 1 : 3
        var loads = [Double](repeating: 0, count: 1)
        let cores = Double(max(1, ProcessInfo.processInfo.activeProcessorCount))
        let perCore = getloadavg(&loads, 1) == 1 ? loads[0] / cores : 1
        return min(12, sanitizer * max(1, perCore))
    }

    /// `seconds` on a quiet machine, as a deadline here and now.
    public static func seconds(_ seconds: Double) -> Double { seconds * factor }

    /// The environment entry that passes the factor on to a process a test starts.
    public static var environment: [String: String] { ["SHARE_TEST_PATIENCE": String(format: "%.2f", factor)] }
}
