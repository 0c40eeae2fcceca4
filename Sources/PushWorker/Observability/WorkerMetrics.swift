import CoreMetrics
import Stores
import Synchronization

/// What the worker counts, by the names `/metrics` shows (docs/operations.md lists them). Counted
/// where the thing is confirmed, so the figures match what producers receive: a result when the
/// broker has confirmed it, a dead letter once it is in the dead-letter queue.
///
/// Without a metrics backend (tests, `metrics_address: null`) every handle is swift-metrics'
/// no-op one.
public final class WorkerMetrics: Sendable {
    /// How a job left the worker.
    public enum JobOutcome: String, Sendable {
        /// Sent, its results and summary published.
        case done
        /// Republished as chunk jobs, which are counted as jobs of their own.
        case split
        /// Invalid: dead-lettered with its error code.
        case refused
        /// Could not be finished (results or hand-ons not confirmed): returned to the queue.
        case requeued
        /// A split job's chunk that came to the now lane (after a retry round), moved to the bulk lane.
        case movedToBulk = "moved_to_bulk"
        /// Its idempotency key was taken by an earlier job: nothing sent, a summary naming it.
        case duplicate
        /// Its `send_at` is ahead: held in the schedule, released to the due queue at its time.
        case scheduled
    }

    struct NotificationKey: Hashable, Sendable {
        var app: String
        var platform: DevicePlatform
        var outcome: Outcome
        var reason: String?
    }

    struct JobKey: Hashable, Sendable {
        var outcome: JobOutcome
        var code: String?
        var lane: Lane
    }

    private let notifications = CounterFamily<NotificationKey>("pushworker_notifications_total") {
        [("app", $0.app), ("platform", $0.platform.rawValue), ("outcome", $0.outcome.rawValue), ("reason", $0.reason ?? "")]
    }
    private let jobs = CounterFamily<JobKey>("pushworker_jobs_total") {
        [("outcome", $0.outcome.rawValue), ("code", $0.code ?? ""), ("lane", $0.lane.rawValue)]
    }
    struct LaneKey: Hashable, Sendable {
        var lane: Lane
        var app: String
    }

    /// From a job's delivery to its settlement, per lane and app: how long a one-device job takes
    /// beside a broadcast's chunks. (`app` is empty for a job refused before its app was read.)
    private let jobDurations = TimerFamily<LaneKey>("pushworker_job_duration_seconds") { [("lane", $0.lane.rawValue), ("app", $0.app)] }
    /// How long a chunk waited in its bulk queue, from its publishing to its delivery, per app.
    private let queueWaits = TimerFamily<LaneKey>("pushworker_job_queue_wait_seconds") { [("lane", $0.lane.rawValue), ("app", $0.app)] }
    private let retries = CounterFamily<String>("pushworker_retries_handed_on_total") { [("app", $0)] }
    private let deadLetters = CounterFamily<[String]>("pushworker_dead_letters_total") { [("queue", $0[0]), ("code", $0[1])] }
    private let registryCommands = CounterFamily<[String]>("pushworker_registry_commands_total") { [("command", $0[0]), ("result", $0[1])] }
    private let reconnects = CounterFamily<String>("pushworker_amqp_reconnects_total") { [("connection", $0)] }
    private let failovers = CounterFamily<[String]>("pushworker_amqp_failovers_total") { [("connection", $0[0]), ("node", $0[1])] }
    private let releaseLags = TimerFamily<String>("pushworker_schedule_release_lag_seconds") { [("app", $0)] }

    /// Gauges read when metrics are scraped rather than kept on the hot path.
    private let samplers = Mutex<[@Sendable () -> Void]>([])

    public init() {}

    func addGaugeSampler(_ sample: @escaping @Sendable () -> Void) {
        samplers.withLock { $0.append(sample) }
    }

    /// Brings the sampled gauges up to date; the metrics endpoint calls it before each scrape.
    public func sampleGauges() {
        for sample in samplers.withLock({ $0 }) { sample() }
    }

    /// A result published (and confirmed) for one device, on its platform.
    func notification(app: String, platform: DevicePlatform = .apns, outcome: Outcome, reason: String?) {
        notifications.increment(NotificationKey(app: app, platform: platform, outcome: outcome, reason: reason))
    }

    func job(_ outcome: JobOutcome, code: String? = nil, lane: Lane) {
        jobs.increment(JobKey(outcome: outcome, code: code, lane: lane))
    }

    func jobTook(_ duration: Duration, lane: Lane, app: String) {
        jobDurations.record(LaneKey(lane: lane, app: app), duration)
    }

    func jobWaited(_ duration: Duration, lane: Lane, app: String) {
        queueWaits.record(LaneKey(lane: lane, app: app), duration)
    }

    /// Devices handed on to a delayed retry queue.
    func retriesHandedOn(app: String, devices: Int) {
        retries.increment(app, by: devices)
    }

    /// A message this worker dead-lettered (the broker's own dead-lettering, at the delivery
    /// limit, is seen in the dead-letter queue's depth instead).
    func deadLetter(queue: String, code: String) {
        deadLetters.increment([queue, code])
    }

    /// A scheduled job published to the due queue, `lag` after its `send_at`.
    func scheduleReleased(lagMilliseconds: Int64, app: String) {
        releaseLags.record(app, .milliseconds(lagMilliseconds))
    }

    func registryCommand(_ command: String, result: String) {
        registryCommands.increment([command, result])
    }

    func reconnected(_ connection: String) {
        reconnects.increment(connection)
    }

    /// A connection that came back on another broker node than before; `node` is the new one.
    func failedOver(_ connection: String, to node: String) {
        failovers.increment([connection, node])
    }
}
