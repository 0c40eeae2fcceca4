import Foundation
import Testing

@testable import PushWorker

/// `JSONTreeReader` may only ever give the tree Foundation gives: every document it reads is read
/// by `JSONSerialization` too, and the two trees must match in every type and byte.
@Suite struct JSONTreeReaderTests {
    /// Documents the reader must read itself (the fast path is what it is for), each checked
    /// against Foundation's tree.
    static let read: [String] = [
        #"{"id": "order-1", "audience": {"tokens": ["a1b2c3"]}, "payload": {"aps": {"alert": {"title": "Order", "body": "Your code is 4711"}}}, "reply_to": "push.results"}"#,
        #"{}"#, #"[]"#, #" { } "#, "\t[ ]\r\n", #""text""#, #"0"#, #"-0"#, #"7"#, #"-42"#, #"123456789012345678"#, #"-123456789012345678"#,
        #"true"#, #"false"#, #"null"#, #"[true,false,null,0,1,-1,"",{}]"#,
        #"{"a": 1, "a": 2}"#,
        #"{"escapes": "\" \\ \/ \b \f \n \r \t \u0041 \u00e9 \u20ac \ud83d\ude00 \u0000"}"#,
        #"{"grüße": "Grüße, 你好, 😀", "e\u0301": "combining"}"#,
        #"{"priority": 10, "expiration": 1700000000, "badge": -1, "nested": [[[[{"deep": [1, [2, [3]]]}]]]]}"#,
        "{\n  \"pretty\" : [\n    1,\n    2\n  ]\n}\n",
        // As deep as the reader goes.
        String(repeating: "[", count: 256) + String(repeating: "]", count: 256),
    ]

    /// Documents it must leave to Foundation: what Foundation reads differently, or refuses.
    static let declined: [String] = [
        #"{"a": 1,}"#, #"[1, 2,]"#, #"1.5"#, #"1e3"#, #"1E3"#, #"-1.0e-2"#, #"1234567890123456789"#, #"18446744073709551615"#,
        #"01"#, #"-"#, #"--1"#, #"1-"#, #"[1:2]"#, #""\ud83d""#, #""\ude00""#, #""\ud83d\u0041""#, #""\uXYZW""#, #""\x""#,
        "\"a\u{1}b\"", "\u{FEFF}{}", "\"\u{FEFF}\"", "\"\\n\u{FEFF}x\"", "\"x\u{FEFF}\"", #""\uFEFF""#, #"{"a" 1}"#, #"{1: 2}"#, #"{"a": 1 "b": 2}"#, #"[1 2]"#, #"tru"#, #"nul"#,
        #"{"a": 1} x"#, "", " ", #"{"#, #"["#, #"""#, #""abc"#, "{\"a\": \"\\", "[\0]",
        String(repeating: "[", count: 300) + String(repeating: "]", count: 300),
        // One level past the reader's 256 (Foundation's limit is 512).
        String(repeating: "[", count: 257) + String(repeating: "]", count: 257),
    ]

    @Test(arguments: read)
    func readsAsFoundationDoes(_ document: String) throws {
        let bytes = Array(document.utf8)
        let tree = try #require(JSONTreeReader.tree(bytes), "the reader declined \(document)")
        let foundation = try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
        #expect(Self.difference(tree, foundation) == nil, "\(document)")
        // And through the one entry point the worker uses.
        #expect(Self.difference(try JSONDocument.parse(bytes), foundation) == nil)
    }

    @Test(arguments: declined)
    func leavesToFoundation(_ document: String) {
        let bytes = Array(document.utf8)
        #expect(JSONTreeReader.tree(bytes) == nil, "\(document)")
        // What the worker then gets is Foundation's answer: its tree, or its located error.
        let foundation = Result { try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed]) }
        let parsed = Result { () throws(JSONSyntaxError) in try JSONDocument.parse(bytes) }
        switch (parsed, foundation) {
        case let (.success(ours), .success(theirs)):
            #expect(Self.difference(ours, theirs) == nil, "\(document)")
        case let (.failure(ours), .failure(theirs)):
            #expect(ours == JSONSyntaxError.located(theirs, in: Data(bytes)))
        default:
            Issue.record("JSONDocument.parse and Foundation disagree on \(document): \(parsed) against \(foundation)")
        }
    }

    /// Random documents, then the same with bytes changed, dropped and added: whatever the reader
    /// reads, Foundation reads to the same tree; an unchanged one it reads itself.
    @Test func randomDocumentsAndTheirCorruptions() throws {
        var random = SplitMix64(seed: 0x5EED_0000_2026_1202)
        var read = 0
        var declinedCorruptions = 0
        for round in 0..<3_000 {
            let document = Array(Self.randomValue(&random, depth: 0).utf8)
            let tree = try #require(JSONTreeReader.tree(document), "round \(round): declined \(String(decoding: document, as: UTF8.self))")
            let foundation = try JSONSerialization.jsonObject(with: Data(document), options: [.fragmentsAllowed])
            try #require(Self.difference(tree, foundation) == nil, "round \(round): \(String(decoding: document, as: UTF8.self))")
            read += 1
            for _ in 0..<4 {
                var corrupt = document
                let position = Int(random.next() % UInt64(corrupt.count + 1))
                let byte = Self.interesting[Int(random.next() % UInt64(Self.interesting.count))]
                switch random.next() % 3 {
                case 0 where position < corrupt.count: corrupt[position] = byte
                case 1 where position < corrupt.count: corrupt.remove(at: position)
                default: corrupt.insert(byte, at: position)
                }
                let theirs = try? JSONSerialization.jsonObject(with: Data(corrupt), options: [.fragmentsAllowed])
                guard let ours = JSONTreeReader.tree(corrupt) else {
                    declinedCorruptions += 1
                    continue
                }
                let text = String(decoding: corrupt, as: UTF8.self)
                let foundationTree = try #require(theirs, "round \(round): the reader read what Foundation refuses: \(text)")
                try #require(Self.difference(ours, foundationTree) == nil, "round \(round): \(text)")
            }
        }
        #expect(read == 3_000)
        // Most corruptions break the document; the reader must have declined them.
        #expect(declinedCorruptions > 3_000)
    }

    /// Bytes a corruption puts in: JSON's own punctuation, digits, escapes, and bytes outside ASCII.
    static let interesting: [UInt8] = Array(#"{}[]:,"\ -0123456789.eEtfnu+/"#.utf8) + [0x00, 0x01, 0x1F, 0x7F, 0x80, 0xBF, 0xC3, 0xE2, 0xED, 0xEF, 0xF0, 0xFF]

    static func randomValue(_ random: inout SplitMix64, depth: Int) -> String {
        let space = [" ", "", "", "\n", "\t", "\r\n  "]
        func ws(_ random: inout SplitMix64) -> String { space[Int(random.next() % UInt64(space.count))] }
        switch random.next() % (depth > 4 ? 4 : 6) {
        case 0: return randomString(&random)
        case 1:
            let digits = Int(random.next() % 18) + 1
            var text = random.next() % 2 == 0 ? "-" : ""
            text += String((random.next() % 9) + 1)
            for _ in 1..<digits { text += String(random.next() % 10) }
            return random.next() % 5 == 0 ? "0" : text
        case 2: return ["true", "false", "null"][Int(random.next() % 3)]
        case 3: return randomString(&random)
        case 4:
            let members = (0..<Int(random.next() % 5)).map { _ in
                "\(ws(&random))\(randomString(&random))\(ws(&random)):\(ws(&random))\(randomValue(&random, depth: depth + 1))\(ws(&random))"
            }
            return "{" + members.joined(separator: ",") + ws(&random) + "}"
        default:
            let elements = (0..<Int(random.next() % 5)).map { _ in "\(ws(&random))\(randomValue(&random, depth: depth + 1))\(ws(&random))" }
            return "[" + elements.joined(separator: ",") + ws(&random) + "]"
        }
    }

    static func randomString(_ random: inout SplitMix64) -> String {
        let pieces = [
            "a", "token", "Ab9", " ", "é", "你", "😀", "e\u{301}", #"\""#, #"\\"#, #"\/"#, #"\n"#, #"\t"#, #"\b"#, #"\f"#, #"\r"#,
            #"\u0041"#, #"\u00E9"#, #"\u4f60"#, #"\uD83D\uDE00"#, #"\u0000"#, #"\u001f"#, "'", "{", "]", ":", ",",
        ]
        let count = Int(random.next() % 6)
        return "\"" + (0..<count).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }.joined() + "\""
    }

    /// Where two trees differ, nil when they are the same: the same types (a string is not a
    /// number, a boolean not an integer: their type encodings differ), the same bytes of every
    /// string and key.
    static func difference(_ a: Any, _ b: Any, at path: String = "$") -> String? {
        if type(of: a) == String.self || type(of: b) == String.self {
            guard let x = a as? String, let y = b as? String, type(of: a) == type(of: b) else { return "\(path): \(a) against \(b)" }
            return Array(x.utf8) == Array(y.utf8) ? nil : "\(path): \(x.debugDescription) against \(y.debugDescription)"
        }
        if type(of: a) == NSNull.self || type(of: b) == NSNull.self {
            return type(of: a) == type(of: b) ? nil : "\(path): \(a) against \(b)"
        }
        if let x = a as? [String: Any] {
            guard let y = b as? [String: Any] else { return "\(path): an object against \(b)" }
            guard Set(x.keys.map { Array($0.utf8) }) == Set(y.keys.map { Array($0.utf8) }), x.count == y.count else {
                return "\(path): keys \(x.keys.sorted()) against \(y.keys.sorted())"
            }
            for (key, value) in x {
                if let found = difference(value, y[key]!, at: "\(path).\(key)") { return found }
            }
            return nil
        }
        if let x = a as? [Any] {
            guard let y = b as? [Any], x.count == y.count else { return "\(path): an array against \(b)" }
            for (offset, pair) in zip(x, y).enumerated() {
                if let found = difference(pair.0, pair.1, at: "\(path)[\(offset)]") { return found }
            }
            return nil
        }
        guard type(of: a) is NSNumber.Type, type(of: b) is NSNumber.Type, let x = a as? NSNumber, let y = b as? NSNumber else {
            return "\(path): \(type(of: a)) against \(type(of: b))"
        }
        let (xType, yType) = (String(cString: x.objCType), String(cString: y.objCType))
        guard xType == yType, x == y, type(of: a) == type(of: b) else { return "\(path): \(x) (\(xType)) against \(y) (\(yType))" }
        return nil
    }
}

/// A small seeded generator, so a failing round can be run again.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
