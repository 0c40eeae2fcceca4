import Foundation

/// The built `pushworker` program, run as a separate process the way operators run it.
public struct Program {
    public struct Result: Sendable {
        public let status: Int32
        public let standardOutput: String
        public let standardError: String
    }

    /// `swift build` puts the program beside the test bundle.
    public static var executable: URL {
        let bundleDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        return bundleDirectory.appendingPathComponent("pushworker")
    }

    /// Runs the program to completion with `input` on its standard input.
    public static func run(_ arguments: [String], input: Data = Data(), environment: [String: String] = [:]) throws -> Result {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        stdin.fileHandleForWriting.write(input)
        try stdin.fileHandleForWriting.close()
        // Read both pipes before waiting, so a chatty program cannot block on a full pipe.
        let errorData = Locked(Data())
        let errorReader = Thread { errorData.withLock { $0 = stderr.fileHandleForReading.readDataToEndOfFile() } }
        errorReader.start()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        while errorReader.isExecuting || !errorReader.isFinished { usleep(1000) }
        return Result(
            status: process.terminationStatus,
            standardOutput: String(decoding: output, as: UTF8.self),
            standardError: String(decoding: errorData.value, as: UTF8.self))
    }
}
