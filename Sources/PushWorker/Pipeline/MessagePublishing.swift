import AMQP

/// What the pipeline needs of the broker: confirmed publishing, and whether a queue exists.
/// `AMQPPublisher` is the real one; the pipeline's tests use a recording stand-in.
public protocol MessagePublishing: Sendable {
    /// Returns once the broker has the message; throws `AMQPError` (`.returned` for a mandatory
    /// message no queue took, retryable kinds when the connection dropped).
    func publish(_ message: AMQPMessage) async throws
    func queueExists(_ queue: String) async throws -> Bool
}

extension AMQPPublisher: MessagePublishing {}
