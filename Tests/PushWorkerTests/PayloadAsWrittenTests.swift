import Foundation
import PushWorker
import Testing

/// A job's `payload` goes to APNs as the producer wrote it, without its whitespace; a payload the
/// worker builds or changes (a counted badge, a Live Activity) is written from the tree.
@Suite("The payload as the producer wrote it")
struct PayloadAsWrittenTests {
    static let decoder = JobDecoder(apps: ["demo": "com.example.app"])
    static let token = String(repeating: "ab", count: 32)

    func payload(of body: String) throws -> String {
        String(decoding: try Self.decoder.decode(Array(body.utf8)).payload, as: UTF8.self)
    }

    @Test("the producer's order and text stay; whitespace outside strings goes")
    func asWritten() throws {
        let body = """
            {
              "payload" : {
                "zeta": [1, 2.50, {"b": "x y"}],
                "aps": { "alert": { "title": "A \\"quoted\\" }{ ] title", "body": "tab\\there" }, "sound": "default" },
                "url": "https:\\/\\/example.com/a b"
              },
              "audience": {"tokens": ["\(Self.token)"]}
            }
            """
        #expect(try payload(of: body) == #"{"zeta":[1,2.50,{"b":"x y"}],"aps":{"alert":{"title":"A \"quoted\" }{ ] title","body":"tab\there"},"sound":"default"},"url":"https:\/\/example.com/a b"}"#)
    }

    @Test("the payload anywhere among the job's fields, next to values of every kind")
    func amongFields() throws {
        let body = #"{"id":"j1","priority":5,"audience":{"tokens":["\#(Self.token)"]},"type":"chat","payload":{"aps":{"content-available":1}},"push_type":"background"}"#
        #expect(try payload(of: body) == #"{"aps":{"content-available":1}}"#)
    }

    @Test("a payload the worker changes is written from the tree, keys sorted: a counted badge")
    func countedBadge() throws {
        let body = #"{"audience":{"tokens":["\#(Self.token)"]},"payload":{"z":1,"aps":{"alert":"hi","badge":{"increment":1}}}}"#
        let job = try Self.decoder.decode(Array(body.utf8))
        let text = String(decoding: job.payload, as: UTF8.self)
        #expect(text.hasPrefix(#"{"aps":{"alert":"hi","badge":"#), "\(text)")
        #expect(text.hasSuffix(#"},"z":1}"#), "\(text)")
    }

    @Test("a key written twice or with escapes: the tree decides, and the bytes are still the payload's")
    func ambiguous() throws {
        let twice = #"{"audience":{"tokens":["\#(Self.token)"]},"payload":{"aps":{"alert":"first"}},"payload":{"aps":{"alert":"second"}}}"#
        let parsed = try JSONSerialization.jsonObject(with: Data(try payload(of: twice).utf8)) as? [String: Any]
        let alert = (parsed?["aps"] as? [String: Any])?["alert"] as? String
        #expect(alert == "first" || alert == "second")
        let escaped = #"{"audience":{"tokens":["\#(Self.token)"]},"p\u0061yload":{"b":1,"aps":{"alert":"hi"}}}"#
        #expect(try payload(of: escaped) == #"{"aps":{"alert":"hi"},"b":1}"#)
    }

    @Test("a key twice or escaped inside the payload: what is sent is the tree that was checked, not the text")
    func nestedAmbiguity() throws {
        // The text would send an alert under push_type background, and a badge placeholder.
        for payload in [
            #"{"aps":{"alert":"x"},"aps":{"content-available":1}}"#,
            #"{"aps":{"badge":"increment"},"aps":{"alert":"x"}}"#,
            #"{"aps":{"alert":"x"},"\u0061ps":{"content-available":1}}"#,
            #"{"aps":{"alert":{"title":"a","title":"b"}}}"#,
        ] {
            let body = #"{"audience":{"tokens":["\#(Self.token)"]},"payload":"# + payload + "}"
            let job = try Self.decoder.decode(Array(body.utf8))
            let sent = String(decoding: job.payload, as: UTF8.self)
            #expect(sent != payload, "sent as written: \(payload)")
            let tree = try JSONSerialization.jsonObject(with: Data(job.payload)) as? [String: Any]
            #expect(tree?.count == 1, "\(sent)")
        }
    }

    @Test("an object of many keys: kept as written when they differ, from the tree when one comes twice, early or late")
    func manyKeys() throws {
        // Past 16 keys an object's keys are held in a set: both ways must find a repeat.
        let keys = (0..<40).map { "k\($0)" }
        let distinct = "{" + keys.map { #""\#($0)": 1"# }.joined(separator: ", ") + #", "aps": {"alert": "hi"}}"#
        let body = { (payload: String) in #"{"audience":{"tokens":["\#(Self.token)"]},"payload":"# + payload + "}" }
        #expect(try payload(of: body(distinct)) == distinct.replacingOccurrences(of: " ", with: ""))
        for (first, again) in [(3, 5), (3, 30), (20, 39)] {
            var repeated = keys
            repeated[again] = keys[first]
            let payload = "{" + repeated.enumerated().map { #""\#($1)":\#($0)"# }.joined(separator: ",") + #","aps":{"alert":"hi"}}"#
            let job = try Self.decoder.decode(Array(body(payload).utf8))
            let tree = try JSONSerialization.jsonObject(with: Data(job.payload)) as? [String: Any]
            #expect(tree?.count == 40, "key \(first) again at \(again): \(String(decoding: job.payload, as: UTF8.self))")
            #expect(String(decoding: job.payload, as: UTF8.self) != payload, "sent as written with key \(first) again at \(again)")
        }
    }

    @Test("a payload whose escapes take it over APNs' limit is written again from the tree, which fits")
    func escapesOverTheLimit() throws {
        // 1,000 é written as \u00e9 (6 bytes each) are 2 bytes each once written again.
        let text = String(repeating: "\\u00e9", count: 1000)
        let body = #"{"audience":{"tokens":["\#(Self.token)"]},"payload":{"aps":{"alert":""# + text + #""}}}"#
        let job = try Self.decoder.decode(Array(body.utf8))
        #expect(job.payload.count < 4096)
        #expect(String(decoding: job.payload, as: UTF8.self).contains(String(repeating: "é", count: 1000)))
    }

    @Test("a chunk job carries the bytes, and decoding it again gives the same bytes")
    func sameInChunks() throws {
        let body = #"{"audience":{"tokens":["\#(Self.token)"]},"payload":{ "z": true, "aps": {"alert": "hi"} }}"#
        let job = try Self.decoder.decode(Array(body.utf8))
        let chunk = try Self.decoder.decode(try job.chunkBody(devices: [Recipient(token: Self.token, user: nil)]), chunk: true)
        #expect(chunk.payload == job.payload)
        #expect(String(decoding: job.payload, as: UTF8.self) == #"{"z":true,"aps":{"alert":"hi"}}"#)
    }
}
