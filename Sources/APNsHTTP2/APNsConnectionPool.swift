import Foundation
import Synchronization

/// The connections of one client, and the rule for choosing among them: a connection that has
/// not yet had a request accepted carries one stream at a time (APNs advertises a limit of 1
/// until then, and a client that sends more before reading that SETTINGS frame would exceed it);
/// a warm one carries up to `maxConcurrentStreams`. Each request goes to the usable connection
/// with the fewest streams; when none has room, the request waits its turn.
final class APNsConnectionPool: Sendable {
    private struct Slot {
        var inFlight = 0
        var warm = false
    }

    private struct State {
        var slots: [Slot]
        var waiters: [CheckedContinuation<Int, Never>] = []
        var closed = false
    }

    let connections: [any APNsConnection]
    private let maxStreams: Int
    private let state: Mutex<State>

    init(configuration: APNsClientConfiguration) {
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
    var streamsInUse: Int { state.withLock { $0.slots.reduce(0) { $0 + $1.inFlight } } }

    /// Waits for room on a connection and reserves a stream on it; returns its index.
    func acquire() async -> Int {
        if let index = state.withLock({ reserve(&$0) }) { return index }
        return await withCheckedContinuation { continuation in
            let index = state.withLock { state -> Int? in
                if let index = reserve(&state) { return index }
                state.waiters.append(continuation)
                return nil
            }
            if let index { continuation.resume(returning: index) }
        }
    }

    /// Frees the stream. `answered`: APNs answered with the credentials accepted, so the
    /// connection takes many streams; false after a refusal or a transport failure, so the
    /// connection (or its replacement) starts again at one stream.
    func release(_ index: Int, answered: Bool) {
        let woken = state.withLock { state -> [(CheckedContinuation<Int, Never>, Int)] in
            state.slots[index].inFlight -= 1
            state.slots[index].warm = answered
            var woken: [(CheckedContinuation<Int, Never>, Int)] = []
            while !state.waiters.isEmpty, let next = reserve(&state) {
                woken.append((state.waiters.removeFirst(), next))
            }
            return woken
        }
        for (continuation, index) in woken { continuation.resume(returning: index) }
    }

    private func reserve(_ state: inout State) -> Int? {
        var best: Int?
        for index in state.slots.indices {
            let slot = state.slots[index]
            let capacity = slot.warm ? maxStreams : 1
            guard slot.inFlight < capacity else { continue }
            if best == nil || slot.inFlight < state.slots[best!].inFlight { best = index }
        }
        if let best { state.slots[best].inFlight += 1 }
        return best
    }

    func shutdown() {
        for connection in connections { connection.shutdown() }
    }
}
