import JSONStream
import Testing

/// Collects every event, and can stop at a chosen one.
private final class Recorder: JSONEventHandler {
    var events: [JSONEvent] = []
    var stopAt: JSONEvent?

    func handle(_ event: JSONEvent) -> Bool {
        events.append(event)
        return event != stopAt
    }
}

@Suite("Streaming JSON parser and writer")
struct JSONStreamParserTests {
    let document = #"{"id":"a\"b\u00e9/c","n":[1,-2.5e3,12345678901234567890123],"t":true,"f":false,"z":null,"o":{}}"#

    @Test("every event in order, numbers kept as written, strings unescaped; the same events whatever the piece size")
    func events() throws {
        let bytes = Array(document.utf8)
        var reference: [JSONEvent]?
        for size in [1, 2, 3, 7, bytes.count] {
            let recorder = Recorder()
            let parser = JSONStreamParser(handler: recorder)
            var start = 0
            while start < bytes.count {
                try parser.parse(Array(bytes[start..<min(bytes.count, start + size)]))
                start += size
            }
            try parser.finish()
            if let reference { #expect(recorder.events == reference, "piece size \(size)") } else { reference = recorder.events }
        }
        #expect(reference == [
            .startObject, .key("id"), .string("a\"bé/c"), .key("n"), .startArray, .number("1"), .number("-2.5e3"),
            .number("12345678901234567890123"), .endArray, .key("t"), .bool(true), .key("f"), .bool(false), .key("z"), .null,
            .key("o"), .startObject, .endObject, .endObject,
        ])
    }

    @Test("the writer rebuilds the document from the events, and refuses a value where a key belongs")
    func writer() throws {
        let recorder = Recorder()
        let parser = JSONStreamParser(handler: recorder)
        try parser.parse(Array(document.utf8))
        try parser.finish()
        let writer = JSONStreamWriter()
        for event in recorder.events { try writer.write(event) }
        #expect(String(decoding: writer.bytes, as: UTF8.self) == #"{"id":"a\"bé/c","n":[1,-2.5e3,12345678901234567890123],"t":true,"f":false,"z":null,"o":{}}"#)

        let bad = JSONStreamWriter()
        try bad.write(.startObject)
        #expect(throws: JSONStreamError.self) { try bad.write(.number("1")) }
    }

    @Test("syntax errors, bad UTF-8 and truncation throw with the byte offset across pieces")
    func errors() throws {
        func failure(_ pieces: [[UInt8]]) -> JSONStreamError? {
            let parser = JSONStreamParser(handler: Recorder())
            do {
                for piece in pieces { try parser.parse(piece) }
                try parser.finish()
                return nil
            } catch {
                return error
            }
        }
        let comma = failure([Array(#"{"a": [1, 2"#.utf8), Array(#",, 3]}"#.utf8)])
        #expect(comma?.offset == 12)
        #expect(comma?.message.isEmpty == false)
        #expect(failure([Array(#"{"a": "\#u{FF}"}"#.utf8.dropLast(3)) + [0xC3, 0x28, 0x22, 0x7D]]) != nil)
        let truncated = failure([Array(#"{"a": [1, 2"#.utf8)])
        #expect(truncated != nil)
        #expect(failure([Array("{} {}".utf8)]) != nil)
    }

    @Test("a handler that returns false stops the parse, which throws")
    func stop() {
        let recorder = Recorder()
        recorder.stopAt = .key("b")
        let parser = JSONStreamParser(handler: recorder)
        #expect(throws: JSONStreamError.self) { try parser.parse(Array(#"{"a":1,"b":2,"c":3}"#.utf8)) }
        #expect(recorder.events.last == .key("b"))
        #expect(!recorder.events.contains(.key("c")))
    }
}
