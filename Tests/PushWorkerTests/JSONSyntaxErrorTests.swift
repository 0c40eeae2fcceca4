import Foundation
import PushWorker
import Testing

@Suite("JSON syntax errors")
struct JSONSyntaxErrorTests {
    @Test(
        "a syntax error is located by line and column",
        arguments: [
            ("{\"a\": 1,\n  \"b\": x}", 2, 8),
            ("{\"a\": 1", 1, 8),
            ("", 1, 1),
            ("[1, 2]\n\n  ]", 3, 3),
            ("{\"é\": x}", 1, 7),
            // A token that cannot go where it is: its first byte is named, not its last.
            ("{\"a\": 1 \"bc\": 2}", 1, 9),
            ("{\"a\": 1 23}", 1, 9),
            ("[1, 2] \"tail\"", 1, 8),
        ])
    func located(document: String, line: Int, column: Int) {
        do {
            try JSONSyntaxError.check(Data(document.utf8))
            Issue.record("accepted \(document)")
        } catch {
            #expect(error.line == line && error.column == column, "\(error)")
            #expect("\(error)".hasPrefix("not valid JSON at line \(line), column \(column): "))
        }
    }

    @Test("truncated UTF-8 is refused")
    func truncatedUTF8() {
        var data = Data("{\"a\": \"".utf8)
        data.append(0xC3)
        data.append(contentsOf: "\"}".utf8)
        #expect(throws: JSONSyntaxError.self) { try JSONSyntaxError.check(data) }
    }

    @Test("valid JSON passes and comes back parsed")
    func valid() throws {
        let object = try JSONSyntaxError.check(Data("{\"aps\": {\"alert\": \"hi\"}}".utf8))
        #expect((object as? [String: Any])?["aps"] != nil)
    }

    @Test("a tree is written with sorted keys and slashes as they are; one that is not JSON (a date, NaN) gives nil, not a trap")
    func written() throws {
        let tree = try JSONDocument.parse(Array(#"{"b": [1, 2.5, true, null], "a": "x/y"}"#.utf8))
        #expect(JSONDocument.bytes(tree).map { String(decoding: $0, as: UTF8.self) } == #"{"a":"x/y","b":[1,2.5,true,null]}"#)
        #expect(JSONDocument.bytes("text").map { String(decoding: $0, as: UTF8.self) } == #""text""#)
        #expect(JSONDocument.bytes(["a": Date()]) == nil)
        #expect(JSONDocument.bytes(["a": [1, Double.nan]]) == nil)
    }
}
