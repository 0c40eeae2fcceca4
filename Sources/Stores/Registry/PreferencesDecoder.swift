import Foundation

/// Reads preferences as the stores keep them (two JSON objects of exception lists), remembering
/// the ones it has read: in a big group most users share a handful of preference sets, and a
/// JSON parse per device would cost more than reading the device.
public struct PreferencesDecoder {
    private struct Key: Hashable {
        var whitelist: String
        var blacklist: String
    }

    private var known: [Key: NotificationPreferences?] = [:]
    private static let limit = 4096

    public init() {}

    /// nil for a user who set none (both `{}`).
    public mutating func decode(whitelist: String?, blacklist: String?) -> NotificationPreferences? {
        let whitelist = whitelist ?? "{}", blacklist = blacklist ?? "{}"
        if whitelist == "{}" && blacklist == "{}" { return nil }
        let key = Key(whitelist: whitelist, blacklist: blacklist)
        if let found = known[key] { return found }
        let preferences = NotificationPreferences(whitelist: Self.exceptions(whitelist), blacklist: Self.exceptions(blacklist))
        let value: NotificationPreferences? = preferences == .none ? nil : preferences
        if known.count >= Self.limit { known.removeAll(keepingCapacity: true) }
        known[key] = value
        return value
    }

    public static func exceptions(_ text: String) -> [String: [String]] {
        guard let map = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: [String]] else { return [:] }
        return map
    }

    /// The stored form of an exception map: sorted keys, so equal preferences store equal text.
    public static func encode(_ map: [String: [String]]) -> String {
        (try? JSONSerialization.data(withJSONObject: map, options: [.sortedKeys])).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}
