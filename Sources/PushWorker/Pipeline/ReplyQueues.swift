import AMQP
import Synchronization

/// Which reply queues exist, asked of the broker before a job sends anything.
///
/// Results are published mandatory, so a job naming a missing queue would otherwise have every
/// result returned, be requeued, and send every notification again up to the delivery limit:
/// duplicate pushes to real users. Existing queues are remembered for a while, so the check
/// costs one round trip per queue and minute, not one per job; missing ones are asked again
/// every time, since a producer may declare its queue at any moment.
final class ReplyQueues: Sendable {
    private let publisher: any MessagePublishing
    private let known = Mutex<[String: ContinuousClock.Instant]>([:])

    static let freshness: Duration = .seconds(60)
    /// Bounds the memory of producers that use a new reply queue per job.
    static let capacity = 4096

    init(publisher: any MessagePublishing) {
        self.publisher = publisher
    }

    /// Throws when the broker cannot be asked; the job then goes back to the queue.
    func exists(_ queue: String) async throws -> Bool {
        let now = ContinuousClock.now
        if let checked = known.withLock({ $0[queue] }), now - checked < Self.freshness { return true }
        guard try await publisher.queueExists(queue) else { return false }
        known.withLock { known in
            if known.count >= Self.capacity {
                known = known.filter { now - $0.value < Self.freshness }
                if known.count >= Self.capacity { known.removeAll() }
            }
            known[queue] = now
        }
        return true
    }
}
