import ArgumentParser
import Foundation
import Logging
import PushWorker

/// The log's cost per line: the "job done" line a worker logs for every job, COUNT times through
/// swift-log's `StreamLogHandler`, `TextLogHandler` and `JSONLogHandler`, standard error sent to
/// /dev/null meanwhile, with the CPU time per line (the metadata's making included).
struct LogBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log",
        abstract: "Log a job's \"job done\" line COUNT times through each log handler: CPU µs per line.")

    @Option(help: "Lines logged through each handler.") var count = 100_000

    func run() async throws {
        // As the worker runs (PushWorkerCommand sets it): localtime() reads the zone once.
        if getenv("TZ") == nil { setenv("TZ", ":/etc/localtime", 0) }
        var stream = StreamLogHandler.standardError(label: "pushworker")
        stream.logLevel = .info
        let handlers: [(String, any LogHandler)] = [
            ("StreamLogHandler", stream), ("TextLogHandler", TextLogHandler(label: "pushworker", level: .info)),
            ("JSONLogHandler", JSONLogHandler(label: "pushworker", level: .info)),
        ]
        for (name, handler) in handlers {
            let logger = Logger(label: "pushworker", factory: { _ in handler })
            let seconds = try Self.withStandardErrorDiscarded {
                let cpu = CPUTime.now
                for index in 0..<count {
                    logger.info("job done", metadata: [
                        "job": "tx-\(index)", "app": "demo", "devices": "\(1)", "outcomes": "delivered=1", "duration_ms": "\(index % 10)", "retrying": "\(0)",
                    ])
                }
                return CPUTime.now - cpu
            }
            print(String(format: "%@: %.2f µs CPU per line, %d lines", name, seconds / Double(count) * 1e6, count))
        }
    }

    private static func withStandardErrorDiscarded(_ body: () throws -> Double) throws -> Double {
        let null = open("/dev/null", O_WRONLY)
        let saved = dup(STDERR_FILENO)
        guard null >= 0, saved >= 0 else { throw ValidationError("cannot open /dev/null") }
        dup2(null, STDERR_FILENO)
        defer {
            dup2(saved, STDERR_FILENO)
            close(saved)
            close(null)
        }
        return try body()
    }
}
