import FoundationEssentials

/// Dates in the JSON files and messages share writes: RFC 3339 in UTC to the second (`2026-11-25T06:38:07Z`), the
/// text Foundation's `.iso8601` strategy writes, so files written by earlier versions read back unchanged.
///
/// Computed with plain arithmetic on the proleptic Gregorian calendar: Foundation's strategy goes through `Calendar`
/// and the current `TimeZone`, which load ICU and its data — about 3 MiB of a watch's resident memory for reading
/// one date in its trust store.
public enum InternetDate {
    /// `date` as `YYYY-MM-DDTHH:MM:SSZ` (fractions of a second dropped, as Foundation does).
    public static func string(_ date: Date) -> String {
        let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let inDay = seconds - days * 86_400
        let (year, month, day) = civil(fromDays: days)
        return pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) + "T" + pad(inDay / 3600, 2) + ":"
            + pad(inDay / 60 % 60, 2) + ":" + pad(inDay % 60, 2) + "Z"
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS`, optional fractional seconds, then `Z` or `±HH:MM`; nil for anything else.
    public static func date(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        var at = 0
        func number(_ digits: Int) -> Int64? {
            guard at + digits <= bytes.count else { return nil }
            var value: Int64 = 0
            for byte in bytes[at..<at + digits] {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int64(byte - 0x30)
            }
            at += digits
            return value
        }
        func expect(_ characters: String) -> Bool {
            guard at < bytes.count, characters.utf8.contains(bytes[at]) else { return false }
            at += 1
            return true
        }
        guard let year = number(4), expect("-"), let month = number(2), expect("-"), let day = number(2),
            expect("Tt "), let hour = number(2), expect(":"), let minute = number(2), expect(":"),
            let second = number(2),
            (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year), hour < 24, minute < 60,
            second < 61
        else { return nil }
        var fraction = 0.0
        if at < bytes.count, bytes[at] == UInt8(ascii: ".") {
            at += 1
            var scale = 0.1
            let start = at
            while at < bytes.count, bytes[at] >= 0x30, bytes[at] <= 0x39 {
                fraction += Double(bytes[at] - 0x30) * scale
                scale /= 10
                at += 1
            }
            guard at > start else { return nil }
        }
        var offset: Int64 = 0
        if expect("Zz") {
        } else if at < bytes.count, bytes[at] == UInt8(ascii: "+") || bytes[at] == UInt8(ascii: "-") {
            let sign: Int64 = bytes[at] == UInt8(ascii: "-") ? -1 : 1
            at += 1
            guard let hours = number(2), expect(":"), let minutes = number(2), hours < 24, minutes < 60 else {
                return nil
            }
            offset = sign * (hours * 3600 + minutes * 60)
        } else {
            return nil
        }
        guard at == bytes.count else { return nil }
        let seconds = days(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    /// Days since 1970-01-01 of a civil date (Hinnant's algorithm).
    static func days(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * ((month + 9) % 12) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The civil date of a day number since 1970-01-01.
    static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shifted = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shifted + 2) / 5 + 1
        let month = shifted < 10 ? shifted + 3 : shifted - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}

extension JSONEncoder.DateEncodingStrategy {
    /// RFC 3339 in UTC to the second, without Foundation's calendar (`InternetDate`).
    public static var internetDate: Self {
        .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(InternetDate.string(date))
        }
    }
}

extension JSONDecoder.DateDecodingStrategy {
    /// RFC 3339 (what `.iso8601` and `.internetDate` write, fractions and offsets too), without Foundation's calendar.
    public static var internetDate: Self {
        .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = InternetDate.date(text) else {
                throw DecodingError.dataCorruptedError(
                    in: container, debugDescription: "'\(text)' is not an RFC 3339 date")
            }
            return date
        }
    }
}
