import Foundation
import Stores

/// `"badge": "increment"` (or `{"increment": N}`) in a job's `aps`: each registered device's
/// counter goes up by N in the registry, and the number it reaches is the badge APNs receives.
///
/// The decoder serialises the payload once with a placeholder number in place of the badge; each
/// device's payload is those bytes with the placeholder replaced by its count, so a broadcast
/// builds no JSON per device.
public struct BadgeIncrement: Sendable, Hashable {
    /// How much each device's counter goes up.
    public var amount: Int
    /// The serialised payload split around the placeholder: `prefix` + count + `suffix`.
    private var prefix: [UInt8]
    private var suffix: [UInt8]

    /// Larger than any badge an app shows, and unlikely elsewhere in a payload.
    static let placeholder = 987_654_321_987
    public static let maximumAmount = 10_000

    /// Reads `aps.badge`: nil when it is a number (sent as it is) or absent.
    static func read(_ aps: [String: Any]) throws(JobError) -> Int? {
        guard let badge = aps["badge"], !JSONValue.isNull(badge) else { return nil }
        if let number = JSONValue.number(badge), !JSONValue.isBoolean(number) { return nil }
        if let text = badge as? String, text == "increment" { return 1 }
        if let object = badge as? [String: Any], object.count == 1, let raw = object["increment"] as? NSNumber, !JSONValue.isBoolean(raw),
            raw.doubleValue == raw.doubleValue.rounded(), (1...Double(maximumAmount)).contains(raw.doubleValue)
        {
            return raw.intValue
        }
        throw JobError(.invalidPayload, field: "payload.aps.badge",
            "payload.aps.badge must be a number, \"increment\" or {\"increment\": N} with N from 1 to \(maximumAmount)")
    }

    /// `payload` serialised with the placeholder as its badge: the `"badge":` key and the number
    /// together, found exactly once (nil otherwise), so text elsewhere that happens to hold the
    /// same digits is left alone.
    init?(amount: Int, payload: [UInt8]) {
        let key = Array(#""badge":"#.utf8)
        let needle = key + Array(String(Self.placeholder).utf8)
        guard let range = Self.find(needle, in: payload), Self.find(needle, in: Array(payload[range.upperBound...])) == nil else { return nil }
        self.amount = amount
        prefix = Array(payload[..<(range.lowerBound + key.count)])
        suffix = Array(payload[range.upperBound...])
    }

    /// The payload a device with `count` unread receives.
    public func payload(count: Int) -> [UInt8] {
        prefix + Array(String(count).utf8) + suffix
    }

    /// The payload as a producer wrote it (`{"increment": N}`), for the chunk and retry jobs
    /// another worker counts again.
    public var producerPayload: [UInt8] {
        prefix + Array(#"{"increment":\#(amount)}"#.utf8) + suffix
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Range<Int>? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<(start + needle.count)].elementsEqual(needle) { return start..<(start + needle.count) }
        }
        return nil
    }
}
