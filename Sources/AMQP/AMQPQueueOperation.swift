/// A change to, or a look at, one queue, carried out on a channel apart from the one that
/// publishes and consumes: a refusal (no such queue, other arguments, not empty) closes only that
/// channel, and comes back as an `AMQPError` with the broker's reply code (404, 406).
public enum AMQPQueueOperation: Sendable, Hashable {
    /// A passive declare: the queue's depth and consumers, or `nil` when there is no such queue.
    case inspect(String)
    /// Declares the queue; 406 when it exists with other arguments (a queue's type and arguments
    /// cannot change in place).
    case declare(AMQPTopology.Queue)
    /// Deletes the queue; with `ifEmpty`, 406 when it holds messages, which then stay.
    case delete(String, ifEmpty: Bool)
    case bind(AMQPTopology.Binding)
    case unbind(AMQPTopology.Binding)
}

/// What the broker said of a queue: ready messages (not those delivered and unacknowledged) and
/// consumers.
public struct AMQPQueueStatus: Sendable, Hashable {
    public var messages: Int
    public var consumers: Int

    public init(messages: Int, consumers: Int) {
        self.messages = messages
        self.consumers = consumers
    }
}
