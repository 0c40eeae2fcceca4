import DequeModule
import Synchronization

/// A bound on the bytes of large job bodies the now lane works on at once
/// (`lanes.now_large_job_bytes`), so that its prefetch can be sized for one-device jobs.
///
/// A body read whole is held while it is decoded, its tokens as strings beside it, and then split
/// into chunk jobs (or sent): several times its size, for as long as that takes. A streamed body
/// (over 1 MiB) holds its tokens as bytes from arrival, which no budget can bound, but its split
/// adds pages of recipients and chunk bodies in flight, so it takes its turn too. With many producers' jobs in
/// hand, a backend sending campaigns as long token lists would otherwise multiply that by the
/// prefetch (64 jobs of 15,000 tokens peaked at 328 MiB). Only bodies over `largeBodyBytes` wait
/// here, so a one-device job never queues behind a campaign's list; a body larger than the whole
/// budget goes alone rather than never. Waiters are served in arrival order, so a large body is not
/// passed over for ever by smaller ones.
public final class JobBodyBudget: Sendable {
    /// Bodies of at most this many bytes (about 980 tokens) never wait.
    public static let largeBodyBytes = 64 << 10

    public let limit: Int
    private struct State {
        var used = 0
        var waiting = Deque<(bytes: Int, continuation: CheckedContinuation<Bool, Never>)>()
        var closed = false
    }
    private let state = Mutex(State())

    public init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// The bytes of `delivery` that count against the budget. None for a small body, nor for a
    /// chunk job (a released local_time or quiet-hours part among them), which `chunk_size`
    /// bounds, so it never waits behind producers' lists. A streamed body's tokens are held from
    /// arrival whatever the budget says, and its split adds only a page of recipients and the
    /// chunks in flight: it weighs at most a quarter of the budget, so a million-device broadcast
    /// splitting does not hold up every other list.
    public func weight(of delivery: JobDelivery) -> Int {
        guard delivery.chunk == nil else { return 0 }
        guard let streamed = delivery.streamed else { return weight(ofBody: delivery.body.count) }
        return min(weight(ofBody: streamed.bodySize), max(1, limit / 4))
    }

    /// The bytes of a body of `size` read whole that count against the budget.
    public func weight(ofBody size: Int) -> Int {
        size > Self.largeBodyBytes ? min(size, limit) : 0
    }

    /// Waits for room for `delivery` and holds it: the bytes to `release` once the job is
    /// settled. Nil, holding nothing, when the job should go back to the queue undecoded: the
    /// budget was closed (the worker stops) or the delivery's connection went while it waited.
    public func admit(_ delivery: JobDelivery) async -> Int? {
        let bytes = weight(of: delivery)
        guard await acquire(bytes) else { return nil }
        guard delivery.isCurrent() else {
            release(bytes)
            return nil
        }
        return bytes
    }

    /// Waits until `bytes` fit beside what is held, then holds them and returns true; false,
    /// holding nothing, once the budget is closed. Not cancellable: `close()` ends the waits.
    public func acquire(_ bytes: Int) async -> Bool {
        guard bytes > 0 else { return true }
        return await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool? in
                if state.closed { return false }
                if state.waiting.isEmpty && state.used + bytes <= limit {
                    state.used += bytes
                    return true
                }
                state.waiting.append((bytes, continuation))
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }

    /// Ends every wait with false, and the waits to come: the worker is stopping, and jobs not
    /// yet started go back to the queue rather than being decoded and split in its drain.
    public func close() {
        let waiting = state.withLock { state in
            state.closed = true
            defer { state.waiting.removeAll() }
            return state.waiting.map(\.continuation)
        }
        for continuation in waiting { continuation.resume(returning: false) }
    }

    /// Gives back what `acquire(bytes)` took, and lets in the waiters that now fit, in order.
    public func release(_ bytes: Int) {
        guard bytes > 0 else { return }
        let admitted = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            state.used -= bytes
            precondition(state.used >= 0, "a job gave back more body bytes than it held")
            var admitted: [CheckedContinuation<Bool, Never>] = []
            while let first = state.waiting.first, state.used + first.bytes <= limit {
                state.waiting.removeFirst()
                state.used += first.bytes
                admitted.append(first.continuation)
            }
            return admitted
        }
        for continuation in admitted { continuation.resume(returning: true) }
    }

    /// Bytes held now.
    public var held: Int { state.withLock { $0.used } }

    /// Bodies waiting for room now.
    public var waiters: Int { state.withLock { $0.waiting.count } }
}
