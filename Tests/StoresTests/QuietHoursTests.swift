import Foundation
import Stores
import Testing

/// Quiet hours and time zones: read from commands with the bad field named, kept alike by every
/// store, and the window's end found in the zone's wall-clock time.
@Suite("Quiet hours and time zones")
struct QuietHoursTests {
    static func command(_ json: String) throws -> RegistryCommand { try RegistryCommand(json: Array(json.utf8)) }

    /// 2026-11-27 in Berlin (UTC+1): h:m local as milliseconds since 1970.
    static func berlin(_ hour: Int, _ minute: Int = 0, day: Int = 27) -> Int64 {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "Europe/Berlin")!
        let date = calendar.date(from: DateComponents(year: 2026, month: 11, day: day, hour: hour, minute: minute))!
        return Int64(date.timeIntervalSince1970 * 1000)
    }

    @Test("a window across midnight holds 22:00 to 06:59 in its zone and ends at the next 07:00; a daytime window likewise; outside, no end")
    func window() throws {
        let night = QuietHours(from: 22 * 60, to: 7 * 60, zone: "Europe/Berlin")
        let utc = TimeZone(identifier: "UTC")!
        #expect(night.end(holding: Self.berlin(21, 59), zone: utc) == nil)
        #expect(night.end(holding: Self.berlin(22, 0), zone: utc) == Self.berlin(7, day: 28))
        #expect(night.end(holding: Self.berlin(3, 30), zone: utc) == Self.berlin(7))
        #expect(night.end(holding: Self.berlin(7, 0), zone: utc) == nil)
        let lunch = QuietHours(from: 12 * 60, to: 13 * 60 + 30)
        // No zone of its own: the one given (the user's or the app's).
        #expect(lunch.end(holding: Self.berlin(12, 15), zone: TimeZone(identifier: "Europe/Berlin")!) == Self.berlin(13, 30))
        #expect(lunch.end(holding: Self.berlin(12, 15), zone: utc) == nil, "11:15 in UTC")
        #expect(QuietHours(stored: night.stored) == night && QuietHours(stored: lunch.stored) == lunch)
    }

    @Test("set_quiet_hours and set_time_zone read from their JSON; a malformed time, a window that is not one, an unknown zone name their field", arguments: [
        (#"{"command": "set_quiet_hours", "user": "u", "quiet_hours": {"from": "22:00", "to": "7:00"}}"#, "quiet_hours.to"),
        (#"{"command": "set_quiet_hours", "user": "u", "quiet_hours": {"from": "24:00", "to": "07:00"}}"#, "quiet_hours.from"),
        (#"{"command": "set_quiet_hours", "user": "u", "quiet_hours": {"from": "08:00", "to": "08:00"}}"#, "quiet_hours.to"),
        (#"{"command": "set_quiet_hours", "user": "u", "quiet_hours": {"from": "22:00", "to": "07:00", "zone": "Mars/Olympus"}}"#, "quiet_hours.zone"),
        (#"{"command": "set_quiet_hours", "user": "u", "quiet_hours": {"from": "22:00", "to": "07:00", "days": 5}}"#, "quiet_hours.days"),
        (#"{"command": "set_quiet_hours", "user": "u", "quiet_hours": "22-7"}"#, "quiet_hours"),
        (#"{"command": "set_quiet_hours", "user": "u"}"#, "quiet_hours"),
        (#"{"command": "set_time_zone", "user": "u", "zone": "Berlin"}"#, "zone"),
        (#"{"command": "set_time_zone", "user": "u", "zone": "EST"}"#, "zone"),
        (#"{"command": "set_time_zone", "user": "u", "app": "news", "zone": "UTC"}"#, "app"),
    ])
    func refused(_ json: String, _ field: String) {
        #expect { try Self.command(json) } throws: { ($0 as? StoreError)?.field == field }
    }

    @Test("the commands as read")
    func read() throws {
        #expect(try Self.command(#"{"command": "set_quiet_hours", "user": "u", "app": "news", "quiet_hours": {"from": "22:00", "to": "07:00"}}"#)
            == .setQuietHours(.userApp("u", app: "news"), QuietHours(from: 1320, to: 420)))
        #expect(try Self.command(#"{"command": "set_quiet_hours", "user": "u", "quiet_hours": null}"#) == .setQuietHours(.user("u"), nil))
        #expect(try Self.command(#"{"command": "set_time_zone", "user": "u", "zone": "America/New_York"}"#) == .setTimeZone(.user("u"), zone: "America/New_York"))
        #expect(try Self.command(#"{"command": "set_time_zone", "app": "news", "token": "AABBCCDDEEFF0011", "zone": null}"#)
            == .setTimeZone(.device(app: "news", token: "aabbccddeeff0011"), zone: nil))
    }

    @Test("every store keeps zones and quiet hours: a device's zone before its user's, a user's quiet hours for the app before those for every app", arguments: RegistryStoreTests.Kind.allCases)
    func kept(_ kind: RegistryStoreTests.Kind) async throws {
        let store = try await kind.makeStore()
        let (a, b, c, d) = (RegistryStoreTests.token(1), RegistryStoreTests.token(2), RegistryStoreTests.token(3), RegistryStoreTests.token(4))
        for json in [
            #"{"command": "register_device", "app": "news", "token": "\#(a)", "user": "ada"}"#,
            #"{"command": "register_device", "app": "news", "token": "\#(b)", "user": "ada"}"#,
            #"{"command": "register_device", "app": "news", "token": "\#(c)", "user": "bob"}"#,
            #"{"command": "register_device", "app": "news", "token": "\#(d)"}"#,
            #"{"command": "set_time_zone", "user": "ada", "zone": "Europe/Berlin"}"#,
            #"{"command": "set_time_zone", "app": "news", "token": "\#(b)", "zone": "Asia/Tokyo"}"#,
            #"{"command": "set_quiet_hours", "user": "ada", "quiet_hours": {"from": "22:00", "to": "07:00"}}"#,
            #"{"command": "set_quiet_hours", "user": "ada", "app": "news", "quiet_hours": {"from": "21:00", "to": "08:00", "zone": "UTC"}}"#,
            #"{"command": "set_quiet_hours", "user": "bob", "quiet_hours": {"from": "12:00", "to": "13:00"}}"#,
        ] { try await store.apply(try Self.command(json)) }
        let news = try await store.timing(app: "news", tokens: [a, b, c, d, RegistryStoreTests.token(9)], preferencesApp: "news")
        #expect(news[a] == DeviceTiming(zone: "Europe/Berlin", quietHours: QuietHours(from: 1260, to: 480, zone: "UTC")))
        #expect(news[b]?.zone == "Asia/Tokyo", "the device's own zone")
        #expect(news[c] == DeviceTiming(quietHours: QuietHours(from: 720, to: 780)))
        #expect(news[d] == nil && news.count == 3, "nothing kept for an unconnected device or an unknown token")
        let elsewhere = try await store.timing(app: "news", tokens: [a], preferencesApp: "sports")
        #expect(elsewhere[a]?.quietHours == QuietHours(from: 1320, to: 420), "another app: the user's for every app")
        #expect(try await store.timing(.user("ada")) == DeviceTiming(zone: "Europe/Berlin", quietHours: QuietHours(from: 1320, to: 420)))
        #expect(try await store.timing(.userApp("ada", app: "news")).quietHours?.zone == "UTC")
        #expect(try await store.timing(.device(app: "news", token: b)).zone == "Asia/Tokyo")
        // Cleared.
        try await store.apply(try Self.command(#"{"command": "set_quiet_hours", "user": "ada", "app": "news", "quiet_hours": null}"#))
        try await store.apply(try Self.command(#"{"command": "set_time_zone", "app": "news", "token": "\#(b)", "zone": null}"#))
        let after = try await store.timing(app: "news", tokens: [a, b], preferencesApp: "news")
        #expect(after[a]?.quietHours == QuietHours(from: 1320, to: 420) && after[b]?.zone == "Europe/Berlin")
        await #expect(throws: StoreError.self) {
            try await store.apply(try Self.command(#"{"command": "set_time_zone", "app": "news", "token": "\#(RegistryStoreTests.token(9))", "zone": "UTC"}"#))
        }
        // Preferences as before: an app's quiet hours are not an app's preference lists.
        #expect(try await store.preferences(.userApp("ada", app: "news")) == nil)
    }
}
