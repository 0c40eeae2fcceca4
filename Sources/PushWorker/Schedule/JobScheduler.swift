import AMQP
import Foundation
import Stores

/// Holds the jobs whose `send_at` is ahead in the schedule, from the pipeline: a job the
/// producer wants sent later is stored, answered with a summary saying when, and acknowledged.
/// The store, not the broker's per-message TTL (which expires only at a queue's head) or a
/// worker's memory, keeps it; any worker releases it (`ScheduleReleaser`).
public struct JobScheduler: Sendable {
    public let store: any ScheduleStore
    public let clock: WallClock
    /// How far ahead a `send_at` may be.
    public let horizonMilliseconds: Int64
    /// Whether chunks of a job sending were cancelled.
    let cancellations: CancellationWatch

    public init(store: any ScheduleStore, clock: WallClock = .system, horizonDays: Int = 30) {
        self.store = store
        cancellations = CancellationWatch(store: store)
        self.clock = clock
        horizonMilliseconds = Int64(horizonDays) * 86_400_000
    }

    /// Whether the job is to be held: its `send_at` is ahead, and it is neither a chunk nor a job
    /// the schedule released already (a worker whose clock runs behind would hold it again).
    func holds(_ job: PushJob, _ delivery: JobDelivery, now: Int64) -> Bool {
        guard let sendAt = job.sendAt, delivery.chunk == nil, delivery.properties.headers?[WireHeader.released] == nil else { return false }
        return Self.milliseconds(sendAt) > now
    }

    /// Checks the job's `send_at` against the horizon and holds it; the refusal names the field.
    func hold(_ job: PushJob, _ delivery: JobDelivery, replyTo: String?, now: Int64) async throws -> HeldJob {
        let releaseAt = Self.milliseconds(job.sendAt ?? Date())
        guard releaseAt - now <= horizonMilliseconds else {
            throw JobError(.invalidField, field: "send_at",
                "send_at \(Self.rfc3339(releaseAt)) is more than \(horizonMilliseconds / 86_400_000) days ahead (ledger.schedule_horizon_days)")
        }
        guard delivery.streamed == nil else {
            throw JobError(.invalidField, field: "send_at",
                "send_at is not taken on a job body over the streaming threshold (1 MiB): name users or groups, or publish it at its time")
        }
        let held = HeldJob(
            jobID: job.id, app: job.app, idempotencyKey: job.idempotencyKey, releaseAt: releaseAt, body: String(decoding: delivery.body, as: UTF8.self),
            replyTo: replyTo, heldAt: now)
        try await store.hold(held)
        return held
    }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }

    /// `2026-11-27T09:00:00Z` (with milliseconds when it has any).
    public static func rfc3339(_ milliseconds: Int64) -> String {
        RFC3339.string(milliseconds: milliseconds)
    }
}

extension JobScheduler {
    /// Cancels a held job, for `cancel_job` and `pushworker schedule cancel`: the answer's
    /// `cancelled` object on success; a job unknown or ended already throws the error to answer
    /// with (`unknown_job`, `job_ended`), naming the field.
    public func cancel(_ name: HeldJobName) async throws(StoreError) -> [String: Any] {
        let field = if case .idempotencyKey = name.key { "idempotency_key" } else { "job" }
        switch try await store.cancel(name, at: clock.now()) {
        case .cancelled(let job):
            return ["cancelled": job.json]
        case .stopped(let run):
            return ["cancelled": run.json]
        case .finished(let run):
            let how = run.cancelledAt.map { "was cancelled at \(Self.rfc3339($0))" } ?? "has finished: all \(run.devices) of its devices have their result"
            throw StoreError(.jobEnded, field: field, "\(name.description) \(how)")
        case .ended(let job):
            let when = job.endedAt.map { " at \(Self.rfc3339($0))" } ?? ""
            throw StoreError(.jobEnded, field: field,
                "\(name.description) was \(job.state.rawValue)\(when): only a job still waiting for its send_at can be cancelled")
        case .unknown:
            throw StoreError(.unknownJob, field: field,
                "\(name.description) is neither held in the schedule nor sending in chunks: no job with a send_at ahead, and no job split into chunk jobs, was taken under that name (a job sent whole is over before a cancel could reach it)")
        }
    }
}
