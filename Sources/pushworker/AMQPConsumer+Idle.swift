import AMQP

extension AMQPConsumer {
    /// The next delivery, or nil once the queue has been quiet for `idle` (or the consumer ended).
    /// A timeout ends the delivery sequence, so this is for reading a queue out, not for a
    /// consumer meant to go on.
    func next(idle: Duration) async throws -> AMQPDelivery? {
        try await withThrowingTaskGroup(of: AMQPDelivery?.self) { group in
            group.addTask { var iterator = self.makeAsyncIterator(); return try await iterator.next() }
            group.addTask { try await Task.sleep(for: idle); return nil }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
    }
}
