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

    /// The port of a worker's operator endpoint, read from its log. Tests configure
    /// `metrics_address: 127.0.0.1:0`: a port chosen beforehand could be taken by another test's
    /// server in the seconds the worker takes to start, and the start would fail.
    public func metricsPort(within limit: Duration = .seconds(60)) async throws -> Int {
        let announcement = "serving /metrics"
        try await waitForLog(announcement, within: limit)
        let line = log.split(separator: "\n").first { $0.contains(announcement) } ?? ""
        guard let match = line.firstMatch(of: /address\W+[0-9.]+:(\d+)/), let port = Int(match.1) else {
            throw TestFailure("no address in the endpoint's log line: \(line)")
        }
        return port
    }

    /// A worker whose configuration file must name its endpoint's port (a test of
    /// `pushworker health --config`, or of two workers sharing one file). A port free a moment
    /// ago can be taken before the worker binds it, so a start refused for that port is tried
    /// again on another; tests that only need to reach the endpoint use port 0 and `metricsPort`.
    public static func worker(
        onFreePort configuration: (Int) throws -> URL, environment: [String: String] = [:]
    ) async throws -> (worker: RunningProgram, port: Int, config: URL) {
        var refused: [Int] = []
        var last = ""
        while refused.count < 5 {
            let port = try TestPorts.free()
            let config = try configuration(port)
            let worker = try RunningProgram.worker(config: config, environment: environment)
            do {
                try await worker.waitForLog("serving /metrics")
                return (worker, port, config)
            } catch where !worker.process.isRunning && worker.log.contains("cannot listen on 127.0.0.1:\(port)")
                && worker.log.contains("Address already in use")
            {
                refused.append(port)
                last = worker.log
            }
        }
        throw TestFailure("the worker's start was refused on ports \(refused), each free a moment before; the last log:\n\(last)")
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
