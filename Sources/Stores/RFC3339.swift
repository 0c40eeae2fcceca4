import Foundation

/// RFC 3339 times (`2026-11-27T09:00:00Z`, `…T10:00:00+01:00`, `…T09:00:00.5Z`), read and written
/// with Foundation's ISO 8601 format style: a microsecond a time, where an `ISO8601DateFormatter`
/// made per call costs a third of a millisecond of ICU setup, once per job with a `send_at`.
public enum RFC3339 {
    private static let style = Date.ISO8601FormatStyle()
    private static let fractional = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// The time, with or without fractional seconds; nil when `text` is not one.
    public static func date(_ text: String) -> Date? {
        (try? style.parse(text)) ?? (try? fractional.parse(text))
    }

    /// Milliseconds since 1970, or nil.
    public static func milliseconds(_ text: String) -> Int64? {
        date(text).map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) }
    }

    /// The latest Unix second a time given in seconds may name (the year 5138): a bound that
    /// keeps milliseconds far from overflowing, and tells a number in milliseconds sent by
    /// mistake from seconds.
    public static let maximumUnixSeconds: Int64 = 99_999_999_999

    /// A time as the contract's JSON fields give one (`send_at`, `expiration`, `get_deliveries`'
    /// `since` and `until`, a Live Activity's dates): a string is an RFC 3339 time, a number
    /// whole Unix seconds (0 up to `maximumUnixSeconds`; not a boolean, not a fraction).
    /// Milliseconds since 1970, or nil: each caller refuses it with its own field's name.
    public static func milliseconds(json value: Any) -> Int64? {
        switch value {
        case let text as String:
            return milliseconds(text)
        case let number as NSNumber:
            // JSONSerialization reads true and false as NSNumber of type "c" (never an 8-bit integer).
            guard !JSONValue.isBoolean(number) else { return nil }
            let seconds = number.doubleValue
            guard seconds.isFinite, seconds == seconds.rounded(), let whole = Int64(exactly: seconds) else { return nil }
            return self.milliseconds(unixSeconds: whole)
        default:
            return nil
        }
    }

    /// A time as a person types one on a command line: Unix seconds in digits, or an RFC 3339
    /// time. Milliseconds since 1970, or nil.
    public static func milliseconds(commandLine text: String) -> Int64? {
        if !text.isEmpty, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) {
            return Int64(text).flatMap(milliseconds(unixSeconds:))
        }
        return milliseconds(text)
    }

    private static func milliseconds(unixSeconds: Int64) -> Int64? {
        (0...maximumUnixSeconds).contains(unixSeconds) ? unixSeconds * 1000 : nil
    }

    /// In UTC, with milliseconds only when it has any. The milliseconds are written from the
    /// integer: a `Date` holds them in binary, and the format style truncates 0.224 read back as
    /// 0.22399… to 223.
    public static func string(milliseconds: Int64) -> String {
        let (seconds, rest) = (milliseconds.floorDivided(by: 1000), milliseconds - milliseconds.floorDivided(by: 1000) * 1000)
        let whole = Date(timeIntervalSince1970: Double(seconds)).formatted(style)
        guard rest != 0, whole.hasSuffix("Z") else { return whole }
        return whole.dropLast() + String(format: ".%03d", rest) + "Z"
    }

    public static func string(_ date: Date, fractionalSeconds: Bool = false) -> String {
        fractionalSeconds ? date.formatted(fractional) : date.formatted(style)
    }
}

private extension Int64 {
    func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}
