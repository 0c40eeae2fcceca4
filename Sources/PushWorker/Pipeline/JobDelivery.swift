import AMQP

/// A job as it came from the broker, without the connection it came on: what the pipeline reads.
public struct JobDelivery: Sendable {
    /// The whole body; empty when the body was streamed.
    public var body: [UInt8]
    /// The reader a body over `Worker.streamJobsOverBytes` was parsed into as it arrived.
    public var streamed: StreamedJobReader?
    public var properties: AMQPProperties
    /// The queue a message published straight to it (through the default exchange, as chunks
    /// are) came from; nil for one routed by an exchange.
    public var queue: String?
    /// The broker delivered it before (to this worker or another, which may have sent some of it).
    public var redelivered: Bool

    public init(body: [UInt8], streamed: StreamedJobReader? = nil, properties: AMQPProperties, queue: String? = nil, redelivered: Bool = false) {
        self.redelivered = redelivered
        self.body = body
        self.streamed = streamed
        self.properties = properties
        self.queue = queue
    }

    public init(_ delivery: AMQPDelivery) {
        self.init(
            body: delivery.body, streamed: delivery.streamedBody as? StreamedJobReader, properties: delivery.properties,
            queue: delivery.exchange.isEmpty ? delivery.routingKey : nil, redelivered: delivery.redelivered)
    }

    /// Whether some of its devices may have their result already: a redelivery, or a chunk or
    /// retry job (the job it came from may have been split again after a fault, making it anew).
    var mayRepeat: Bool { redelivered || chunk != nil }

    /// The `x-pushworker-chunk` header: set on chunk and retry jobs, which are never split again.
    var chunk: String? { properties.headers?[WireHeader.chunk]?.stringValue }
}
