import AMQP

/// A job as it came from the broker, without the connection it came on: what the pipeline reads.
///
/// A class: every stage and the job's processor hold the delivery, and each copy of a struct of
/// its fields retained and released every one of them.
public final class JobDelivery: Sendable {
    /// The whole body; empty when the body was streamed.
    public let body: [UInt8]
    /// The reader a body over `Worker.streamJobsOverBytes` was parsed into as it arrived.
    public let streamed: StreamedJobReader?
    public let properties: AMQPProperties
    /// The queue a message published straight to it (through the default exchange, as chunks
    /// are) came from; nil for one routed by an exchange.
    public let queue: String?
    /// The broker delivered it before (to this worker or another, which may have sent some of it).
    public let redelivered: Bool
    /// False once the connection it came on is gone: the broker delivers it again, so sending
    /// more of it here would only send it twice.
    public let isCurrent: @Sendable () -> Bool

    public init(
        body: [UInt8], streamed: StreamedJobReader? = nil, properties: AMQPProperties, queue: String? = nil, redelivered: Bool = false,
        isCurrent: @escaping @Sendable () -> Bool = { true }
    ) {
        self.redelivered = redelivered
        self.body = body
        self.streamed = streamed
        self.properties = properties
        self.queue = queue
        self.isCurrent = isCurrent
    }

    public convenience init(_ delivery: AMQPDelivery) {
        self.init(
            body: delivery.body, streamed: delivery.streamedBody as? StreamedJobReader, properties: delivery.properties,
            queue: delivery.exchange.isEmpty ? delivery.routingKey : nil, redelivered: delivery.redelivered,
            isCurrent: { delivery.isCurrent })
    }

    /// Whether some of its devices may have their result already: a redelivery, or a job made
    /// from one (a chunk of a job split again after a fault is a new message, but not new work).
    var mayRepeat: Bool { redelivered || properties.headers?[WireHeader.mayRepeat] != nil }

    /// Marks a job made from this one (a chunk, a retry job, one moved to the bulk lane) when this
    /// one may repeat, so it asks the ledger too.
    func markRepeat(_ headers: inout AMQPTable) {
        if mayRepeat { headers[WireHeader.mayRepeat] = .int64(1) }
    }

    /// The `x-pushworker-chunk` header: set on chunk and retry jobs, which are never split again.
    var chunk: String? { properties.headers?[WireHeader.chunk]?.stringValue }
}
