import AMQP
import Logging
import ServiceLifecycle
import Stores

/// Consumes registry commands from `push.registry` and hands each to the `RegistryCommandHandler`,
/// settling its delivery as the handler says, in order. Built from ready parts; connects in `run()`.
public final class RegistryService: Service, Sendable {
    private let broker: BrokerPlan
    /// What it does with each command (public for the assembly's tests).
    public let handler: RegistryCommandHandler
    /// The connections' settings, observed for `/readyz` from the start (before they connect).
    private let publishing: AMQPConfiguration
    private let consuming: AMQPConfiguration
    private let logger: Logger

    /// Opened once the worker is connected (`WorkerConnections.connected`): this service connects after it.
    private let after: OpenOnce

    public init(broker: BrokerPlan, handler: RegistryCommandHandler, after: OpenOnce = OpenOnce(open: true), health: WorkerHealth = WorkerHealth(), logger: Logger) {
        self.after = after
        self.broker = broker
        self.handler = handler
        publishing = health.observed(broker.amqp, name: "pushworker registry replies", as: "registry-replies")
        consuming = health.observed(broker.amqp, name: "pushworker registry", as: "registry")
        self.logger = logger
    }

    /// Commands taken from the broker at once: applied one after another, in order.
    static let prefetch: UInt16 = 32

    /// Connects, then applies commands until a graceful shutdown; the command in hand is finished first.
    public func run() async throws {
        let queue = broker.settings.queues.registry
        defer { handler.shutdown() }
        let connected = try await untilGracefulShutdown({ [after, publishing, consuming, logger] in
            await after.wait()
            let publisher = try await AMQPPublisher.connect(publishing, logger: logger)
            do {
                return (publisher, try await AMQPConsumer.connect(consuming, queue: queue, prefetch: Self.prefetch, logger: logger))
            } catch {
                await publisher.close()
                throw error
            }
        }, abandoned: { publisher, consumer in
            await consumer.close()
            await publisher.close()
        })
        guard let (publisher, consumer) = connected else { return }
        logger.info("registry commands consumed", metadata: ["queue": "\(queue)"])
        if let auth = handler.auth {
            logger.info("registry commands need the user's token", metadata: ["issuer": "\(auth.issuer)", "audience": "\(auth.audience)"])
        }
        // Closing the consumer ends the loop once the command in hand is done; a command whose ack
        // is lost with the connection comes again, which an idempotent command allows.
        await withGracefulShutdownHandler {
            do {
                for try await delivery in consumer {
                    let settlement = await handler.handle(delivery.body, properties: delivery.properties, via: publisher)
                    await delivery.settle(settlement, kind: "registry command", logger: logger)
                }
            } catch {
                logger.error("the registry command consumer stopped", metadata: ["error": "\(error)"])
            }
        } onGracefulShutdown: {
            Task { await consumer.close() }
        }
        await publisher.close()
    }
}
