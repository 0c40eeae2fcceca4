import AMQP
import Foundation
import Logging
import Registry
import RegistryAuth
import ServiceLifecycle

/// Consumes registry commands from `push.registry`, applies each to the store, and answers on the
/// command's `reply_to` with `{"ok": true}` (a query's answer beside it: `{"ok": true, "status": …}`)
/// or `{"ok": false, "error": {"code", "message"}}`,
/// `correlation_id` = the command's `message_id`. A command that cannot be applied as sent is
/// dead-lettered with the reason, like an invalid job; one the store cannot take now goes back to
/// the queue, whose delivery limit ends a command that keeps failing in the dead letters.
public final class RegistryService: Service, Sendable {
    private let consumer: AMQPConsumer
    private let publisher: AMQPPublisher
    private let store: any RegistryStore
    /// `registry.auth`: commands must carry the token of the user they concern.
    private let authorizer: CommandAuthorizer?
    private let queues: WorkerSettings.Names
    /// The apps the worker serves: a device registered for another could never be sent to.
    private let apps: Set<String>
    /// Carries out channel requests on APNs; nil refuses them (a worker started without apps' credentials).
    private let channels: ChannelDirectory?
    private let metrics: WorkerMetrics
    private let logger: Logger

    private init(
        consumer: AMQPConsumer, publisher: AMQPPublisher, store: any RegistryStore, authorizer: CommandAuthorizer?, queues: WorkerSettings.Names,
        apps: Set<String>, channels: ChannelDirectory?, metrics: WorkerMetrics, logger: Logger
    ) {
        self.channels = channels
        self.authorizer = authorizer
        self.apps = apps
        self.metrics = metrics
        self.consumer = consumer
        self.publisher = publisher
        self.store = store
        self.queues = queues
        self.logger = logger
    }

    /// Commands taken from the broker at once: applied one after another, in order.
    static let prefetch: UInt16 = 32

    public static func start(
        settings: WorkerSettings, apps: Set<String>, store: any RegistryStore, authorizer: CommandAuthorizer? = nil, channels: ChannelDirectory? = nil,
        file: String, metrics: WorkerMetrics = WorkerMetrics(),
        health: WorkerHealth = WorkerHealth(), logger: Logger
    ) async throws -> RegistryService {
        let amqp = try settings.amqpConfiguration(file: file)
        let publishing = health.observed(amqp, name: "pushworker registry replies", as: "registry-replies")
        let consuming = health.observed(amqp, name: "pushworker registry", as: "registry")
        let publisher = try await AMQPPublisher.connect(publishing, logger: logger)
        let consumer = try await AMQPConsumer.connect(consuming, queue: settings.queues.registry, prefetch: prefetch, logger: logger)
        logger.info("registry commands consumed", metadata: ["queue": "\(settings.queues.registry)"])
        if let authorizer {
            logger.info("registry commands need the user's token", metadata: ["issuer": "\(authorizer.issuer)", "audience": "\(authorizer.audience)"])
        }
        return RegistryService(
            consumer: consumer, publisher: publisher, store: store, authorizer: authorizer, queues: settings.queues, apps: apps, channels: channels,
            metrics: metrics,
            logger: logger)
    }

    /// Applies commands until a graceful shutdown; the command in hand is finished first.
    public func run() async throws {
        // Closing the consumer ends the loop once the command in hand is done; a command whose ack
        // is lost with the connection comes again, which an idempotent command allows.
        await withGracefulShutdownHandler {
            await consume()
        } onGracefulShutdown: {
            Task { await self.consumer.close() }
        }
        await publisher.close()
    }

    private func consume() async {
        do {
            for try await delivery in consumer {
                await handle(delivery)
            }
        } catch {
            logger.error("the registry command consumer stopped", metadata: ["error": "\(error)"])
        }
    }

    private func handle(_ delivery: AMQPDelivery) async {
        let id = delivery.properties.messageID ?? "unknown"
        // The metric's label: the command once parsed, "invalid" before (few values, whatever producers send).
        var name = "invalid"
        var isQuery = false
        do throws(RegistryError) {
            let (request, auth) = try RegistryRequest.decode(json: delivery.body)
            name = request.name
            switch request {
            case .query, .channel: isQuery = true
            case .command: break
            }
            try await authorizer?.check(request, auth: auth, store: store)
            switch request {
            case .command(let command):
                try command.check(servedApps: apps)
                try await store.apply(command)
                logger.debug("registry command applied", metadata: ["command": "\(name)", "id": "\(id)"])
                await reply(to: delivery, #"{"ok":true}"#)
            case .query(let query):
                let answer = try await query.answer(from: store)
                if delivery.properties.replyTo == nil {
                    logger.warning("registry query with no reply_to: its answer goes nowhere", metadata: ["command": "\(name)", "id": "\(id)"])
                }
                await reply(to: delivery, Self.answerReply(answer))
            case .channel(let channelRequest):
                guard let channels else {
                    throw RegistryError(.unknownCommand, field: "command", "\(name) needs the apps' APNs credentials, which this registry service was started without")
                }
                let answer = try await channels.perform(channelRequest)
                logger.info("channel request done", metadata: ["command": "\(name)", "app": "\(channelRequest.app)", "id": "\(id)"])
                await reply(to: delivery, Self.answerReply(answer))
            }
            await delivery.settle(.acknowledge, kind: "registry command", logger: logger)
            metrics.registryCommand(name, result: "ok")
        } catch let error where error.code == .storeUnavailable {
            logger.error("registry command not applied; returning it to the queue", metadata: ["id": "\(id)", "error": "\(error)"])
            await delivery.settle(.requeue, kind: "registry command", logger: logger)
            metrics.registryCommand(name, result: "unavailable")
        } catch where isQuery {
            // A query changes nothing and replaying it would tell nothing new: answered, not
            // dead-lettered. A channel request is answered the same way whatever became of it
            // (APNs' refusal, or APNs unreachable: `apns_unavailable`), never requeued: one
            // request in hand holds up the queue's commands for up to the request timeout, and
            // a create whose answer was lost may have made the channel already. The producer
            // that asked decides whether to ask again.
            logger.info("registry query refused", metadata: ["id": "\(id)", "error": "\(error.code.rawValue)", "message": "\(error.message)"])
            await reply(to: delivery, Self.errorReply(error))
            await delivery.settle(.acknowledge, kind: "registry command", logger: logger)
            metrics.registryCommand(name, result: "refused")
        } catch {
            logger.warning("registry command refused", metadata: ["id": "\(id)", "error": "\(error.code.rawValue)", "message": "\(error.message)"])
            do {
                try await publisher.publish(AMQPMessage(
                    exchange: queues.deadLetterExchange, routingKey: queues.registry, body: Self.withoutAuth(delivery.body),
                    properties: DeadLetter.properties(refusing: delivery.properties, from: queues.registry, code: error.code.rawValue, field: error.field, message: error.message),
                    mandatory: true))
            } catch {
                logger.error("cannot dead-letter the command; returning it to the queue", metadata: ["id": "\(id)", "error": "\(error)"])
                await delivery.settle(.requeue, kind: "registry command", logger: logger)
                return
            }
            await reply(to: delivery, Self.errorReply(error))
            await delivery.settle(.acknowledge, kind: "registry command", logger: logger)
            metrics.registryCommand(name, result: "refused")
            metrics.deadLetter(queue: queues.registry, code: error.code.rawValue)
        }
    }


    /// The body as it is dead-lettered: without the user's token, a bearer credential that
    /// `dlq show` would print and that has expired by the time anyone replays it.
    static func withoutAuth(_ body: [UInt8]) -> [UInt8] {
        guard var object = (try? JSONDocument.parse(body)) as? [String: Any], object["auth"] != nil else { return body }
        object["auth"] = nil
        return JSONDocument.bytes(object) ?? body
    }

    static func answerReply(_ answer: [String: Any]) -> String {
        var object = answer
        object["ok"] = true
        return JSONDocument.bytes(object).map { String(decoding: $0, as: UTF8.self) } ?? #"{"ok":true}"#
    }

    static func errorReply(_ error: RegistryError) -> String {
        let details: [String: Any] = ["code": error.code.rawValue, "message": error.message, "field": error.field.map { $0 as Any } ?? NSNull()]
        let object: [String: Any] = ["ok": false, "error": details]
        return JSONDocument.bytes(object).map { String(decoding: $0, as: UTF8.self) } ?? #"{"ok":false}"#
    }

    private func reply(to delivery: AMQPDelivery, _ body: String) async {
        guard let replyTo = delivery.properties.replyTo else { return }
        let properties = AMQPProperties(
            contentType: "application/json", persistent: true, correlationID: delivery.properties.messageID, type: "registry_reply")
        do {
            try await publisher.publish(.toQueue(replyTo, body: Array(body.utf8), properties: properties))
        } catch {
            logger.warning("cannot answer the registry command", metadata: ["reply_to": "\(replyTo)", "error": "\(error)"])
        }
    }
}
