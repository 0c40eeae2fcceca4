/// A message delivered to a consumer. Settle it exactly once with `ack`, `nack` or `reject`;
/// until then the broker holds it for this consumer (and counts it against the prefetch).
///
/// A class: a delivery passes through several hands on its way to a job, and each copy of a
/// struct of its fields retained and released every one of them.
public final class AMQPDelivery: Sendable {
    /// Empty when the body went to `streamedBody`.
    public let body: [UInt8]
    /// The receiver a streamed body went to (see `AMQPBodyStreaming`), which holds what it made of it.
    public let streamedBody: (any AMQPBodyReceiver)?
    /// The body's size in bytes, streamed or not.
    public let bodySize: Int
    public let properties: AMQPProperties
    public let exchange: String
    public let routingKey: String
    public let deliveryTag: UInt64
    /// The broker delivered this message before, to this or another consumer, without an ack.
    public let redelivered: Bool
    public let consumerTag: String
    let generation: UInt64
    let driver: ConnectionDriver

    init(
        body: [UInt8], streamedBody: (any AMQPBodyReceiver)?, bodySize: Int, properties: AMQPProperties, exchange: String, routingKey: String,
        deliveryTag: UInt64, redelivered: Bool, consumerTag: String, generation: UInt64, driver: ConnectionDriver
    ) {
        self.body = body
        self.streamedBody = streamedBody
        self.bodySize = bodySize
        self.properties = properties
        self.exchange = exchange
        self.routingKey = routingKey
        self.deliveryTag = deliveryTag
        self.redelivered = redelivered
        self.consumerTag = consumerTag
        self.generation = generation
        self.driver = driver
    }

    /// Confirms the message was handled; the broker forgets it.
    public func ack(multiple: Bool = false) async throws {
        try await settle(.ack(multiple: multiple))
    }

    /// Gives the message back: to the queue when `requeue` is true, else to the queue's
    /// dead-letter exchange (or dropped when it has none).
    public func nack(requeue: Bool, multiple: Bool = false) async throws {
        try await settle(.nack(multiple: multiple, requeue: requeue))
    }

    /// Like `nack` for this one message.
    public func reject(requeue: Bool) async throws {
        try await settle(.reject(requeue: requeue))
    }

    /// Whether the connection it came on is still the consumer's: false once that connection is
    /// gone (the broker then delivers the message again, perhaps to another worker), so whoever
    /// works on it can stop early.
    public var isCurrent: Bool { driver.currentGeneration == generation }

    /// Hands the settlement to the connection's thread and returns. Throws when the delivery's
    /// connection is gone (the broker redelivers the message) or the consumer is closed.
    private func settle(_ settlement: DriverCommand.Settlement) async throws {
        guard driver.currentGeneration == generation else {
            throw AMQPError(
                .staleDelivery,
                "delivery \(deliveryTag) came from an earlier connection; the broker has requeued it and will deliver it again")
        }
        guard driver.post(.settle(settlement, generation: generation, deliveryTag: deliveryTag)) else {
            throw AMQPError(.closed, "the consumer has been closed; the broker requeues delivery \(deliveryTag)")
        }
    }

    /// The entries of RabbitMQ's `x-death` header, newest first: one per queue and reason that
    /// dead-lettered this message, each with a `count`.
    public var deaths: [AMQPTable] {
        properties.headers?["x-death"]?.arrayValue?.compactMap(\.tableValue) ?? []
    }
}
