import Foundation

/// A program started in the background (a worker, the mock), stopped with a signal.
public final class RunningProgram: @unchecked Sendable {
    public let process: ChildProcess
    /// Where its standard error goes, for the test's failure messages.
    public let logFile: URL

    public init(_ executable: URL, arguments: [String], environment: [String: String] = [:]) throws {
        logFile = FileManager.default.temporaryDirectory.appendingPathComponent("pushworker-\(UUID().uuidString.prefix(8)).log")
        _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
        process = try ChildProcess(
            executable.path, arguments: arguments, environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
            output: .file(logFile.path), error: .standardOutput)
    }

    /// The worker, started as operators start it: `pushworker run --config <config>`, then
    /// `arguments` (`--log-format json`), with `environment` over the test's own.
    public static func worker(config: URL, arguments extra: [String] = [], environment: [String: String] = [:]) throws -> RunningProgram {
        try RunningProgram(Program.executable, arguments: ["run", "--config", config.path] + extra, environment: environment)
    }

    public var log: String { (try? String(contentsOf: logFile, encoding: .utf8)) ?? "" }

    /// Waits until the log contains `text`. Fails once the program has logged nothing new for
    /// `limit`, or after four times `limit` in all: a program that logs each retry (a worker
    /// waiting for its broker on a loaded machine) is making progress, one that falls silent is
    /// not.
    public func waitForLog(_ text: String, within limit: Duration = .seconds(60)) async throws {
        let start = ContinuousClock.now
        var deadline = start + limit
        var seen = 0
        while true {
            let log = self.log
            if log.contains(text) { return }
            guard process.isRunning else { throw TestFailure("the program exited (\(process.terminationStatus)) before logging '\(text)':\n\(log)") }
            let now = ContinuousClock.now
            if log.utf8.count > seen {
                seen = log.utf8.count
                deadline = min(now + limit, start + limit * 4)
            }
            guard now < deadline else {
                let why = deadline == start + limit * 4 ? "the longest wait, 4 × \(limit)" : "\(limit) without a new line"
                throw TestFailure("no '\(text)' in the log within \(now - start) (\(why)):\n\(log)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Sends `signal` and waits for the exit status.
    public func stop(signal: Int32 = SIGTERM, within limit: Duration = .seconds(30)) async throws -> Int32 {
        process.signal(signal)
        let deadline = ContinuousClock.now + limit
        while process.isRunning {
            guard ContinuousClock.now < deadline else {
                process.signal(SIGKILL)
                throw TestFailure("the program did not exit within \(limit) of signal \(signal):\n\(log)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        return process.terminationStatus
    }
}
