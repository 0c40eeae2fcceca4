import Foundation
import Logging
import PushWorker
import Testing

/// `--log-format json`: each line one object a log shipper reads, whatever the metadata holds.
@Suite struct JSONLogHandlerTests {
    struct Refused: Error, CustomStringConvertible {
        var description: String { "the broker said \"no\"" }
    }

    @Test func eachLineIsOneObjectWithTheMetadataAsKeys() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("json-log-\(UUID().uuidString)")
        let descriptor = open(file.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        try #require(descriptor >= 0)
        defer {
            close(descriptor)
            try? FileManager.default.removeItem(at: file)
        }
        var handler = JSONLogHandler(label: "pushworker", level: .info, fileDescriptor: descriptor)
        handler.metadata = ["lane": "now"]
        let before = Date()
        handler.log(event: LogEvent(level: .info, message: "job done", metadata: [
            "job": "tx-1", "devices": .stringConvertible(1), "outcomes": "delivered=1",
        ], source: "PushWorker", file: #fileID, function: #function, line: #line))
        handler.log(event: LogEvent(
            level: .error, message: "line one\nand \"two\" \\ é 🚀 \u{1}", error: Refused(),
            metadata: ["tags": ["a", .dictionary(["z": "1", "b": ["x"]])], "time": "not the time", "lane": "later", "path": "a/b"],
            source: "AMQP", file: #fileID, function: #function, line: #line))
        let after = Date()
        let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 3 && lines.last == "")
        let objects = try lines.dropLast().map { try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }

        // Keys in order, as a reader of the raw line sees them.
        #expect(lines[0].hasPrefix(#"{"devices":"1","job":"tx-1","label":"pushworker","lane":"now","level":"info","message":"job done","outcomes":"delivered=1","time":""#))
        #expect(objects[0].count == 8)

        let second = objects[1]
        #expect(second["message"] as? String == "line one\nand \"two\" \\ é 🚀 \u{1}")
        #expect(second["level"] as? String == "error" && second["label"] as? String == "pushworker")
        #expect(second["lane"] as? String == "later" && second["path"] as? String == "a/b")
        #expect(lines[1].contains(#""path":"a/b""#))
        #expect(second["error.message"] as? String == #"the broker said "no""#)
        #expect(second["error.type"] as? String == String(reflecting: Refused.self))
        let tags = try #require(second["tags"] as? [Any])
        #expect(tags.first as? String == "a")
        let nested = try #require(tags.last as? [String: Any])
        #expect(nested["z"] as? String == "1" && nested["b"] as? [String] == ["x"])

        // The line's own time wins over metadata of that name: UTC, milliseconds, now.
        let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        for object in objects {
            let text = try #require(object["time"] as? String)
            #expect(text.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil, "\(text)")
            let time = try style.parse(text)
            #expect(time >= before.addingTimeInterval(-0.001) && time <= after.addingTimeInterval(0.001), "\(text)")
        }
    }
}
