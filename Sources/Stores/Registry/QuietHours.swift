import Foundation

/// A user's quiet hours: a daily window of wall-clock time (`from` to `to`, across midnight when
/// `from` is later) in a zone — its own, else the user's, else the app's default. A job that
/// would reach the user inside it is deferred to its end, dropped, or sent all the same, as the
/// job's `quiet_hours` says.
public struct QuietHours: Sendable, Hashable {
    /// Minutes after midnight.
    public var from: Int
    public var to: Int
    /// An IANA zone; nil: the user's, else the app's default.
    public var zone: String?

    public init(from: Int, to: Int, zone: String? = nil) {
        self.from = from
        self.to = to
        self.zone = zone
    }

    /// Reads `{"from": "22:00", "to": "07:00", "zone"?: "Europe/Berlin"}`, naming the bad field.
    public init(json object: Any, field: String) throws(StoreError) {
        guard let object = object as? [String: Any] else {
            throw StoreError(.invalidField, field: field, "\(field) must be an object {\"from\": \"22:00\", \"to\": \"07:00\", \"zone\": \"Europe/Berlin\"} or null")
        }
        if let unknown = Set(object.keys).subtracting(["from", "to", "zone"]).sorted().first {
            throw StoreError(.invalidField, field: "\(field).\(unknown)", "\(field) takes from, to and zone; '\(unknown)' is not one of them")
        }
        let from = try Self.minutes(object["from"], field: "\(field).from")
        let to = try Self.minutes(object["to"], field: "\(field).to")
        guard from != to else {
            throw StoreError(.invalidField, field: "\(field).to", "\(field) from \(Self.clock(from)) to \(Self.clock(to)) is not a window: from and to must differ")
        }
        var zone: String?
        switch object["zone"] {
        case let name as String: zone = try TimeZones.checked(name, field: "\(field).zone")
        case nil, is NSNull: zone = nil
        default: throw StoreError(.invalidField, field: "\(field).zone", "\(field).zone must be an IANA time zone name such as Europe/Berlin")
        }
        self.init(from: from, to: to, zone: zone)
    }

    /// `"HH:MM"` (00:00 to 23:59) as minutes after midnight.
    public static func minutes(_ value: Any?, field: String) throws(StoreError) -> Int {
        guard let text = value as? String else {
            throw StoreError(value == nil ? .missingField : .invalidField, field: field, "\(field) must be a time of day \"HH:MM\" (24-hour, e.g. \"22:00\")")
        }
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count == 2, parts[1].count == 2, let hour = Int(parts[0]), let minute = Int(parts[1]),
              (0...23).contains(hour), (0...59).contains(minute) else {
            throw StoreError(.invalidField, field: field, "\(field) '\(text)' is not a time of day \"HH:MM\" (24-hour, 00:00 to 23:59)")
        }
        return hour * 60 + minute
    }

    public static func clock(_ minutes: Int) -> String { String(format: "%02d:%02d", minutes / 60, minutes % 60) }

    /// As the store keeps it: `22:00-07:00` or `22:00-07:00 Europe/Berlin`.
    public var stored: String { "\(Self.clock(from))-\(Self.clock(to))" + (zone.map { " \($0)" } ?? "") }

    public init?(stored: String?) {
        guard let stored, stored.count >= 11 else { return nil }
        let window = stored.prefix(11), rest = stored.dropFirst(11).trimmingCharacters(in: .whitespaces)
        guard let from = try? Self.minutes(String(window.prefix(5)), field: ""), let to = try? Self.minutes(String(window.suffix(5)), field: "") else { return nil }
        self.init(from: from, to: to, zone: rest.isEmpty ? nil : rest)
    }

    public var json: [String: Any] {
        var object: [String: Any] = ["from": Self.clock(from), "to": Self.clock(to)]
        if let zone { object["zone"] = zone }
        return object
    }

    /// When the window holding `instant` ends (milliseconds since 1970), or nil when `instant`
    /// is outside it. `zone` is used when the window names none.
    public func end(holding instant: Int64, zone fallback: TimeZone) -> Int64? {
        let zone = self.zone.flatMap(TimeZone.init(identifier:)) ?? fallback
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let date = Date(timeIntervalSince1970: Double(instant) / 1000)
        let parts = calendar.dateComponents([.hour, .minute], from: date)
        let now = (parts.hour ?? 0) * 60 + (parts.minute ?? 0)
        let inside = from < to ? (now >= from && now < to) : (now >= from || now < to)
        guard inside else { return nil }
        // The next wall-clock `to` after the instant (a day with a DST change moves it, not skips it).
        guard let end = calendar.nextDate(after: date, matching: DateComponents(hour: to / 60, minute: to % 60, second: 0), matchingPolicy: .nextTime)
        else { return nil }
        return Int64((end.timeIntervalSince1970 * 1000).rounded())
    }
}

/// IANA time zone names, checked against the machine's zone data.
public enum TimeZones {
    /// The name, when the zone data knows it; else the error names the field.
    public static func checked(_ name: String, field: String) throws(StoreError) -> String {
        guard !name.isEmpty, TimeZone(identifier: name) != nil, name.contains("/") || name == "UTC" else {
            throw StoreError(.invalidField, field: field, "\(field) '\(name)' is not an IANA time zone name (such as Europe/Berlin, America/New_York or UTC)")
        }
        return name
    }
}
