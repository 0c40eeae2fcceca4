import Foundation
import TestSupport
import Testing

/// The launcher every program test goes through: if a child could hold another's descriptors, a
/// test would wait on a program that has long exited (CI saw a drained worker "still running").
@Suite("ChildProcess, the tests' program launcher")
struct ChildProcessTests {
    @Test("a child holds only its three standard streams, even while the test process has descriptors open without close-on-exec")
    func onlyStandardStreams() async throws {
        var leaky: [Int32] = [-1, -1]
        try #require(pipe(&leaky) == 0)
        defer { leaky.forEach { close($0) } }
        let child = try ChildProcess("/bin/sleep", arguments: ["30"], output: .pipe, error: .standardOutput)
        let held = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(child.processIdentifier)/fd").sorted()
        #expect(held == ["0", "1", "2"])
        // The parent's end of the pipe does not leak into children spawned elsewhere either.
        let parentEnd = try #require(child.standardOutput).fileDescriptor
        #expect(fcntl(parentEnd, F_GETFD) & FD_CLOEXEC != 0)
        // It starts with no signal blocked (the test's threads block SIGTERM): SIGTERM ends it.
        child.signal(SIGTERM)
        let deadline = ContinuousClock.now + .seconds(20)
        while child.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(!child.isRunning)
        #expect(child.wasSignalled && child.terminationStatus == SIGTERM)
    }

    @Test("a child's end is seen while a child spawned after it still runs, with its exit code")
    func exitSeenPastALaterChild() async throws {
        let short = try ChildProcess("/bin/sh", arguments: ["-c", "sleep 0.2; exit 3"])
        let long = try ChildProcess("/bin/sleep", arguments: ["30"])
        defer { long.signal(SIGKILL) }
        let deadline = ContinuousClock.now + .seconds(20)
        while short.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(!short.isRunning)
        #expect(!short.wasSignalled && short.terminationStatus == 3)
        #expect(long.isRunning)
    }

    @Test("Program.run feeds standard input, keeps the two outputs apart, survives a program that never reads it, and kills a program past killAfter")
    func run() async throws {
        let echoed = try await Program.running(
            ["-c", "cat; echo oops >&2; exit 4"], input: Data("hello".utf8), program: URL(fileURLWithPath: "/bin/sh"))
        #expect(echoed.status == 4 && echoed.standardOutput == "hello" && echoed.standardError == "oops\n")
        // A program that exits without reading its input: the write fails, the test goes on.
        let deaf = try await Program.running(
            ["-c", "exit 5"], input: Data(repeating: 0x61, count: 1 << 20), program: URL(fileURLWithPath: "/bin/sh"))
        #expect(deaf.status == 5)
        let hung = try await Program.running(["-c", "exec sleep 60"], program: URL(fileURLWithPath: "/bin/sh"), killAfter: .milliseconds(300))
        #expect(hung.status == SIGKILL)
    }
}
