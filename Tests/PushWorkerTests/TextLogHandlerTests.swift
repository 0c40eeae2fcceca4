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
    final class Lines: TextOutputStream, Sendable {
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
        try #require(descriptor >= 0)
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
        let format = DateFormatter()
        format.locale = Locale(identifier: "en_US_POSIX")
        format.dateFormat = "yyyy-MM-dd'T'HH:mm:ssZ"
        for (mine, theirs) in zip(written, expected) where !theirs.isEmpty {
            // Logged just after StreamLogHandler's line: the same second, or the next one.
            let myTime = try #require(format.date(from: String(mine.prefix { $0 != " " })), "\(mine)")
            let theirTime = try #require(format.date(from: String(theirs.prefix { $0 != " " })), "\(theirs)")
            #expect([0, 1].contains(myTime.timeIntervalSince(theirTime)), "\(mine) against \(theirs)")
            if myTime == theirTime { #expect(mine.prefix { $0 != " " } == theirs.prefix { $0 != " " }) }
            #expect(mine.drop { $0 != " " } == theirs.drop { $0 != " " })
        }
        #expect(written[0].hasSuffix(
            " info pushworker: app=demo devices=1 duration_ms=3 job=tx-1 lane=now outcomes=delivered=1 retrying=0 [PushWorker] job done"))
        #expect(written[2].contains("error.message=the broker refused it"))
    }

    /// Lines from many threads at once come out whole, one to a line, through a pipe (as to a
    /// log collector), where a write larger than `PIPE_BUF` goes in parts that others could split.
    @Test func linesFromManyThreadsStayWhole() async throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        let (reading, writing) = (ends[0], ends[1])
        let collected = Mutex<[UInt8]>([])
        let reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = read(reading, &buffer, buffer.count)
                if count <= 0 { break }
                collected.withLock { $0 += buffer[..<count] }
            }
            close(reading)
        }
        reader.start()
        let handler = TextLogHandler(label: "pushworker", level: .info, fileDescriptor: writing)
        let logger = Logger(label: "pushworker", factory: { _ in handler })
        let filler = String(repeating: "x", count: 3 * Int(PIPE_BUF))
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for line in 0..<100 { logger.info("line", metadata: ["at": "\(task)-\(line)", "filler": "\(filler)"]) }
                }
            }
        }
        close(writing)
        let deadline = ContinuousClock.now + .seconds(60)
        while !reader.isFinished, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        let lines = String(decoding: collected.withLock { $0 }, as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 800)
        #expect(lines.allSatisfy { $0.hasSuffix("filler=\(filler) [PushWorkerTests] line") })
        #expect(Set(lines.compactMap { $0.split(separator: " ").first { $0.hasPrefix("at=") } }).count == 800)
    }
}
