import Foundation
import Stores
import Testing

/// The reads that jobs and registry commands make of every field: they must tell the same
/// things apart as the runtime's casts did, for values JSONSerialization makes and for values
/// built in Swift.
@Suite("JSON values read without bridging")
struct JSONValueTests {
    static func parsed(_ text: String) throws -> Any {
        try #require((try JSONSerialization.jsonObject(with: Data("[\(text)]".utf8)) as? [Any])?.first)
    }

    @Test("null is null and nothing else is; numbers and booleans are numbers, told apart; strings, arrays and objects are neither")
    func parsedValues() throws {
        #expect(JSONValue.isNull(try Self.parsed("null")))
        for text in [#""null""#, "0", "false", "[]", "{}", "[null]", #"{"a":null}"#] {
            #expect(!JSONValue.isNull(try Self.parsed(text)), "\(text)")
        }
        for text in ["0", "-3", "1.5", "1e300", "99999999999", "255", "1", "127", "-128"] {
            let number = try #require(JSONValue.number(try Self.parsed(text)), "\(text)")
            #expect(!JSONValue.isBoolean(number), "\(text)")
        }
        for text in ["true", "false"] {
            let number = try #require(JSONValue.number(try Self.parsed(text)), "\(text)")
            #expect(JSONValue.isBoolean(number), "\(text)")
        }
        for text in [#""1""#, #""true""#, "null", "[1]", #"{"a":1}"#, "[]", "{}"] {
            #expect(JSONValue.number(try Self.parsed(text)) == nil, "\(text)")
        }
    }

    @Test("values built in Swift read as the runtime's casts read them")
    func swiftValues() {
        let values: [Any] = [5, 1.5, true, Int64(7), "5", [1], ["a": 1], NSNull()]
        for value in values {
            #expect(JSONValue.isNull(value) == (value is NSNull), "\(value)")
            #expect(JSONValue.number(value) == (value as? NSNumber), "\(value)")
        }
        #expect(JSONValue.number(5)?.intValue == 5)
        #expect(JSONValue.number(true).map(JSONValue.isBoolean) == true)
        #expect(JSONValue.number(5).map(JSONValue.isBoolean) == false)
    }
}
