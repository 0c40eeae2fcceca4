import AMQP
import APNs
import Logging
import ServiceLifecycle

/// The service around the `JobPipeline`s: consumes push jobs from both lanes, hands each to its
/// lane's pipeline, settles the delivery as the pipeline says, and shuts down gracefully.
///
/// Built from ready parts (`WorkerAssembly`); it connects in `run()`, as a service should, so a
/// service group owns every connection it opens. Each lane has a consumer and a results
/// publisher of its own (a connection each), so the now lane's one-device jobs are neither queued
/// behind a broadcast's chunks at the broker nor behind their results in a confirm window.
///
/// A job is acknowledged only after its results (or its dead letter) are confirmed by the broker,
/// so a worker killed at any moment loses nothing: the broker redelivers what was not acked.
public final class Worker: Service, Sendable {
    /// What a lane consumes, and the pipeline it hands jobs to once its publisher is connected.
    public struct LanePlan: Sendable {
        public var lane: Lane
        public var queues: [(name: String, prefetch: UInt16)]
        public var pipeline: @Sendable (any MessagePublishing) -> JobPipeline
        /// The lane's bound on large bodies in work, closed when the worker stops so that the
        /// jobs waiting for it go back to the queue.
        public var bodyBudget: JobBodyBudget? = nil
    }

    private let broker: WorkerConnections
    private let lanes: [LanePlan]
    private let senders: [any OwnedNotificationSender]
    private let logger: Logger
    private let started: Logger.Metadata
    /// Deliveries and the stop request, in one sequence, so a stop ends the loop even while no
    /// delivery comes, without closing the connection the jobs in hand still acknowledge on.
    private let events = EventQueue<Event>()

    private enum Event: Sendable {
        case delivery(AMQPDelivery, JobPipeline)
        case stop
    }

    /// Job bodies larger than this are parsed as they arrive (`StreamedJobReader`) and never
    /// held whole; 1 MiB is ~15,000 tokens, well above a chunk job at the default chunk size.
    public static let streamJobsOverBytes = 1 << 20

    /// - Parameters:
    ///   - broker: opens the worker's connections and agrees on the provider tokens.
    ///   - senders: the apps' senders, closed when the worker stops.
    ///   - started: logged with "worker started" once the connections are up.
    public init(broker: WorkerConnections, lanes: [LanePlan], senders: [any OwnedNotificationSender], started: Logger.Metadata, logger: Logger) {
        self.broker = broker
        self.lanes = lanes
        self.senders = senders
        self.started = started
        self.logger = logger
    }

    /// Connects (waiting for a broker that cannot be reached yet; `/readyz` says why it is not
    /// ready), then processes jobs until `stop()` or a graceful shutdown of the service group
    /// (SIGTERM); then finishes the jobs in hand, acknowledges them and closes the connections.
    /// Deliveries not yet started go back to the queue. Throws the first connection problem.
    public func run() async throws {
        defer { for sender in senders { sender.shutdown() } }
        let lanes = lanes
        // Each delivery goes from its consumer's thread straight into `events` (no task reading
        // the consumer in between: a hand-off fewer per job), and a consumer that ends (the broker
        // cancelled it) stops the worker.
        let open: @Sendable () async throws -> [WorkerConnections.Route] = { [broker, events, logger] in
            try await broker.open(lanes) { delivery, pipeline in
                events.yield(.delivery(delivery, pipeline))
            } ended: { lane, error in
                if let error { logger.error("a job consumer stopped", metadata: ["lane": "\(lane)", "error": "\(error)"]) }
                events.yield(.stop)
            }
        }
        guard let routes = try await untilGracefulShutdown(open, abandoned: { [broker] in await broker.close($0) }) else {
            logger.info("worker stopped before its broker could be reached; it had taken no job")
            return
        }
        logger.info("worker started", metadata: started)
        await withGracefulShutdownHandler {
            await consume()
        } onGracefulShutdown: {
            self.stop()
        }
        // Deliveries received but not started go back to the queue when the connection closes;
        // the worker lets go of them.
        await broker.close(routes)
        events.finish()
        logger.info("worker stopped")
    }

    /// Stops taking new jobs; `run` returns once the jobs in hand are done.
    public func stop() {
        events.yield(.stop)
    }

    /// Runs the jobs until a stop.
    private func consume() async {
        // Discarding: a plain task group keeps every finished child until `next()` collects it,
        // which this loop never calls; a worker then held a few KiB per job it had ever taken.
        await withDiscardingTaskGroup { jobs in
            while let event = await events.next() {
                guard case .delivery(let delivery, let pipeline) = event else { break }
                jobs.addTask { await delivery.settle(await pipeline.run(JobDelivery(delivery)), kind: "job", logger: self.logger) }
            }
            for lane in lanes { lane.bodyBudget?.close() }
        }
    }
}
