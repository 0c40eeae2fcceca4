/// What a consuming driver asks of the broker on every (re)connect.
struct ConsumeSpecification: Sendable {
    var queue: String
    var prefetch: UInt16
    var consumerTag: String
    var arguments: AMQPTable
    var streaming: AMQPBodyStreaming?
}
