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

    /// In UTC, with milliseconds only when it has any.
    public static func string(milliseconds: Int64) -> String {
        let date = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
        return milliseconds % 1000 == 0 ? date.formatted(style) : date.formatted(fractional)
    }

    public static func string(_ date: Date, fractionalSeconds: Bool = false) -> String {
        fractionalSeconds ? date.formatted(fractional) : date.formatted(style)
    }
}
