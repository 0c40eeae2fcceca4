/// At most `max` jobs of `types` per user in any `per` (an app's `caps:`): a device whose user
/// had that many within the window gets `filtered`, reason `frequency_cap`. Counted per user,
/// fleet-wide, in the delivery ledger's store; types no cap names are never counted.
public struct FrequencyCap: Sendable, Hashable, Decodable {
    public var types: [String]
    public var max: Int
    /// Seconds.
    public var per: Int

    public init(types: [String], max: Int, per: Int) {
        self.types = types
        self.max = max
        self.per = per
    }

    /// The cap's key in the store: its types, sorted (a cap changed to other types counts anew).
    public var key: String { types.sorted().joined(separator: ",") }

    enum CodingKeys: String, CodingKey, CaseIterable { case types, max, per }

    public init(from decoder: Decoder) throws {
        try KnownKeys.check(decoder, CodingKeys.self)
        let container = try decoder.container(keyedBy: CodingKeys.self)
        types = try container.decode([String].self, forKey: .types)
        guard !types.isEmpty, types.allSatisfy({ !$0.isEmpty }) else {
            throw DecodingError.dataCorruptedError(forKey: .types, in: container, debugDescription: "a cap names at least one notification type, none empty")
        }
        max = try container.decode(Int.self, forKey: .max)
        guard max >= 1 else {
            throw DecodingError.dataCorruptedError(forKey: .max, in: container, debugDescription: "\(max) is not a cap: at least 1 (to send none of a type, use the users' preferences)")
        }
        let text = try container.decode(String.self, forKey: .per)
        guard let seconds = Self.seconds(text), seconds > 0 else {
            throw DecodingError.dataCorruptedError(forKey: .per, in: container, debugDescription: "'\(text)' is not a duration such as 90m, 24h or 7d")
        }
        per = seconds
    }

    /// `90m`, `24h`, `7d` (or plain seconds).
    static func seconds(_ text: String) -> Int? {
        let units: [Character: Int] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        var digits = Substring(text), factor = 1
        if let last = text.last, let unit = units[last] {
            factor = unit
            digits = digits.dropLast()
        }
        guard let count = Int(digits), count > 0, count <= 366 * 86_400 / factor else { return nil }
        return count * factor
    }

    /// Whether a job of `type` counts against the cap.
    public func applies(to type: String?) -> Bool { type.map(types.contains) ?? false }
}
