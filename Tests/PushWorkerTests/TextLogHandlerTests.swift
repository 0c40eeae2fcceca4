import Foundation
import Logging
import PushWorker
import Synchronization
import Testing

/// The worker's text log is written by its own handler for speed; what operators and their tools
/// read must stay what swift-log's `StreamLogHandler` wrote.
@Suite struct TextLogHandlerTests {
    struct Refused: Error, CustomStringConvertible {
        var description: String { "the broker refused it" }
    }

    /// Collects what `StreamLogHandler` writes.
    final class Lines: TextOutputStream, @unchecked Sendable {
        private let text = Mutex("")
        func write(_ string: String) { text.withLock { $0 += string } }
        var all: String { text.withLock { $0 } }
    }

    static let events: [LogEvent] = [
        LogEvent(level: .info, message: "job done", metadata: [
            "job": "tx-1", "app": "demo", "devices": "1", "outcomes": "delivered=1", "duration_ms": .stringConvertible(3), "retrying": "0",
        ], source: "PushWorker", file: #fileID, function: #function, line: #line),
        LogEvent(level: .warning, message: "no metadata", metadata: nil, source: "PushWorker", file: #fileID, function: #function, line: #line),
        LogEvent(level: .error, message: "cannot publish", error: Refused(), metadata: ["queue": "results", "tags": ["a", "b"]],
            source: "AMQP", file: #fileID, function: #function, line: #line),
    ]

    @Test func linesAsStreamLogHandlerWritesThem() throws {
        let lines = Lines()
        var stream = StreamLogHandler(label: "pushworker", stream: lines, metadataProvider: nil)
        stream.metadata = ["lane": "now"]
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("text-log-\(UUID().uuidString)")
        let descriptor = open(file.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        #expect(descriptor >= 0)
        defer {
            close(descriptor)
            try? FileManager.default.removeItem(at: file)
        }
        var text = TextLogHandler(label: "pushworker", level: .info, fileDescriptor: descriptor)
        text.metadata = ["lane": "now"]
        for event in Self.events {
            stream.log(event: event)
            text.log(event: event)
        }
        let expected = lines.all.split(separator: "\n", omittingEmptySubsequences: false)
        let written = try String(contentsOf: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        #expect(written.count == Self.events.count + 1)
        #expect(written.last == "")
        let timestamp = try Regex(#"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} "#)
        for (mine, theirs) in zip(written, expected) where !theirs.isEmpty {
            // The time may have moved on a second between the two; the rest is the same text.
            #expect(mine.prefixMatch(of: timestamp) != nil, "\(mine)")
            #expect(mine.drop { $0 != " " } == theirs.drop { $0 != " " })
        }
        #expect(written[0].hasSuffix(
            " info pushworker: app=demo devices=1 duration_ms=3 job=tx-1 lane=now outcomes=delivered=1 retrying=0 [PushWorker] job done"))
        #expect(written[2].contains("error.message=the broker refused it"))
    }

    /// Lines from many threads at once come out whole, one to a line.
    @Test func linesFromManyThreadsStayWhole() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("text-log-\(UUID().uuidString)")
        let descriptor = open(file.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        #expect(descriptor >= 0)
        defer {
            close(descriptor)
            try? FileManager.default.removeItem(at: file)
        }
        let handler = TextLogHandler(label: "pushworker", level: .info, fileDescriptor: descriptor)
        let logger = Logger(label: "pushworker", factory: { _ in handler })
        let filler = String(repeating: "x", count: 5000)
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for line in 0..<200 { logger.info("line", metadata: ["at": "\(task)-\(line)", "filler": "\(filler)"]) }
                }
            }
        }
        let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 1600)
        #expect(lines.allSatisfy { $0.hasSuffix("filler=\(filler) [PushWorkerTests] line") })
        let ats = Set(lines.compactMap { line in line.split(separator: " ").first { $0.hasPrefix("at=") } })
        #expect(ats.count == 1600)
    }
}
