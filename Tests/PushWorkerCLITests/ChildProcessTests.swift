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
        // A shell that has said it is ready and waits on its input: past its start-up, when the
        // loader may still hold a library open.
        let child = try ChildProcess("/bin/sh", arguments: ["-c", "echo ready; read line"], input: .pipe, output: .pipe, error: .standardOutput)
        let output = try #require(child.standardOutput)
        #expect(String(decoding: output.availableData, as: UTF8.self) == "ready\n")
        let held = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(child.processIdentifier)/fd").sorted()
        #expect(held == ["0", "1", "2"])
        // The parent's ends of the pipes do not leak into children spawned elsewhere either.
        for end in [child.standardInput, child.standardOutput] {
            #expect(try fcntl(#require(end).fileDescriptor, F_GETFD) & FD_CLOEXEC != 0)
        }
        // It starts with no signal blocked (the test's threads block SIGTERM): SIGTERM ends it.
        child.signal(SIGTERM)
        let deadline = ContinuousClock.now + .seconds(20)
        while child.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        try #require(!child.isRunning)
        #expect(child.wasSignalled && child.terminationStatus == SIGTERM)
    }

    @Test("a child's exit and its code are seen while a program it started still holds its output (Foundation's Process waits for that program)")
    func exitSeenPastWhatItStarted() async throws {
        let child = try ChildProcess("/bin/sh", arguments: ["-c", "sleep 30 & exit 3"], output: .pipe, error: .standardOutput)
        let group = child.processIdentifier
        defer { kill(-group, SIGKILL) }
        let deadline = ContinuousClock.now + .seconds(20)
        while child.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        try #require(!child.isRunning)
        #expect(!child.wasSignalled && child.terminationStatus == 3)
        // The `sleep` still runs in the child's group, holding the output pipe.
        #expect(kill(-group, 0) == 0)
    }

    @Test("Program.run feeds standard input, keeps the two outputs apart, survives a program that never reads it, and kills a program past killAfter with what it started")
    func run() async throws {
        let sh = URL(fileURLWithPath: "/bin/sh")
        let echoed = try await Program.running(["-c", "cat; echo oops >&2; exit 4"], input: Data("hello".utf8), program: sh)
        #expect(echoed.status == 4 && echoed.standardOutput == "hello" && echoed.standardError == "oops\n")
        // A program that exits without reading its input: the write fails, the test goes on.
        let deaf = try await Program.running(["-c", "exit 5"], input: Data(repeating: 0x61, count: 1 << 20), program: sh)
        #expect(deaf.status == 5)
        // A program it started goes too (a compiler under `go run` would hold the output).
        let hung = try await Program.running(["-c", "sleep 60 >/dev/null 2>&1 & echo $!; wait"], program: sh, killAfter: .milliseconds(300))
        #expect(hung.status == SIGKILL)
        let started = try #require(pid_t(hung.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)))
        let deadline = ContinuousClock.now + .seconds(20)
        while Self.alive(started) && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(!Self.alive(started), "the sleep \(started) that the killed program started still runs")
    }

    /// Running, not a zombie waiting for whoever adopted it to reap it.
    private static func alive(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let state = stat.split(separator: ")").last?.split(separator: " ").first
        else { return false }
        return state != "Z"
    }
}
