import Foundation
import Stores
import Testing

/// The one reading of "RFC 3339 or Unix seconds" that jobs, `get_deliveries` and the command line share.
@Suite("RFC 3339 or Unix seconds")
struct RFC3339Tests {
    static func json(_ text: String) throws -> Any {
        try #require((try JSONSerialization.jsonObject(with: Data("[\(text)]".utf8)) as? [Any])?.first)
    }

    @Test("a JSON string is an RFC 3339 time, a JSON number whole Unix seconds from 0 to 99999999999; anything else is no time")
    func fromJSON() throws {
        #expect(RFC3339.milliseconds(json: try Self.json(#""2026-11-24T09:00:00Z""#)) == 1_795_510_800_000)
        #expect(RFC3339.milliseconds(json: try Self.json(#""2026-11-24T10:00:00.25+01:00""#)) == 1_795_510_800_250)
        #expect(RFC3339.milliseconds(json: try Self.json("1795510800")) == 1_795_510_800_000)
        #expect(RFC3339.milliseconds(json: try Self.json("0")) == 0)
        #expect(RFC3339.milliseconds(json: try Self.json("99999999999")) == 99_999_999_999_000)
        for refused in [#""1795510800""#, #""Tuesday""#, "true", "false", "1.5", "-1", "100000000000", "1e300", "null", "{}", "[1]"] {
            #expect(RFC3339.milliseconds(json: try Self.json(refused)) == nil, "\(refused)")
        }
    }

    @Test("on a command line, digits are Unix seconds and other text an RFC 3339 time")
    func fromCommandLine() {
        #expect(RFC3339.milliseconds(commandLine: "1795510800") == 1_795_510_800_000)
        #expect(RFC3339.milliseconds(commandLine: "2026-11-24T09:00:00Z") == 1_795_510_800_000)
        for refused in ["", "-5", "+5", "1.5", "100000000000", "99999999999999999999999", "Tuesday", "2026-11-24"] {
            #expect(RFC3339.milliseconds(commandLine: refused) == nil, "\(refused)")
        }
    }
}
