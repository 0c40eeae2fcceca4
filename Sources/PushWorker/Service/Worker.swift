import AMQP
import APNsHTTP2
import CoreMetrics
import Logging
import ServiceLifecycle

/// The service around the `JobPipeline`: consumes push jobs, hands each to the pipeline, settles
/// the delivery as the pipeline says, and shuts down gracefully.
///
/// A job is acknowledged only after its results (or its dead letter) are confirmed by the broker,
/// so a worker killed at any moment loses nothing: the broker redelivers what was not acked.
public final class Worker: Service, Sendable {
    private let consumer: AMQPConsumer
    private let publisher: AMQPPublisher
    private let clients: [APNsClient]
    private let pipeline: JobPipeline
    private let logger: Logger
    /// Logged with "worker started" once `run` begins: by then the service group traps SIGTERM,
    /// so a signal sent after that line (a test, an orchestrator) stops the worker gracefully.
    private let started: Logger.Metadata
    /// Deliveries and the stop request, in one sequence, so a stop ends the loop even while no
    /// delivery comes, without closing the connection the jobs in hand still acknowledge on.
    private let events: AsyncStream<Event>
    private let eventSink: AsyncStream<Event>.Continuation

    private enum Event: Sendable {
        case delivery(AMQPDelivery)
        case stop
    }

    /// Job bodies larger than this are parsed as they arrive (`StreamedJobReader`) and never
    /// held whole; 1 MiB is ~15,000 tokens, well above a chunk job at the default chunk size.
    public static let streamJobsOverBytes = 1 << 20

    private init(consumer: AMQPConsumer, publisher: AMQPPublisher, clients: [APNsClient], pipeline: JobPipeline, started: Logger.Metadata, logger: Logger) {
        self.started = started
        self.consumer = consumer
        self.publisher = publisher
        self.clients = clients
        self.pipeline = pipeline
        self.logger = logger
        (events, eventSink) = AsyncStream<Event>.makeStream()
    }

    /// Connects to the broker (declaring the topology) and builds one APNs client per app.
    /// Throws the first configuration or connection problem, naming it.
    /// While the broker cannot be reached, waits for it (`/readyz` says why it is not ready);
    /// a broker that refuses the credentials or the topology fails the start.
    /// - Parameters:
    ///   - registry: resolves users and groups and hears of dead devices; without one, only
    ///     explicit tokens are reached.
    ///   - health: told of the connections and the credentials, for `/readyz`.
    public static func start(
        _ configuration: PushWorkerConfiguration, file: String, registry: RegistryResolver? = nil,
        metrics: WorkerMetrics = WorkerMetrics(), health: WorkerHealth = WorkerHealth(), logger: Logger
    ) async throws -> Worker {
        let settings = configuration.worker
        let amqp = try settings.amqpConfiguration(file: file)
        var clients: [APNsClient] = []
        var apps: [JobPipeline.App] = []
        for (index, app) in configuration.apps.enumerated() {
            let client = APNsClient(configuration: try app.clientConfiguration(file: file, index: index), logger: logger)
            clients.append(client)
            apps.append(JobPipeline.App(name: app.name, topic: app.topic, sender: client))
        }
        health.appsLoaded()
        sampleGauges(of: clients, into: metrics)
        let publishing = health.observed(amqp, name: "pushworker results", as: "publisher")
        let consuming = health.observed(amqp, name: "pushworker jobs", as: "jobs")
        let publisher: AMQPPublisher
        do {
            publisher = try await AMQPPublisher.connect(publishing, logger: logger)
        } catch let error as AMQPError where error.replyCode == 406 {
            // A queue exists with other arguments than configured: an upgrade (classic results or
            // retry queues now quorum), or a changed delivery limit.
            throw AMQPError(
                error.kind,
                "\(error). A queue's type and arguments cannot change in place: with the workers stopped, `pushworker queues migrate --config \(file)` redeclares it as configured and keeps its messages (docs/operations.md)")
        }
        let pipeline = JobPipeline(
            settings: settings, apps: apps, publisher: publisher, resolver: registry ?? ExplicitTokenResolver(), feedback: registry,
            metrics: metrics, logger: logger)
        let consumer = try await AMQPConsumer.connect(
            consuming, queue: settings.queues.jobs, prefetch: UInt16(settings.amqp.prefetch),
            streaming: AMQPBodyStreaming(threshold: streamJobsOverBytes) { _, size in StreamedJobReader(bodySize: size) },
            logger: logger)
        let started: Logger.Metadata = [
            "queue": "\(settings.queues.jobs)", "prefetch": "\(settings.amqp.prefetch)",
            "apps": "\(configuration.apps.map(\.name).joined(separator: ","))",
        ]
        return Worker(consumer: consumer, publisher: publisher, clients: clients, pipeline: pipeline, started: started, logger: logger)
    }

    /// Requests in flight and open connections per app, read at each scrape.
    private static func sampleGauges(of clients: [APNsClient], into metrics: WorkerMetrics) {
        let gauges = clients.map { client in
            let app = [("app", client.configuration.name)]
            return (client, CoreMetrics.Gauge(label: "pushworker_apns_requests_in_flight", dimensions: app),
                CoreMetrics.Gauge(label: "pushworker_apns_connections", dimensions: app))
        }
        metrics.addGaugeSampler {
            for (client, inFlight, connections) in gauges {
                inFlight.record(client.requestsInFlight)
                connections.record(client.openConnections)
            }
        }
    }

    /// Processes jobs until `stop()` or a graceful shutdown of the service group (SIGTERM); then
    /// finishes the jobs in hand, acknowledges them and closes the connections. Deliveries not yet
    /// started go back to the queue.
    public func run() async throws {
        logger.info("worker started", metadata: started)
        try await withGracefulShutdownHandler {
            try await consume()
        } onGracefulShutdown: {
            self.stop()
        }
    }

    /// Stops taking new jobs; `run` returns once the jobs in hand are done.
    public func stop() {
        eventSink.yield(.stop)
    }

    private func consume() async throws {
        let feeder = Task { [consumer, eventSink, logger] in
            do {
                for try await delivery in consumer { eventSink.yield(.delivery(delivery)) }
            } catch {
                logger.error("the job consumer stopped", metadata: ["error": "\(error)"])
            }
            eventSink.yield(.stop)
        }
        // Discarding: a plain task group keeps every finished child until `next()` collects it,
        // which this loop never calls; a worker then held a few KiB per job it had ever taken.
        await withDiscardingTaskGroup { jobs in
            for await event in events {
                guard case .delivery(let delivery) = event else { break }
                jobs.addTask { await self.settle(delivery, as: await self.pipeline.run(JobDelivery(delivery))) }
            }
        }
        // Deliveries received but not started go back to the queue when the connection closes.
        await consumer.close()
        feeder.cancel()
        await publisher.close()
        for client in clients { client.shutdown() }
        logger.info("worker stopped")
    }

    private func settle(_ delivery: AMQPDelivery, as settlement: JobSettlement) async {
        do {
            switch settlement {
            case .acknowledge: try await delivery.ack()
            case .requeue: try await delivery.nack(requeue: true)
            case .reject: try await delivery.reject(requeue: false)
            }
        } catch {
            // A stale delivery (the connection was replaced): the broker delivers it again.
            logger.warning("cannot settle the job; the broker will deliver it again", metadata: [
                "job": "\(delivery.properties.messageID ?? "unknown")", "settlement": "\(settlement)", "error": "\(error)",
            ])
        }
    }
}
