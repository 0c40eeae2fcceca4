import Stores
import Synchronization

/// Whether a job sending in chunks was cancelled, asked of the store by the chunks as they go:
/// at most once per `freshness` per job on this worker, however many of its chunks and device
/// batches ask, so that a cancel stops the sending within that time without a query per device.
/// A store that cannot answer is taken as "not cancelled" (the chunk goes on, as without a cancel).
final class CancellationWatch: Sendable {
    private let store: any ScheduleStore
    private let known = Mutex<[Key: (checkedAt: ContinuousClock.Instant, cancelled: Bool)]>([:])

    private struct Key: Hashable { var app, job: String }

    /// How old an answer may be.
    static let freshness: Duration = .milliseconds(50)
    /// Jobs remembered at most (the oldest answers go first).
    static let remembered = 256

    init(store: any ScheduleStore) {
        self.store = store
    }

    func isCancelled(job: String, app: String) async -> Bool {
        let key = Key(app: app, job: job)
        let now = ContinuousClock.now
        if let entry = known.withLock({ $0[key] }), entry.cancelled || now - entry.checkedAt < Self.freshness { return entry.cancelled }
        let cancelled = (try? await store.isCancelled(job: job, app: app)) ?? false
        known.withLock { known in
            if known.count >= Self.remembered, let oldest = known.min(by: { $0.value.checkedAt < $1.value.checkedAt })?.key { known[oldest] = nil }
            known[key] = (now, cancelled)
        }
        return cancelled
    }
}
