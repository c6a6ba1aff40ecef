import ArgumentParser

/// Port numbers given on the command line, checked once for every command: a number outside the range is a usage
/// error naming the range (never a port wrapped into another one by a narrowing conversion).
enum PortOption {
    /// A port to listen on: 0 picks a free one.
    static func listening(_ text: String) throws -> Int { try parse(text, lowest: 0) }

    /// A port that names a service: 1–65535.
    static func service(_ text: String) throws -> Int { try parse(text, lowest: 1) }

    private static func parse(_ text: String, lowest: Int) throws -> Int {
        guard let port = Int(text), (lowest...65535).contains(port) else {
            throw ValidationError(
                lowest == 0
                    ? "a port is a number from 0 (a free one) to 65535" : "a port is a number from 1 to 65535")
        }
        return port
    }
}
