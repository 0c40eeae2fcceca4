import Foundation
import Logging

/// Consumes one queue over its own connection and hands out deliveries as an AsyncSequence.
///
/// The broker sends at most `prefetch` unacknowledged deliveries, which bounds memory. After a
/// reconnect the consumer resumes on the new connection and the same sequence goes on; messages
/// that were unacknowledged on the old one come again with `redelivered` set, and settling their
/// old deliveries throws ``AMQPError/Kind-swift.enum/staleDelivery``.
public final class AMQPConsumer: AsyncSequence, Sendable {
    public typealias Element = AMQPDelivery
    public typealias AsyncIterator = AsyncThrowingStream<AMQPDelivery, Error>.AsyncIterator

    private let driver: ConnectionDriver
    private let stream: AsyncThrowingStream<AMQPDelivery, Error>

    private init(driver: ConnectionDriver, stream: AsyncThrowingStream<AMQPDelivery, Error>) {
        self.driver = driver
        self.stream = stream
    }

    /// Connects, declares `configuration.topology`, sets the prefetch and starts consuming `queue`.
    public static func connect(
        _ configuration: AMQPConfiguration,
        queue: String,
        prefetch: UInt16 = 100,
        consumerTag: String? = nil,
        arguments: AMQPTable = [:],
        streaming: AMQPBodyStreaming? = nil,
        logger: Logger = Logger(label: "pushworker.amqp")
    ) async throws -> AMQPConsumer {
        try await connect(
            configuration, queues: [(queue, prefetch)], consumerTag: consumerTag, arguments: arguments, streaming: streaming, logger: logger)
    }

    /// Consumes several queues over one connection, each with its own prefetch, as one sequence;
    /// a delivery's `consumerTag` tells them apart (`consumerTag` + `-` + the queue's index).
    public static func connect(
        _ configuration: AMQPConfiguration,
        queues: [(name: String, prefetch: UInt16)],
        consumerTag: String? = nil,
        arguments: AMQPTable = [:],
        streaming: AMQPBodyStreaming? = nil,
        logger: Logger = Logger(label: "pushworker.amqp")
    ) async throws -> AMQPConsumer {
        try await connect(
            configuration, queues: queues, consumerTag: consumerTag, arguments: arguments, streaming: streaming, logger: logger,
            handler: nil)
    }

    /// Consumes `queues` over one connection like `connect(_:queues:…)`, but hands each delivery
    /// to `deliver` on the connection's I/O thread instead of to the sequence (which then ends at
    /// once): for a consumer that starts its work on each delivery itself, one hand-off between
    /// threads fewer per message. `deliver` must return quickly (it holds up the connection's
    /// heartbeats and settlements). `ended` is called once: nil when the consumer is closed, the
    /// reason when the broker cancelled it.
    public static func connect(
        _ configuration: AMQPConfiguration,
        queues: [(name: String, prefetch: UInt16)],
        consumerTag: String? = nil,
        arguments: AMQPTable = [:],
        streaming: AMQPBodyStreaming? = nil,
        logger: Logger = Logger(label: "pushworker.amqp"),
        deliver: @escaping @Sendable (AMQPDelivery) -> Void,
        ended: @escaping @Sendable (AMQPError?) -> Void
    ) async throws -> AMQPConsumer {
        try await connect(
            configuration, queues: queues, consumerTag: consumerTag, arguments: arguments, streaming: streaming, logger: logger,
            handler: DeliverySink(deliver: deliver, end: ended))
    }

    private static func connect(
        _ configuration: AMQPConfiguration, queues: [(name: String, prefetch: UInt16)], consumerTag: String?, arguments: AMQPTable,
        streaming: AMQPBodyStreaming?, logger: Logger, handler: DeliverySink?
    ) async throws -> AMQPConsumer {
        precondition(!queues.isEmpty, "a consumer needs a queue")
        let (stream, continuation) = AsyncThrowingStream<AMQPDelivery, Error>.makeStream()
        // With a handler of its own, the sequence has nothing to hand out.
        if handler != nil { continuation.finish() }
        let tag = consumerTag ?? "pushworker-\(UUID().uuidString.lowercased())"
        let specification = ConsumeSpecification(
            subscriptions: queues.enumerated().map { index, queue in
                .init(queue: queue.name, prefetch: queue.prefetch, consumerTag: queues.count == 1 ? tag : "\(tag)-\(index)")
            },
            arguments: arguments, streaming: streaming)
        let driver = ConnectionDriver(
            configuration: configuration, confirms: false, consume: specification, deliveries: handler ?? DeliverySink(continuation), logger: logger)
        try await driver.start()
        return AMQPConsumer(driver: driver, stream: stream)
    }

    public func makeAsyncIterator() -> AsyncIterator {
        stream.makeAsyncIterator()
    }

    /// The next delivery, or nil when none comes within `limit` (or the consumer has ended).
    /// A timeout cancels the wait, which ends the delivery sequence: this is for reading a queue
    /// out (`pushworker dlq`, `tail`, tests), not for a consumer meant to go on.
    public func next(waitingAtMost limit: Duration) async throws -> AMQPDelivery? {
        try await withThrowingTaskGroup(of: AMQPDelivery?.self) { group in
            group.addTask {
                var iterator = self.makeAsyncIterator()
                return try await iterator.next()
            }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
    }

    /// Carries out settlements already requested, cancels the consumers and waits for the
    /// broker's answer (at most `cancelTimeout`, so a quorum queue takes those settlements before
    /// the channel closes), then closes the connection; the broker requeues whatever is still
    /// unacknowledged, and the delivery sequence ends.
    public func close() async {
        await withCheckedContinuation { continuation in
            driver.post(.shutdown(continuation))
        }
    }

    deinit {
        driver.post(.shutdown(nil))
    }
}
