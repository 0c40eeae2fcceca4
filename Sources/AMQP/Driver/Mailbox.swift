import CRabbitMQ
import Foundation
import Synchronization

/// Commands for an I/O thread, and an eventfd that wakes the thread from `poll` when a command
/// lands while it waits, so a publish or ack is not left waiting for the next poll timeout. A
/// thread at work takes the commands before it waits again: posting to it costs no system call
/// (a busy worker posts a few per job).
final class Mailbox: Sendable {
    private struct State {
        var commands: [DriverCommand] = []
        var closed = false
        /// The thread is in (or about to enter) `poll` on `wakeDescriptor`, and nobody woke it yet.
        var waiting = false
    }

    private let state = Mutex(State())
    let wakeDescriptor: Int32

    init() {
        wakeDescriptor = pw_wake_eventfd()
        precondition(wakeDescriptor >= 0, "eventfd failed: \(String(cString: strerror(errno)))")
    }

    deinit {
        Glibc.close(wakeDescriptor)
    }

    /// Queues a command; returns false once the mailbox is closed so the caller can fail it.
    func post(_ command: DriverCommand) -> Bool {
        let (accepted, wake) = state.withLock { state -> (Bool, Bool) in
            guard !state.closed else { return (false, false) }
            state.commands.append(command)
            defer { state.waiting = false }
            return (true, state.waiting)
        }
        if wake { self.wake() }
        return accepted
    }

    /// Called by the thread before it waits in `poll`: false when a command is queued that the
    /// thread should take instead. From here until `endWait`, a post writes the eventfd.
    /// - Parameter unlessQueued: the commands that keep the thread from waiting (all of them,
    ///   except during a reconnect's backoff, which keeps most for the next connection).
    func beginWait(unlessQueued: (DriverCommand) -> Bool = { _ in true }) -> Bool {
        state.withLock { state in
            guard !state.commands.contains(where: unlessQueued) else { return false }
            state.waiting = true
            return true
        }
    }

    func endWait() {
        state.withLock { $0.waiting = false }
    }

    func wake() {
        var one: UInt64 = 1
        _ = write(wakeDescriptor, &one, 8)
    }

    func take() -> [DriverCommand] {
        state.withLock { state in
            defer { state.commands.removeAll(keepingCapacity: true) }
            return state.commands
        }
    }

    /// Refuses further commands and hands back the ones still queued.
    func close() -> [DriverCommand] {
        state.withLock { state in
            state.closed = true
            defer { state.commands.removeAll() }
            return state.commands
        }
    }

    /// Clears the wake counter after `poll` reported it readable.
    func drainWake() {
        var value: UInt64 = 0
        _ = read(wakeDescriptor, &value, 8)
    }
}
