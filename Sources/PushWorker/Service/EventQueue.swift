import Synchronization

/// A queue of events for one reader, in place of an `AsyncStream`: the worker hands every job's
/// delivery through one, from the consumers' threads to its loop. `AsyncStream`'s storage is
/// generic code of the runtime's library, which the compiler cannot specialize for the event
/// type, so on Linux each of its yields and reads looked the type's metadata up in the runtime
/// and removed the first element through the unspecialized collection code (`perf record` of a
/// worker of one-device jobs: about 2.5% of its CPU in `AsyncStream`, half of it those lookups).
/// This one is compiled with its element, and keeps `AsyncStream`'s behaviour as the worker uses
/// it: events come out in the order they went in, events after `finish` are dropped, and a
/// reader whose task is cancelled is given `nil` and the queue is finished.
final class EventQueue<Element: Sendable>: Sendable {
    private struct State: ~Copyable {
        /// Events not yet read, from `head` on; the read ones dropped once all are read or they are half.
        var pending: [Element] = []
        var head = 0
        /// The reader, waiting while `pending` is empty.
        var reader: CheckedContinuation<Element?, Never>?
        var finished = false

        mutating func take() -> Element? {
            guard head < pending.count else { return nil }
            let element = pending[head]
            head += 1
            if head == pending.count {
                pending.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 64, head * 2 >= pending.count {
                // A reader that never quite catches up would otherwise keep every event it read
                // (each delivery and its pipeline) until the queue empties: drop the read half.
                pending.removeFirst(head)
                head = 0
            }
            return element
        }
    }

    private let state = Mutex(State())

    /// What a read found: an event, the end, or nothing yet.
    private enum Read {
        case element(Element)
        case end
        case wait
    }

    /// Events held, read ones not yet dropped included (for tests).
    var held: Int { state.withLock { $0.pending.count } }

    /// Whether the reader is parked, waiting for an event (for tests).
    var readerWaits: Bool { state.withLock { $0.reader != nil } }

    /// Hands `element` to the reader waiting, or keeps it for the next read; dropped once finished.
    func yield(_ element: Element) {
        let reader = state.withLock { state -> CheckedContinuation<Element?, Never>? in
            if state.finished { return nil }
            if let reader = state.reader {
                state.reader = nil
                return reader
            }
            state.pending.append(element)
            return nil
        }
        reader?.resume(returning: element)
    }

    /// No more events: the reader gets what is kept, then `nil`.
    func finish() {
        let reader = state.withLock { state -> CheckedContinuation<Element?, Never>? in
            state.finished = true
            defer { state.reader = nil }
            return state.reader
        }
        reader?.resume(returning: nil)
    }

    /// The next event, waiting for one; `nil` once finished and read, or once the reading task is
    /// cancelled (which finishes the queue). One reader at a time.
    func next() async -> Element? {
        func read(_ state: inout State) -> Read {
            if let element = state.take() { return .element(element) }
            return state.finished ? .end : .wait
        }
        switch state.withLock({ read(&$0) }) {
        case .element(let element): return element
        case .end: return nil
        case .wait: break
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Element?, Never>) in
                let now = state.withLock { state -> Read in
                    let now = read(&state)
                    if case .wait = now {
                        precondition(state.reader == nil, "an EventQueue has one reader")
                        state.reader = continuation
                    }
                    return now
                }
                switch now {
                case .element(let element): continuation.resume(returning: element)
                case .end: continuation.resume(returning: nil)
                case .wait: break
                }
            }
        } onCancel: {
            finish()
        }
    }
}
