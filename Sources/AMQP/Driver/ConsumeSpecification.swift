/// What a consuming driver asks of the broker on every (re)connect: one consumer per queue, all on
/// the connection's one channel, each with its own prefetch.
struct ConsumeSpecification: Sendable {
    struct Subscription: Sendable {
        var queue: String
        var prefetch: UInt16
        var consumerTag: String
    }

    var subscriptions: [Subscription]
    var arguments: AMQPTable
    var streaming: AMQPBodyStreaming?

    /// The queues, for messages.
    var queues: String { subscriptions.map(\.queue).joined(separator: "', '") }
}
