import CRabbitMQ
import Foundation
import Synchronization

/// Commands for an I/O thread, and an eventfd that wakes the thread from `poll` when the first
/// command lands, so a publish or ack is not left waiting for the next poll timeout.
final class Mailbox: Sendable {
    private struct State {
        var commands: [DriverCommand] = []
        var closed = false
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
        let (accepted, wasEmpty) = state.withLock { state -> (Bool, Bool) in
            guard !state.closed else { return (false, false) }
            let wasEmpty = state.commands.isEmpty
            state.commands.append(command)
            return (true, wasEmpty)
        }
        if accepted && wasEmpty { wake() }
        return accepted
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

    var isEmpty: Bool {
        state.withLock { $0.commands.isEmpty }
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
