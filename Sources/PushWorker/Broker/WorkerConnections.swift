import AMQP
import APNs
import FCMHTTP2
import Logging
import Synchronization
import Stores

/// Opens a worker's broker connections in the order a worker needs them, and closes them in the
/// reverse: the results publishers first (the first declares the topology), then the fleet's
/// provider-token agreement (before any job is taken, so the first request already sends the
/// fleet's token), then one consumer per lane. Whatever was opened is closed again when a later
/// step fails: a caller that goes on (a test, an embedder) keeps no connection or unacknowledged job.
public final class WorkerConnections: Sendable {
    /// A lane's consumer, publisher and pipeline, connected.
    struct Route: Sendable {
        var lane: Lane
        var consumer: AMQPConsumer
        var publisher: AMQPPublisher
        var pipeline: JobPipeline
    }

    /// The fleet's token agreement: its sources (one per key, one per FCM service account) and
    /// exchange; nil for none.
    public struct Tokens: Sendable {
        public var sources: [ProviderTokenSource]
        public var fcm: [FCMAccessTokenSource] = []
        public var exchange: String
    }

    private let tokens: Tokens?
    /// The connections' settings, observed for `/readyz` from the start (before they connect):
    /// the publishers, the consumers, the tokens (registered in that order, as `/readyz` lists
    /// them; connected publishers, tokens, consumers).
    private let publishing: [AMQPConfiguration]
    private let consuming: [AMQPConfiguration]
    private let tokensAMQP: AMQPConfiguration?
    private let file: String
    private let logger: Logger
    /// Opened once the worker is connected and its provider tokens are agreed on: the registry
    /// service connects after it, as it did when the worker started first, so a queue declared
    /// otherwise than configured fails the worker's start (with the `queues migrate` hint), and a
    /// channel request presents the fleet's token.
    public let connected = OpenOnce()
    private let agreement = Mutex<ProviderTokenAgreement?>(nil)

    public init(broker: BrokerPlan, tokens: Tokens?, file: String, health: WorkerHealth, logger: Logger) {
        self.tokens = tokens
        let amqp = broker.amqp
        publishing = [("pushworker results", "publisher"), ("pushworker bulk results", "bulk publisher")].map { health.observed(amqp, name: $0, as: $1) }
        consuming = [("pushworker jobs", "jobs"), ("pushworker bulk jobs", "bulk jobs")].map { health.observed(amqp, name: $0, as: $1) }
        tokensAMQP = tokens.map { _ in health.observed(amqp, name: "pushworker tokens", as: "tokens") }
        self.file = file
        self.logger = logger
    }

    /// Connects every lane (`lanes` in the order now, bulk); a lane without queues is left out.
    /// Each delivery goes to `deliver` with its lane's pipeline, on the consumer's I/O thread;
    /// `ended` hears of a consumer that ends (nil: closed; else the broker cancelled it).
    func open(
        _ lanes: [Worker.LanePlan], deliver: @escaping @Sendable (AMQPDelivery, JobPipeline) -> Void,
        ended: @escaping @Sendable (Lane, AMQPError?) -> Void
    ) async throws -> [Route] {
        var publishers: [AMQPPublisher] = []
        var routes: [Route] = []
        do {
            do {
                // The first declares the topology; a queue declared with other arguments fails it.
                for configuration in publishing { publishers.append(try await AMQPPublisher.connect(configuration, logger: logger)) }
            } catch let error as AMQPError where error.replyCode == 406 {
                // A queue exists with other arguments than configured: an upgrade (classic results or
                // retry queues now quorum), or a changed delivery limit.
                throw AMQPError(
                    error.kind,
                    "\(error). A queue's type and arguments cannot change in place: with the workers stopped, `pushworker queues migrate --config \(file)` redeclares it as configured and keeps its messages (docs/operations.md)")
            }
            if let tokens, let tokensAMQP {
                let joined = try await ProviderTokenAgreement.start(
                    sources: tokens.sources, fcm: tokens.fcm, amqp: tokensAMQP,
                    exchange: tokens.exchange, publisher: publishers[0], logger: logger)
                agreement.withLock { $0 = joined }
            }
            for ((lane, publisher), consuming) in zip(zip(lanes, publishers), consuming) where !lane.queues.isEmpty {
                let pipeline = lane.pipeline(publisher)
                let consumer = try await AMQPConsumer.connect(
                    consuming, queues: lane.queues,
                    streaming: AMQPBodyStreaming(threshold: Worker.streamJobsOverBytes) { _, size in StreamedJobReader(bodySize: size) },
                    logger: logger, deliver: { deliver($0, pipeline) }, ended: { [lane = lane.lane] in ended(lane, $0) })
                routes.append(Route(lane: lane.lane, consumer: consumer, publisher: publisher, pipeline: pipeline))
            }
        } catch {
            await close(routes, publishers: publishers)
            throw error
        }
        for publisher in publishers where !routes.contains(where: { $0.publisher === publisher }) { await publisher.close() }
        connected.open()
        return routes
    }

    /// Closes the consumers (their unstarted deliveries go back to the queue), calls
    /// `afterConsumers`, then stops the token agreement and closes the publishers.
    func close(_ routes: [Route], afterConsumers: () -> Void = {}) async {
        await close(routes, publishers: routes.map(\.publisher), afterConsumers: afterConsumers)
    }

    private func close(_ routes: [Route], publishers: [AMQPPublisher], afterConsumers: () -> Void = {}) async {
        // Together: each waits for the broker's answer to its consumers' cancel.
        await withDiscardingTaskGroup { group in
            for route in routes { group.addTask { await route.consumer.close() } }
        }
        afterConsumers()
        await agreement.withLock { $0 }?.stop()
        for publisher in publishers { await publisher.close() }
    }
}
