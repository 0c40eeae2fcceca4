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
        /// The thread is in (or about to enter) `poll` on `wakeDescriptor` and nobody woke it yet:
        /// for any command, or (a reconnect's backoff) for a shutdown only.
        var waiting: Wake?
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
            guard let waiting = state.waiting, waiting == .any || command.isShutdown else { return (true, false) }
            state.waiting = nil
            return (true, true)
        }
        if wake { self.wake() }
        return accepted
    }

    /// What wakes a waiting thread.
    enum Wake {
        case any
        /// A reconnect's backoff keeps every other command for the next connection.
        case shutdown
    }

    /// Called by the thread before it waits in `poll`: false when a command it would wake for is
    /// queued already (take it instead). From here until `endWait`, such a post writes the eventfd.
    func beginWait(for wake: Wake = .any) -> Bool {
        state.withLock { state in
            guard !state.commands.contains(where: { wake == .any || $0.isShutdown }) else { return false }
            state.waiting = wake
            return true
        }
    }

    func endWait() {
        state.withLock { $0.waiting = nil }
    }

    /// Takes the shutdown requests out, leaving every other command queued in its order.
    func takeShutdowns() -> [DriverCommand] {
        state.withLock { state in
            let shutdowns = state.commands.filter(\.isShutdown)
            if !shutdowns.isEmpty { state.commands.removeAll(where: \.isShutdown) }
            return shutdowns
        }
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

extension DriverCommand {
    var isShutdown: Bool {
        if case .shutdown = self { true } else { false }
    }
}
