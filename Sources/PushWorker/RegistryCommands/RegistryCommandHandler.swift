import AMQP
import Foundation
import Logging
import Stores
import RegistryAuth

/// What the registry service does with one command, apart from the broker it comes from, so
/// its tests run in process against a real store and a recording publisher, as the job
/// pipeline's do: applies it to the store and answers on its `reply_to` with `{"ok": true}`
/// (a query's answer beside it: `{"ok": true, "status": …}`) or `{"ok": false, "error": {"code",
/// "message"}}`, `correlation_id` = the command's `message_id`. A command that cannot be applied
/// as sent is dead-lettered with the reason, like an invalid job; one the store cannot take now
/// goes back to the queue, whose delivery limit ends a command that keeps failing in the dead letters.
public struct RegistryCommandHandler: Sendable {
    private let store: any RegistryStore
    /// `registry.auth`: commands must carry the token of the user they concern.
    private let authorizer: CommandAuthorizer?
    private let queues: WorkerSettings.Names
    /// The apps the worker serves: a device registered for another could never be sent to.
    private let apps: Set<String>
    /// Carries out channel requests on APNs; nil refuses them (no apps' credentials).
    private let channels: ChannelDirectory?
    /// Answers `get_deliveries`; nil: the worker keeps no ledger.
    private let ledger: (any LedgerStore)?
    /// Answers `cancel_job`; nil: the worker keeps no schedule.
    private let schedule: JobScheduler?
    private let metrics: WorkerMetrics
    private let logger: Logger

    public init(
        store: any RegistryStore, authorizer: CommandAuthorizer? = nil, queues: WorkerSettings.Names, apps: Set<String>,
        channels: ChannelDirectory? = nil, ledger: (any LedgerStore)? = nil, schedule: JobScheduler? = nil, metrics: WorkerMetrics = WorkerMetrics(),
        logger: Logger
    ) {
        self.ledger = ledger
        self.schedule = schedule
        self.store = store
        self.authorizer = authorizer
        self.queues = queues
        self.apps = apps
        self.channels = channels
        self.metrics = metrics
        self.logger = logger
    }

    /// Closes what the handler holds (the channel managers).
    func shutdown() {
        channels?.shutdown()
    }

    /// Whether `registry.auth` is on, for the service's start-up line.
    var auth: (issuer: String, audience: String)? { authorizer.map { ($0.issuer, $0.audience) } }

    /// Applies or answers one command and says what becomes of its delivery: the reply (and a
    /// refused command's dead letter) are published through `publisher` first.
    public func handle(_ body: [UInt8], properties: AMQPProperties, via publisher: any MessagePublishing) async -> JobSettlement {
        let id = properties.messageID ?? "unknown"
        // The metric's label: the command once parsed, "invalid" before (few values, whatever producers send).
        var name = "invalid"
        var isQuery = false
        do throws(StoreError) {
            let (request, auth) = try RegistryRequest.decode(json: body)
            name = request.name
            switch request {
            case .query, .channel, .cancelJob: isQuery = true
            case .command: break
            }
            try await authorizer?.check(request, auth: auth, store: store)
            switch request {
            case .command(let command):
                try command.check(servedApps: apps)
                try await store.apply(command)
                logger.debug("registry command applied", metadata: ["command": "\(name)", "id": "\(id)"])
                await reply(to: properties, via: publisher, #"{"ok":true}"#)
            case .query(.getDeliveries(var query)):
                guard let ledger else {
                    throw StoreError(.unknownCommand, field: "command", "get_deliveries needs the delivery ledger, which this worker keeps none of (ledger: off, or no store for it)")
                }
                if let authorizer, let auth {
                    // registry.auth: the asking user's own devices, whatever the query named.
                    query.owner = try await authorizer.user(of: auth)
                }
                let page = try await ledger.page(query)
                await reply(to: properties, via: publisher, Self.answerReply(["deliveries": page.records.map(\.json), "next": page.next.map { $0.text as Any } ?? NSNull()]))
            case .query(let query):
                let answer = try await query.answer(from: store)
                if properties.replyTo == nil {
                    logger.warning("registry query with no reply_to: its answer goes nowhere", metadata: ["command": "\(name)", "id": "\(id)"])
                }
                await reply(to: properties, via: publisher, Self.answerReply(answer))
            case .cancelJob(let name):
                guard let schedule else {
                    throw StoreError(.unknownCommand, field: "command", "cancel_job needs the schedule, kept in the delivery ledger's store, and this worker keeps none (ledger: off)")
                }
                let answer = try await schedule.cancel(name)
                logger.info("cancel_job answered", metadata: ["id": "\(id)", "job": "\(name.description)"])
                await reply(to: properties, via: publisher, Self.answerReply(answer))
            case .channel(let channelRequest):
                guard let channels else {
                    throw StoreError(.unknownCommand, field: "command", "\(name) needs the apps' APNs credentials, which this registry service was started without")
                }
                let answer = try await channels.perform(channelRequest)
                logger.info("channel request done", metadata: ["command": "\(name)", "app": "\(channelRequest.app)", "id": "\(id)"])
                await reply(to: properties, via: publisher, Self.answerReply(answer))
            }
            metrics.registryCommand(name, result: "ok")
            return .acknowledge
        } catch let error where error.code == .storeUnavailable {
            logger.error("registry command not applied; returning it to the queue", metadata: ["id": "\(id)", "error": "\(error)"])
            metrics.registryCommand(name, result: "unavailable")
            return .requeue
        } catch where isQuery {
            // A query changes nothing and replaying it would tell nothing new: answered, not
            // dead-lettered. A channel request is answered the same way whatever became of it
            // (APNs' refusal, or APNs unreachable: `apns_unavailable`), never requeued: one
            // request in hand holds up the queue's commands for up to the request timeout, and
            // a create whose answer was lost may have made the channel already. The producer
            // that asked decides whether to ask again.
            logger.info("registry query refused", metadata: ["id": "\(id)", "error": "\(error.code.rawValue)", "message": "\(error.message)"])
            await reply(to: properties, via: publisher, Self.errorReply(error))
            metrics.registryCommand(name, result: "refused")
            return .acknowledge
        } catch {
            logger.warning("registry command refused", metadata: ["id": "\(id)", "error": "\(error.code.rawValue)", "message": "\(error.message)"])
            do {
                try await DeadLetter.publish(
                    Self.withoutAuth(body), refusing: properties, from: queues.registry, code: error.code.rawValue,
                    field: error.field, message: error.message, exchange: queues.deadLetterExchange, via: publisher)
            } catch {
                logger.error("cannot dead-letter the command; returning it to the queue", metadata: ["id": "\(id)", "error": "\(error)"])
                return .requeue
            }
            await reply(to: properties, via: publisher, Self.errorReply(error))
            metrics.registryCommand(name, result: "refused")
            metrics.deadLetter(queue: queues.registry, code: error.code.rawValue)
            return .acknowledge
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

    static func errorReply(_ error: StoreError) -> String {
        let details: [String: Any] = ["code": error.code.rawValue, "message": error.message, "field": error.field.map { $0 as Any } ?? NSNull()]
        let object: [String: Any] = ["ok": false, "error": details]
        return JSONDocument.bytes(object).map { String(decoding: $0, as: UTF8.self) } ?? #"{"ok":false}"#
    }

    private func reply(to properties: AMQPProperties, via publisher: any MessagePublishing, _ body: String) async {
        guard let replyTo = properties.replyTo else { return }
        let properties = AMQPProperties(
            contentType: "application/json", persistent: true, correlationID: properties.messageID, type: "registry_reply")
        do {
            try await publisher.publish(.toQueue(replyTo, body: Array(body.utf8), properties: properties))
        } catch {
            logger.warning("cannot answer the registry command", metadata: ["reply_to": "\(replyTo)", "error": "\(error)"])
        }
    }
}
