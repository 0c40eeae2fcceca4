import AMQP
import Logging
import Stores
import ServiceLifecycle

/// Releases the schedule's jobs at their time: every `pollInterval` it takes the jobs due (a
/// lease the store gives it alone), publishes each to the due queue (`push.jobs.due`, which the
/// now lane takes beside `push.jobs`, so a burst of jobs still to be held never delays a
/// release), confirmed, marked as
/// released so that no worker holds it again, and marks them released in the store. Every worker
/// runs one; the store shares the due jobs out. A worker that dies between the publish and the
/// mark leaves its jobs to be taken again after the lease: such a job may reach the queue twice,
/// and carries the may-repeat header the second time, so its devices are checked against the
/// ledger and none is sent twice.
public final class ScheduleReleaser: Service, Sendable {
    public let scheduler: JobScheduler
    private let queues: WorkerSettings.Names
    private let connect: @Sendable () async throws -> AMQPPublisher
    private let after: OpenOnce
    private let retentionMilliseconds: Int64
    private let metrics: WorkerMetrics
    private let logger: Logger

    /// How often the store is asked for due jobs: the release lag's bound (p99 under 1 s).
    static let pollInterval: Duration = .milliseconds(200)
    /// How long a worker has to publish the jobs it took before another may take them.
    static let leaseMilliseconds: Int64 = 60_000
    /// Jobs taken at a time: their bodies are in memory together (a part of a `local_time` job
    /// holds up to `chunk_size` devices, some 100 KB), so a few dozen, not hundreds.
    static let batch = 64
    /// Publishes awaiting their confirms at once.
    static let publishesInFlight = 64

    /// - Parameter connect: makes the connection it publishes on, once `after` opens (again after
    ///   a broker failure).
    public init(
        scheduler: JobScheduler, queues: WorkerSettings.Names, retentionDays: Int, connect: @escaping @Sendable () async throws -> AMQPPublisher,
        after: OpenOnce = OpenOnce(open: true), metrics: WorkerMetrics = WorkerMetrics(), logger: Logger
    ) {
        self.scheduler = scheduler
        self.queues = queues
        self.connect = connect
        self.after = after
        retentionMilliseconds = Int64(retentionDays) * 86_400_000
        self.metrics = metrics
        self.logger = logger
    }

    /// Publishes on a connection of its own to the plan's broker.
    public convenience init(
        scheduler: JobScheduler, broker: BrokerPlan, retentionDays: Int, after: OpenOnce, health: WorkerHealth, metrics: WorkerMetrics, logger: Logger
    ) {
        let configuration = health.observed(broker.amqp, name: "pushworker schedule", as: "schedule")
        self.init(
            scheduler: scheduler, queues: broker.settings.queues, retentionDays: retentionDays,
            connect: { try await AMQPPublisher.connect(configuration, logger: logger) }, after: after, metrics: metrics, logger: logger)
    }

    /// Publishes every job due now (in batches until none is left) and returns how many.
    @discardableResult
    public func releaseDue(via publisher: any MessagePublishing) async throws -> Int {
        var total = 0
        while true {
            let now = scheduler.clock.now()
            let jobs = try await scheduler.store.due(now: now, leaseUntil: now + Self.leaseMilliseconds, limit: Self.batch)
            guard !jobs.isEmpty else { return total }
            // Several publishes await their confirms at once: a minute's worth of jobs due
            // together goes out at the broker's pace, not one round trip per job.
            let outcome = await withTaskGroup(of: (HeldJob, (any Error)?).self) { group in
                var published: [HeldJob] = [], failure: (any Error)?
                var pending = jobs[...]
                func start() {
                    guard let job = pending.popFirst() else { return }
                    let message = message(job, now: now)
                    group.addTask {
                        do { try await publisher.publish(message) } catch { return (job, error) }
                        return (job, nil)
                    }
                }
                for _ in 0..<Self.publishesInFlight { start() }
                for await (job, error) in group {
                    if let error {
                        failure = failure ?? error
                        pending = []  // no more: the rest waits out its lease and is taken again
                    } else {
                        published.append(job)
                        metrics.scheduleReleased(lagMilliseconds: max(0, now - job.releaseAt), app: job.app)
                        start()
                    }
                }
                return (published, failure)
            }
            // What went out is marked, also when some could not be published.
            try await scheduler.store.released(outcome.0, at: now)
            if let failure = outcome.1 { throw failure }
            logger.debug("scheduled jobs released", metadata: ["count": "\(outcome.0.count)"])
            total += outcome.0.count
        }
    }

    private func message(_ job: HeldJob, now: Int64) -> AMQPMessage {
        var headers: AMQPTable = [WireHeader.released: .int64(now), WireHeader.enqueuedAt: .int64(now)]
        if job.releases > 1 { headers[WireHeader.mayRepeat] = .int64(1) }
        if let chunk = job.chunk { headers[WireHeader.chunk] = .string(chunk) }
        return .toQueue(queues.dueJobs, body: Array(job.body.utf8), properties: AMQPProperties(
            contentType: "application/json", headers: headers, persistent: true, replyTo: job.replyTo, messageID: job.jobID,
            timestamp: UInt64(now / 1000)))
    }

    /// Releases until a graceful shutdown. A failure (the broker or the store away) is logged and
    /// tried again after a pause; nothing is lost, the jobs stay held.
    public func run() async throws {
        let published = try await untilGracefulShutdown({ [after, connect] in
            await after.wait()
            return try await connect()
        }, abandoned: { publisher in await publisher.close() })
        guard let publisher = published else { return }
        logger.info("scheduled jobs released from the store", metadata: ["queue": "\(queues.dueJobs)", "poll_ms": "\(Self.pollInterval.components.attoseconds / 1_000_000_000_000_000)"])
        let last = await cancelWhenGracefulShutdown { await self.releaseUntilCancelled(publisher) }
        await last.close()
    }

    /// The loop; returns the publisher it ended with (one made again after a broker failure).
    private func releaseUntilCancelled(_ first: AMQPPublisher) async -> AMQPPublisher {
        var publisher = first
        var lastExpiry: Int64 = 0
        while !Task.isCancelled {
            do {
                try await releaseDue(via: publisher)
                let now = scheduler.clock.now()
                if now - lastExpiry > 86_400_000 {
                    lastExpiry = now
                    let removed = try await scheduler.store.expireSchedule(before: now - retentionMilliseconds)
                    if removed > 0 { logger.info("released and cancelled jobs past the retention forgotten", metadata: ["count": "\(removed)"]) }
                }
                try await Task.sleep(for: Self.pollInterval)
            } catch is CancellationError {
                break
            } catch {
                logger.error("cannot release scheduled jobs now; trying again", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: .seconds(1))
                if error is AMQPError {
                    await publisher.close()
                    guard let again = try? await connect() else { continue }
                    publisher = again
                }
            }
        }
        return publisher
    }
}
