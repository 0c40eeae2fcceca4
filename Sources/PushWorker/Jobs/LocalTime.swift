import Foundation

/// A job's `local_time`: a wall-clock time (`"09:00"`), optionally on a date
/// (`"2026-11-28T09:00"`), at which each device gets the job in its own zone.
public struct LocalTime: Sendable, Hashable {
    public var hour: Int
    public var minute: Int
    /// Year, month, day; nil: the next occurrence of the time.
    public var date: (year: Int, month: Int, day: Int)?

    public static func == (a: LocalTime, b: LocalTime) -> Bool {
        a.hour == b.hour && a.minute == b.minute && a.date?.year == b.date?.year && a.date?.month == b.date?.month && a.date?.day == b.date?.day
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(hour)
        hasher.combine(minute)
        hasher.combine(date?.year)
        hasher.combine(date?.month)
        hasher.combine(date?.day)
    }

    /// Reads `"HH:MM"` or `"YYYY-MM-DDTHH:MM"` (no offset: the offset is each device's zone's).
    public init(_ text: String) throws(JobError) {
        func refuse() -> JobError {
            JobError(.invalidField, field: "local_time",
                "local_time '\(text)' is not a wall-clock time \"HH:MM\" or a date and time \"YYYY-MM-DDTHH:MM\" (no offset: each device's own zone applies)")
        }
        var clock = Substring(text)
        if text.count == 16 {
            let parts = text.split(separator: "T")
            guard parts.count == 2 else { throw refuse() }
            let day = parts[0].split(separator: "-", omittingEmptySubsequences: false)
            guard day.count == 3, day[0].count == 4, day[1].count == 2, day[2].count == 2, let year = Int(day[0]), let month = Int(day[1]),
                  let dayOfMonth = Int(day[2]), (1...12).contains(month), (1...31).contains(dayOfMonth) else { throw refuse() }
            date = (year, month, dayOfMonth)
            clock = parts[1]
        } else {
            date = nil
        }
        let pieces = clock.split(separator: ":", omittingEmptySubsequences: false)
        guard pieces.count == 2, pieces[0].count == 2, pieces[1].count == 2, let hour = Int(pieces[0]), let minute = Int(pieces[1]),
              (0...23).contains(hour), (0...59).contains(minute) else { throw refuse() }
        self.hour = hour
        self.minute = minute
    }

    /// When a device in `zone` gets the job (milliseconds since 1970): the next time the zone's
    /// clock shows it after `now` (within 24 hours), or on its date (`now` when that has passed).
    public func instant(in zone: TimeZone, after now: Int64) -> Int64 {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let start = Date(timeIntervalSince1970: Double(now) / 1000)
        let found: Date?
        if let date {
            found = calendar.date(from: DateComponents(year: date.year, month: date.month, day: date.day, hour: hour, minute: minute))
        } else {
            found = calendar.nextDate(after: start, matching: DateComponents(hour: hour, minute: minute, second: 0), matchingPolicy: .nextTime)
        }
        guard let found else { return now }
        return max(now, Int64((found.timeIntervalSince1970 * 1000).rounded()))
    }

    public var text: String {
        let clock = String(format: "%02d:%02d", hour, minute)
        guard let date else { return clock }
        return String(format: "%04d-%02d-%02dT", date.year, date.month, date.day) + clock
    }
}
