import AMQP
import Logging

/// Brings queues that exist with other arguments than the configuration declares (a classic
/// results queue where quorum is configured, another delivery limit) to the configured form,
/// keeping every message. A queue's type and arguments cannot change in place, so each queue is
/// emptied into a holding queue, deleted, declared anew and filled again.
///
/// The holding queue (`NAME.migrating`, quorum) takes the queue's bindings while the queue is
/// gone, so producers publishing through an exchange lose nothing. What is published to the queue
/// by name (results, retry rounds: the workers) would find no queue for that moment: the workers
/// must be stopped, which `plan` checks (no consumer on the jobs queue or on a queue to migrate).
/// Interrupted, it is run again: a holding queue left behind is emptied into the queue.
public struct QueueMigration: Sendable {
    /// What `plan` found for one queue of the configuration.
    public struct Step: Sendable, Equatable {
        public enum State: Sendable, Equatable {
            /// Not there yet: the worker declares it.
            case absent
            case asConfigured
            /// Exists with other arguments; the broker's words say which.
            case differs(String)
        }

        /// The queue as the configuration declares it.
        public var declaration: AMQPTopology.Queue
        public var queue: String { declaration.name }
        public var state: State
        public var messages: Int
        public var consumers: Int
        /// Messages waiting in a holding queue from an interrupted migration.
        public var held: Int
    }

    public struct Refusal: Error, CustomStringConvertible {
        public var description: String
    }

    let publisher: AMQPPublisher
    let consuming: AMQPConfiguration
    let topology: AMQPTopology
    let jobsQueue: String
    let logger: Logger

    /// The broker's topology (every app's bulk queue included) is not declared: the point is
    /// that it cannot be, as it stands.
    public static func connect(_ broker: BrokerPlan, logger: Logger) async throws -> QueueMigration {
        let bare = broker.undeclared("pushworker queues")
        let publisher = try await AMQPPublisher.connect(bare, logger: logger)
        return QueueMigration(publisher: publisher, consuming: bare, topology: broker.amqp.topology, jobsQueue: broker.settings.queues.jobs, logger: logger)
    }

    public func close() async {
        await publisher.close()
    }

    static func holding(_ queue: String) -> String { "\(queue).migrating" }

    /// Every queue of the configuration, compared with the broker's. A queue that exists is
    /// declared as configured on the side channel: the broker accepts that only when the
    /// arguments are equal, and otherwise says which one differs.
    public func plan() async throws -> [Step] {
        var steps: [Step] = []
        for queue in topology.queues {
            let held = try await publisher.perform(.inspect(Self.holding(queue.name)))?.messages ?? 0
            guard let status = try await publisher.perform(.inspect(queue.name)) else {
                steps.append(Step(declaration: queue, state: .absent, messages: 0, consumers: 0, held: held))
                continue
            }
            var state = Step.State.asConfigured
            do {
                try await publisher.perform(.declare(queue))
            } catch let error as AMQPError where error.replyCode == 406 {
                state = .differs(error.replyText ?? error.message)
            }
            steps.append(Step(declaration: queue, state: state, messages: status.messages, consumers: status.consumers, held: held))
        }
        return steps
    }

    /// Migrates every queue `plan` found different, and empties the holding queues left by an
    /// interrupted run. Returns a line per queue done; refuses, changing nothing, while a worker
    /// or a consumer of a queue to migrate is connected.
    public func run() async throws -> [String] {
        let steps = try await plan()
        let work = steps.filter { step in
            if case .differs = step.state { return true }
            return step.held > 0
        }
        guard !work.isEmpty else { return [] }
        var report: [String] = []
        // The workers (consumers of the jobs queue) and whoever reads a queue to migrate.
        let watched = Set(work.map(\.queue) + [jobsQueue])
        let busy = steps.filter { watched.contains($0.queue) && $0.consumers > 0 }.map { "\($0.queue) has \($0.consumers) consumer(s)" }
        guard busy.isEmpty else {
            throw Refusal(description: "stop the workers, and the consumers of the queues to migrate, first: \(busy.joined(separator: "; ")). Jobs published meanwhile wait in \(jobsQueue).")
        }
        for step in work {
            let bindings = topology.bindings.filter { $0.queue == step.queue }
            let holding = Self.holding(step.queue)
            func rebound(_ binding: AMQPTopology.Binding, to queue: String) -> AMQPTopology.Binding {
                AMQPTopology.Binding(queue: queue, exchange: binding.exchange, routingKey: binding.routingKey, arguments: binding.arguments)
            }
            var movedOut = 0
            if case .differs = step.state {
                // What producers publish through an exchange goes to the holding queue from here
                // on; the queue gets nothing more (quorum queues cannot be deleted "if empty").
                try await declare(.durable(holding, quorum: true), meanwhile: "nothing has moved yet")
                for binding in bindings {
                    try await publisher.perform(.bind(rebound(binding, to: holding)))
                    try await publisher.perform(.unbind(binding))
                }
                movedOut = try await move(from: step.queue, to: holding)
                try await publisher.perform(.delete(step.queue, ifEmpty: false))
            }
            try await declare(step.declaration, meanwhile: "its messages wait in \(holding)")
            for binding in bindings {
                try await publisher.perform(.bind(binding))
                try await publisher.perform(.unbind(rebound(binding, to: holding)))
            }
            let movedBack = try await move(from: holding, to: step.queue)
            try await publisher.perform(.delete(holding, ifEmpty: false))
            if case .differs(let why) = step.state {
                report.append("\(step.queue): declared as configured (\(why)); \(movedOut) message(s) moved out and \(movedBack) back")
            } else {
                report.append("\(step.queue): \(movedBack) message(s) moved back from \(holding), left by an interrupted migration")
            }
            logger.notice("queue migrated", metadata: ["queue": "\(step.queue)", "moved": "\(movedBack)"])
        }
        return report
    }

    /// Declares a queue, again while the broker answers that it could not elect a new quorum
    /// queue's leader in time (`cluster_not_formed`). A busy node says that of a queue it could
    /// form a moment later, and the broker removes the half-made queue, so declaring again is
    /// safe. Given up after `formation`: a cluster short of a majority does not mend by itself.
    /// Either way nothing is lost (`meanwhile` says where the messages are): messages moved out
    /// wait in the holding queue, which a run started again empties into the queue.
    func declare(_ queue: AMQPTopology.Queue, meanwhile: String) async throws {
        let deadline = ContinuousClock.now + Self.formation
        while true {
            do {
                try await publisher.perform(.declare(queue))
                return
            } catch let error as AMQPError where error.isClusterNotFormed {
                guard ContinuousClock.now < deadline else {
                    throw Refusal(description: "the broker could not form quorum queue \(queue.name)'s cluster within \(Self.formation) (cluster_not_formed): is a majority of its nodes up? Nothing is lost: \(meanwhile); run migrate again")
                }
                logger.warning("the broker cannot form a quorum queue's cluster yet; declaring it again", metadata: ["queue": "\(queue.name)", "error": "\(error)"])
                try await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// How long `declare` keeps declaring a quorum queue whose cluster the broker cannot form.
    static let formation: Duration = .seconds(120)

    /// Moves every ready message of `source` to `target`, in order: a batch is published
    /// (confirmed) before it is acknowledged, so a crash or a lost connection leaves a message in
    /// one of the two queues, possibly both (at least once); otherwise each message is moved
    /// once. Properties and headers go along unchanged. Returns how many were moved once the
    /// broker counts none left in `source` (which the caller then deletes); throws when the
    /// broker counts messages that no consumer is given, rather than leave them to be deleted.
    func move(from source: String, to target: String) async throws -> Int {
        var moved = 0
        while let status = try await publisher.perform(.inspect(source)), status.messages > 0 {
            let consumer = try await AMQPConsumer.connect(consuming, queue: source, prefetch: Self.batch, logger: logger)
            var taken = 0
            do {
                while taken < status.messages {
                    let wanted = min(Int(Self.batch), status.messages - taken)
                    var deliveries: [AMQPDelivery] = []
                    // None within the wait although the broker counted them (they expired, or
                    // another consumer took them): the wait ends the sequence; count again.
                    while deliveries.count < wanted, let delivery = try await consumer.next(waitingAtMost: Self.stall) {
                        deliveries.append(delivery)
                    }
                    try await publisher.publish(contentsOf: deliveries.map {
                        .toQueue(target, body: $0.body, properties: $0.properties, mandatory: true)
                    })
                    // One `multiple` ack for the batch: a quorum queue applies each ack frame as
                    // a command of its own, and a channel with more than a few dozen waiting
                    // holds the rest back (which the consumer's close then waits for). A batch
                    // that spans a lost connection is refused: the ack would settle only the new
                    // connection's part of it.
                    guard deliveries.allSatisfy(\.isCurrent) else {
                        throw Refusal(description: "the connection to the broker was lost while moving \(source) to \(target): a batch may be in both; run migrate again")
                    }
                    try await deliveries.last?.ack(multiple: true)
                    taken += deliveries.count
                    if deliveries.count < wanted { break }
                }
            } catch {
                await consumer.close()
                throw error
            }
            await consumer.close()
            moved += taken
            guard taken > 0 else {
                throw Refusal(description: "\(source) counts \(status.messages) message(s) but none was delivered within \(Self.stall): is something else consuming it? Nothing was deleted; run migrate again")
            }
        }
        return moved
    }

    /// How long a move waits for the next delivery of a queue the broker says is not empty.
    static let stall: Duration = .seconds(30)

    /// Deliveries held at once, and published as one ordered batch.
    static let batch: UInt16 = 500
}
