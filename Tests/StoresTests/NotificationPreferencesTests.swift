import Stores
import Testing

@Suite("Preference rules")
struct NotificationPreferencesTests {
    struct Case: Sendable, CustomStringConvertible {
        let whitelist: [String: [String]]
        let blacklist: [String: [String]]
        let type: String?
        let subtype: String?
        let passes: Bool
        let why: String
        var description: String { why }
    }

    /// The table of docs/jobs.md, and the corners around it.
    static let cases: [Case] = [
        Case(whitelist: [:], blacklist: [:], type: "grades", subtype: "final-grade", passes: true, why: "empty lists pass everything"),
        Case(whitelist: [:], blacklist: [:], type: nil, subtype: nil, passes: true, why: "no type, no lists"),
        Case(whitelist: ["grades": []], blacklist: [:], type: "grades", subtype: "midterm", passes: true, why: "whitelisted type"),
        Case(whitelist: ["grades": []], blacklist: [:], type: "grades", subtype: nil, passes: true, why: "whitelisted type, no subtype"),
        Case(whitelist: ["grades": []], blacklist: [:], type: "news", subtype: nil, passes: false, why: "type not in a non-empty whitelist"),
        Case(whitelist: ["grades": ["final-grade"]], blacklist: [:], type: "grades", subtype: "final-grade", passes: false, why: "an exception of the whitelist"),
        Case(whitelist: ["grades": ["final-grade"]], blacklist: [:], type: "grades", subtype: "midterm", passes: true, why: "whitelisted, not an exception"),
        Case(whitelist: [:], blacklist: ["grades": []], type: "grades", subtype: "midterm", passes: false, why: "blacklisted type"),
        Case(whitelist: [:], blacklist: ["grades": []], type: "news", subtype: nil, passes: true, why: "type not blacklisted"),
        Case(whitelist: [:], blacklist: ["grades": ["final-grade"]], type: "grades", subtype: "final-grade", passes: true, why: "an exception of the blacklist"),
        Case(whitelist: [:], blacklist: ["grades": ["final-grade"]], type: "grades", subtype: nil, passes: false, why: "blacklisted, no subtype to be an exception"),
        Case(whitelist: ["grades": []], blacklist: ["grades": ["final-grade"]], type: "grades", subtype: "midterm", passes: false, why: "both lists: blacklisted"),
        Case(whitelist: ["grades": []], blacklist: ["grades": ["final-grade"]], type: "grades", subtype: "final-grade", passes: true, why: "both lists: whitelisted and a blacklist exception"),
        Case(whitelist: ["grades": ["final-grade"]], blacklist: ["grades": ["final-grade"]], type: "grades", subtype: "final-grade", passes: false, why: "both lists: a whitelist exception"),
        Case(whitelist: ["grades": []], blacklist: ["grades": []], type: nil, subtype: "x", passes: true, why: "no type is never filtered"),
    ]

    @Test("each row of the rules", arguments: cases)
    func rule(_ row: Case) {
        let preferences = NotificationPreferences(whitelist: row.whitelist, blacklist: row.blacklist)
        #expect(preferences.allows(type: row.type, subtype: row.subtype) == row.passes)
    }
}
