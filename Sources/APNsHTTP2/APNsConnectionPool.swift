import Foundation
import Synchronization

/// The connections of one client, and the rule for choosing among them: a connection that has
/// not yet had a request accepted carries one stream at a time (APNs advertises a limit of 1
/// until then, and a client that sends more before reading that SETTINGS frame would exceed it);
/// a warm one carries up to `maxConcurrentStreams`. A batch goes to the usable connection with
/// the fewest streams, as much of it as that connection has room for; when none has room, it
/// waits its turn. A batch is not spread over the connections: its sender waits for all of its
/// answers, so one slow or dead connection holds only the batches on it.
package final class APNsConnectionPool: Sendable {
    private struct Slot {
        var inFlight = 0
        var warm = false
    }

    private struct Waiter {
        var wanted: Int
        var continuation: CheckedContinuation<(index: Int, count: Int), Never>
    }

    private struct State {
        var slots: [Slot]
        var waiters: [Waiter] = []
        var closed = false
    }

    package let connections: [any APNsConnection]
    private let maxStreams: Int
    private let state: Mutex<State>

    package init(configuration: APNsClientConfiguration) {
        let count = max(1, configuration.connections)
        connections = (0..<count).map { _ -> any APNsConnection in
            switch configuration.transport {
            case .nghttp2: NGHTTP2Connection(configuration: configuration)
            case .curl: CurlConnection(configuration: configuration)
            }
        }
        maxStreams = max(1, configuration.maxConcurrentStreams)
        state = Mutex(State(slots: Array(repeating: Slot(), count: count)))
    }

    /// Streams reserved on all connections now.
    package var streamsInUse: Int { state.withLock { $0.slots.reduce(0) { $0 + $1.inFlight } } }

    /// Waits for room on a connection and reserves between 1 and `wanted` streams on it; returns
    /// its index and how many.
    package func acquire(upTo wanted: Int) async -> (index: Int, count: Int) {
        if let reserved = state.withLock({ reserve(&$0, upTo: wanted) }) { return reserved }
        return await withCheckedContinuation { continuation in
            let reserved = state.withLock { state -> (index: Int, count: Int)? in
                if let reserved = reserve(&state, upTo: wanted) { return reserved }
                state.waiters.append(Waiter(wanted: wanted, continuation: continuation))
                return nil
            }
            if let reserved { continuation.resume(returning: reserved) }
        }
    }

    /// Frees a stream. `answered`: APNs answered with the credentials accepted, so the
    /// connection takes many streams; false after a refusal or a transport failure, so the
    /// connection (or its replacement) starts again at one stream.
    func release(_ index: Int, answered: Bool) {
        let woken = state.withLock { state -> [(CheckedContinuation<(index: Int, count: Int), Never>, (index: Int, count: Int))] in
            state.slots[index].inFlight -= 1
            state.slots[index].warm = answered
            guard !state.waiters.isEmpty else { return [] }
            var woken: [(CheckedContinuation<(index: Int, count: Int), Never>, (index: Int, count: Int))] = []
            while let first = state.waiters.first, let reserved = reserve(&state, upTo: first.wanted) {
                woken.append((state.waiters.removeFirst().continuation, reserved))
            }
            return woken
        }
        for (continuation, reserved) in woken { continuation.resume(returning: reserved) }
    }

    private func reserve(_ state: inout State, upTo wanted: Int) -> (index: Int, count: Int)? {
        // The least busy connection with room.
        var best: (index: Int, inFlight: Int)?
        for index in state.slots.indices {
            let slot = state.slots[index]
            let capacity = slot.warm ? maxStreams : 1
            guard slot.inFlight < capacity else { continue }
            if slot.inFlight < best?.inFlight ?? .max { best = (index, slot.inFlight) }
        }
        guard let best = best?.index else { return nil }
        let slot = state.slots[best]
        let count = max(1, min((slot.warm ? maxStreams : 1) - slot.inFlight, wanted))
        state.slots[best].inFlight += count
        return (best, count)
    }

    package func shutdown() {
        for connection in connections { connection.shutdown() }
    }
}
