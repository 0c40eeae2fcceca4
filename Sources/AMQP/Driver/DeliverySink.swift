import Synchronization

/// Where a consuming driver hands its deliveries, on its I/O thread: an `AMQPConsumer`'s
/// sequence, or a handler of the consumer's owner that starts work on each delivery itself (one
/// hand-off between threads fewer per message than a task reading the sequence).
struct DeliverySink: Sendable {
    let deliver: @Sendable (AMQPDelivery) -> Void
    /// Once, when the consumer ends: nil when closed, the reason when the broker cancelled it.
    let end: @Sendable (AMQPError?) -> Void

    init(deliver: @escaping @Sendable (AMQPDelivery) -> Void, end: @escaping @Sendable (AMQPError?) -> Void) {
        self.deliver = deliver
        // The driver ends the sink when the broker cancels the consumer and again when it closes.
        let ended = EndedFlag()
        self.end = { error in
            if !ended.value.exchange(true, ordering: .acquiringAndReleasing) { end(error) }
        }
    }

    private final class EndedFlag: Sendable {
        let value = Atomic<Bool>(false)
    }

    init(_ continuation: AsyncThrowingStream<AMQPDelivery, Error>.Continuation) {
        deliver = { continuation.yield($0) }
        end = { error in continuation.finish(throwing: error) }
    }
}
