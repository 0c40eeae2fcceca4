import AMQP
import APNs
import APNsHTTP2
import CoreMetrics
import Logging
import ServiceLifecycle

/// The service around the `JobPipeline`s: consumes push jobs from both lanes, hands each to its
/// lane's pipeline, settles the delivery as the pipeline says, and shuts down gracefully.
///
/// Each lane has a consumer and a results publisher of its own (a connection each), so the now
/// lane's one-device jobs are neither queued behind a broadcast's chunks at the broker nor behind
/// their results in a publisher's confirm window.
///
/// A job is acknowledged only after its results (or its dead letter) are confirmed by the broker,
/// so a worker killed at any moment loses nothing: the broker redelivers what was not acked.
public final class Worker: Service, Sendable {
    /// A lane's consumer, publisher and pipeline.
    private struct Route: Sendable {
        var lane: Lane
        var consumer: AMQPConsumer
        var publisher: AMQPPublisher
        var pipeline: JobPipeline
    }

    private let routes: [Route]
    private let clients: [APNsClient]
    /// The fleet's one provider token per key; nil without token apps or with
    /// `share_provider_tokens: false`.
    private let tokens: ProviderTokenAgreement?
    /// The worker's one source per key, for whatever else in the process talks to APNs with the
    /// same keys (`ChannelDirectory`).
    public let tokenSources: ProviderTokenSources
    private let logger: Logger
    /// Logged with "worker started" once `run` begins: by then the service group traps SIGTERM,
    /// so a signal sent after that line (a test, an orchestrator) stops the worker gracefully.
    private let started: Logger.Metadata
    /// Deliveries and the stop request, in one sequence, so a stop ends the loop even while no
    /// delivery comes, without closing the connection the jobs in hand still acknowledge on.
    private let events: AsyncStream<Event>
    private let eventSink: AsyncStream<Event>.Continuation

    private enum Event: Sendable {
        case delivery(AMQPDelivery, JobPipeline)
        case stop
    }

    /// Job bodies larger than this are parsed as they arrive (`StreamedJobReader`) and never
    /// held whole; 1 MiB is ~15,000 tokens, well above a chunk job at the default chunk size.
    public static let streamJobsOverBytes = 1 << 20

    private init(
        routes: [Route], clients: [APNsClient], tokens: ProviderTokenAgreement?, tokenSources: ProviderTokenSources, started: Logger.Metadata,
        logger: Logger
    ) {
        self.started = started
        self.tokenSources = tokenSources
        self.routes = routes
        self.clients = clients
        self.tokens = tokens
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
        var amqp = try settings.amqpConfiguration(file: file)
        amqp.topology.queues += settings.bulkQueues(apps: configuration.apps.map(\.name))
        var clients: [APNsClient] = []
        var apps: [JobPipeline.App] = []
        var tokenSources = ProviderTokenSources()
        for (index, app) in configuration.apps.enumerated() {
            var clientConfiguration = try app.clientConfiguration(file: file, index: index)
            tokenSources.share(&clientConfiguration)
            let client = APNsClient(configuration: clientConfiguration, logger: logger)
            clients.append(client)
            let admission = DeviceAdmission(
                maxInFlight: app.effectiveMaxInFlight, nowReserve: settings.lanes.nowReserve(ofMaxInFlight: app.effectiveMaxInFlight))
            apps.append(
                JobPipeline.App(
                    name: app.name, topic: app.topic, sender: client, admission: admission, defaultExpiration: app.defaultExpiration,
                    defaultResults: app.defaultResults))
        }
        health.appsLoaded()
        sampleGauges(of: clients, into: metrics)
        // Whatever was opened is closed again when a later step fails: a caller that goes on
        // (a test, an embedder) keeps no connection, thread or unacknowledged job.
        var publishers: [AMQPPublisher] = []
        var tokens: ProviderTokenAgreement?
        var routes: [Route] = []
        do {
            do {
                // The first declares the topology; a queue declared with other arguments fails it.
                for (name, label) in [("pushworker results", "publisher"), ("pushworker bulk results", "bulk publisher")] {
                    publishers.append(try await AMQPPublisher.connect(health.observed(amqp, name: name, as: label), logger: logger))
                }
            } catch let error as AMQPError where error.replyCode == 406 {
                // A queue exists with other arguments than configured: an upgrade (classic results or
                // retry queues now quorum), or a changed delivery limit.
                throw AMQPError(
                    error.kind,
                    "\(error). A queue's type and arguments cannot change in place: with the workers stopped, `pushworker queues migrate --config \(file)` redeclares it as configured and keeps its messages (docs/operations.md)")
            }
            // Registered now, so /readyz says "not connected yet" for them until they are, not ready
            // while the tokens are agreed on.
            let consuming = [
                health.observed(amqp, name: "pushworker jobs", as: "jobs"), health.observed(amqp, name: "pushworker bulk jobs", as: "bulk jobs"),
            ]
            if settings.shareProviderTokens && !tokenSources.all.isEmpty {
                // Before any job is taken: the first request already sends the fleet's token.
                tokens = try await ProviderTokenAgreement.start(
                    sources: tokenSources.all, amqp: health.observed(amqp, name: "pushworker tokens", as: "tokens"),
                    exchange: settings.queues.tokensExchange, publisher: publishers[0], logger: logger)
            }
            for ((lane, publisher), consuming) in zip(zip([Lane.now, .bulk], publishers), consuming) {
                let pipeline = JobPipeline(
                    settings: settings, lane: lane, apps: apps, publisher: publisher, resolver: registry ?? ExplicitTokenResolver(),
                    feedback: registry, badges: registry, metrics: metrics, logger: logger)
                // The bulk lane: each app's queue with chunks in hand by its weight, so one app's
                // broadcast neither waits behind another's nor takes all of the worker.
                let queues: [(name: String, prefetch: UInt16)] = lane == .now
                    ? [(settings.queues.jobs, UInt16(settings.lanes.nowPrefetch))]
                    : configuration.apps.map { app in
                        (settings.queues.bulkJobs(app: app.name), UInt16(min(settings.amqp.prefetch * (app.weight ?? 1), Int(UInt16.max))))
                    }
                guard !queues.isEmpty else { continue }  // no app: no bulk lane
                let consumer = try await AMQPConsumer.connect(
                    consuming, queues: queues,
                    streaming: AMQPBodyStreaming(threshold: streamJobsOverBytes) { _, size in StreamedJobReader(bodySize: size) },
                    logger: logger)
                routes.append(Route(lane: lane, consumer: consumer, publisher: publisher, pipeline: pipeline))
            }
        } catch {
            for route in routes { await route.consumer.close() }
            await tokens?.stop()
            for publisher in publishers { await publisher.close() }
            for client in clients { client.shutdown() }
            throw error
        }
        let unused = publishers.filter { publisher in !routes.contains { $0.publisher === publisher } }
        for publisher in unused { await publisher.close() }
        let started: Logger.Metadata = [
            "queue": "\(settings.queues.jobs)", "prefetch": "\(settings.lanes.nowPrefetch)",
            "bulk_queues": "\(settings.queues.bulkJobs).<app>", "bulk_prefetch": "\(settings.amqp.prefetch) × weight",
            "apps": "\(configuration.apps.map(\.name).joined(separator: ","))",
        ]
        return Worker(routes: routes, clients: clients, tokens: tokens, tokenSources: tokenSources, started: started, logger: logger)
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
        let feeders = routes.map { route in
            Task { [eventSink, logger] in
                do {
                    for try await delivery in route.consumer { eventSink.yield(.delivery(delivery, route.pipeline)) }
                } catch {
                    logger.error("a job consumer stopped", metadata: ["lane": "\(route.lane)", "error": "\(error)"])
                }
                eventSink.yield(.stop)
            }
        }
        // Discarding: a plain task group keeps every finished child until `next()` collects it,
        // which this loop never calls; a worker then held a few KiB per job it had ever taken.
        await withDiscardingTaskGroup { jobs in
            for await event in events {
                guard case .delivery(let delivery, let pipeline) = event else { break }
                jobs.addTask { await delivery.settle(await pipeline.run(JobDelivery(delivery)), kind: "job", logger: self.logger) }
            }
        }
        // Deliveries received but not started go back to the queue when the connection closes.
        for route in routes { await route.consumer.close() }
        for feeder in feeders { feeder.cancel() }
        await tokens?.stop()
        for route in routes { await route.publisher.close() }
        for client in clients { client.shutdown() }
        logger.info("worker stopped")
    }
}
