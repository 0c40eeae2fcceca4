import Foundation

/// The built `pushworker` program, run as a separate process the way operators run it.
public struct Program {
    public struct Result: Sendable {
        public let status: Int32
        public let standardOutput: String
        public let standardError: String
    }

    /// `swift build` puts the program beside the test bundle.
    public static var executable: URL { built("pushworker") }

    /// A program of this package (`pushworker-bench`, `mock-apns`), from beside the test bundle.
    public static func built(_ name: String) -> URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(name)
    }

    /// `run` on a thread of its own: a test waiting for a slow program (a compiler, a producer)
    /// holds none of the few threads Swift's concurrency runs every test on. On a 2-core machine
    /// two such waits stalled the rest of the suite for seconds.
    public static func running(
        _ arguments: [String], input: Data = Data(), environment: [String: String] = [:], program: URL? = nil, killAfter: Duration? = nil
    ) async throws -> Result {
        try await onOwnThread { try run(arguments, input: input, environment: environment, program: program, killAfter: killAfter) }
    }

    /// Runs the program to completion with `input` on its standard input, on the calling thread.
    /// Only for where nothing can be awaited (a `static let`): an async test calling it holds one
    /// of the cooperative pool's few threads until the program ends; such tests use `running`.
    /// - Parameters:
    ///   - program: another program to run the same way (a producer example, a compiler).
    ///   - killAfter: kills a program that has not finished by then (one that waits forever would
    ///     otherwise hang the test run).
    public static func run(
        _ arguments: [String], input: Data = Data(), environment: [String: String] = [:], program: URL? = nil, killAfter: Duration? = nil
    ) throws -> Result {
        let process = try ChildProcess(
            (program ?? executable).path, arguments: arguments, environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
            input: .pipe, output: .pipe, error: .pipe)
        let (stdin, stdout, stderr) = (process.standardInput!, process.standardOutput!, process.standardError!)
        // Read both pipes before waiting, so a chatty program cannot block on a full pipe; write
        // the input from a thread too, so a program that answers before reading it all cannot
        // block on its own full output pipe either. SIGPIPE is blocked on that thread: a program
        // that exits without reading its input makes the write fail, not the test process die.
        let writer = Thread {
            var pipeSignal = sigset_t()
            sigemptyset(&pipeSignal)
            sigaddset(&pipeSignal, SIGPIPE)
            pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
            try? stdin.write(contentsOf: input)
            try? stdin.close()
        }
        writer.start()
        let errorData = Locked(Data())
        let errorReader = Thread { errorData.withLock { $0 = stderr.readDataToEndOfFile() } }
        errorReader.start()
        if let killAfter {
            // Its whole group: a program it started (a compiler under `go run`) holds its output.
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(killAfter / .milliseconds(1)))) { [weak process] in
                process?.signal(SIGKILL, group: true)
            }
        }
        let output = stdout.readDataToEndOfFile()
        process.waitUntilExit()
        while errorReader.isExecuting || !errorReader.isFinished { usleep(1000) }
        return Result(
            status: process.terminationStatus,
            standardOutput: String(decoding: output, as: UTF8.self),
            standardError: String(decoding: errorData.value, as: UTF8.self))
    }
}
