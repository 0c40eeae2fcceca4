/// Work handed from any task to a driver's I/O thread, the only thread that touches the C handle.
enum DriverCommand {
    case publish(PendingPublish)
    /// Not waited for: a written ack can still be lost with the connection, so waiting for the
    /// write would promise nothing more, and would cost a thread round trip per message.
    case settle(Settlement, generation: UInt64, deliveryTag: UInt64)
    /// A queue operation on the inspection channel, answered on the I/O thread.
    case queue(AMQPQueueOperation, CheckedContinuation<AMQPQueueStatus?, Error>)
    /// `nil` when nobody waits for the close (a publisher or consumer released without `close()`).
    case shutdown(CheckedContinuation<Void, Never>?)

    enum Settlement: Sendable {
        case ack(multiple: Bool)
        case nack(multiple: Bool, requeue: Bool)
        case reject(requeue: Bool)
    }
}

/// `CheckedContinuation` is Sendable and `PendingPublish` is only ever used by one thread at a
/// time (the submitting task hands it over through the mailbox lock), so commands may cross.
extension DriverCommand: @unchecked Sendable {}
