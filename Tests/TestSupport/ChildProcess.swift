import CChildProcess
import Foundation
import Synchronization

/// A program the tests start: `posix_spawn` with every descriptor above 2 closed in the child,
/// pipes opened close-on-exec, and the exit seen through `waitpid`.
///
/// Not Foundation's `Process`. It tells a child has ended by the end of a socket pair the child
/// inherits, and neither that socket nor its pipes are close-on-exec; it closes the others in the
/// child from a list it takes before spawning. Tests start programs from many threads at once, so
/// a child spawned by one test could keep another's socket or pipe: in CI a worker had drained,
/// logged "worker stopped" and exited, and its test still saw it running 25 s later, until some
/// other test's long-lived worker ended. Here no child holds another's descriptors (the kernel
/// closes them at exec: `posix_spawn_file_actions_addclosefrom_np`), and no descriptor of ours
/// can leak into a child spawned elsewhere in the process (`O_CLOEXEC`).
public final class ChildProcess: @unchecked Sendable {
    /// Where a child's standard stream goes.
    public enum Stream: Sendable {
        case null
        /// A pipe whose other end the parent reads or writes (`standardInput`, `standardOutput`,
        /// `standardError`).
        case pipe
        /// A file, created or truncated.
        case file(String)
        /// Standard error only: the same place as standard output.
        case standardOutput
        /// The test process's own stream (its output shows in the test log).
        case inherit
    }

    public let processIdentifier: pid_t
    /// The parent's end of each stream spawned as `.pipe`.
    public let standardInput: FileHandle?
    public let standardOutput: FileHandle?
    public let standardError: FileHandle?
    /// The raw `waitpid` status once the child has been reaped.
    private let reaped = Mutex<Int32?>(nil)

    public init(
        _ executable: String, arguments: [String], environment: [String: String]? = nil,
        input: Stream = .null, output: Stream = .null, error: Stream = .null
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var parentEnds: [FileHandle?] = []
        var childEnds: [Int32] = []
        defer { childEnds.forEach { close($0) } }
        for (target, stream) in [(Int32(0), input), (1, output), (2, error)] {
            switch stream {
            case .null:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
                parentEnds.append(nil)
            case .file(let path):
                precondition(target != 0, "a file is for output only")
                posix_spawn_file_actions_addopen(&actions, target, path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
                parentEnds.append(nil)
            case .standardOutput:
                precondition(target == 2, "only standard error can share standard output")
                posix_spawn_file_actions_adddup2(&actions, 1, 2)
                parentEnds.append(nil)
            case .inherit:
                parentEnds.append(nil)
            case .pipe:
                var ends: [Int32] = [-1, -1]
                guard pw_pipe_cloexec(&ends) == 0 else { throw TestFailure("pipe2: \(String(cString: strerror(errno)))") }
                let (childEnd, parentEnd) = target == 0 ? (ends[0], ends[1]) : (ends[1], ends[0])
                childEnds.append(childEnd)
                posix_spawn_file_actions_adddup2(&actions, childEnd, target)
                parentEnds.append(FileHandle(fileDescriptor: parentEnd, closeOnDealloc: true))
            }
        }
        pw_spawn_close_from(&actions, 3)
        // Its own process group, as Foundation's `Process` does: a Ctrl-C of the test run does
        // not reach a worker in the middle of a test. And the signals a process started from a
        // shell or an init system has: none blocked, none ignored. A child inherits the mask of
        // the thread that spawns it, and the runtime's threads block SIGTERM: a `sleep` spawned
        // from a test ignored its SIGTERM.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for number in [SIGPIPE, SIGTERM, SIGINT, SIGHUP] { sigaddset(&defaults, number) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let variables = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") } + [nil]
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer {
            argv.forEach { free($0) }
            variables.forEach { free($0) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, variables)
        guard spawned == 0 else { throw TestFailure("cannot start \(executable): \(String(cString: strerror(spawned)))") }
        processIdentifier = pid
        (standardInput, standardOutput, standardError) = (parentEnds[0], parentEnds[1], parentEnds[2])
    }

    /// Reaps the child if it has ended; never blocks.
    public var isRunning: Bool {
        reaped.withLock { reap(&$0) }
    }

    /// With the lock held, so that nothing signals a pid once it is reaped (and free for reuse).
    private func reap(_ status: inout Int32?) -> Bool {
        guard status == nil else { return false }
        var raw: Int32 = 0
        var result: pid_t
        repeat { result = waitpid(processIdentifier, &raw, WNOHANG) } while result == -1 && errno == EINTR
        if result == 0 { return true }
        // ECHILD: reaped elsewhere (nothing here does that); counted as killed, never "running"
        // forever, which would hang whoever waits.
        status = result == processIdentifier ? raw : SIGKILL
        return false
    }

    /// The exit code, or the number of the signal that ended it (as Foundation reports it).
    public var terminationStatus: Int32 {
        guard let raw = reaped.withLock({ $0 }) else { preconditionFailure("still running") }
        return (raw & 0x7f) == 0 ? (raw >> 8) & 0xff : raw & 0x7f
    }

    /// Whether a signal ended it.
    public var wasSignalled: Bool {
        guard let raw = reaped.withLock({ $0 }) else { preconditionFailure("still running") }
        return (raw & 0x7f) != 0
    }

    /// Blocks the calling thread until the child has ended.
    public func waitUntilExit() {
        while isRunning { usleep(5_000) }
    }

    /// Signals the child while it runs; with `group`, every process in its group too (it leads
    /// one), so a program it started that holds its output ends with it.
    public func signal(_ number: Int32 = SIGTERM, group: Bool = false) {
        reaped.withLock { status in
            if reap(&status) { kill(group ? -processIdentifier : processIdentifier, number) }
        }
    }

    /// A child still running when its owner lets go is killed and reaped, never left a zombie.
    deinit {
        if isRunning {
            kill(processIdentifier, SIGKILL)
            waitUntilExit()
        }
    }
}
