import Logging
import Synchronization

/// Publishes with publisher confirms over its own connection. Many publishes may be in flight
/// at once from any number of tasks; each `publish` returns when the broker has taken
/// responsibility for that message.
///
/// The connection reconnects by itself. A publish that was on the wire when the connection died
/// throws a retryable ``AMQPError`` (`isRetryable`), because the broker may or may not have it;
/// publishes not yet sent wait for the new connection.
public final class AMQPPublisher: Sendable {
    private let driver: ConnectionDriver

    private init(driver: ConnectionDriver) {
        self.driver = driver
    }

    /// Connects, declares `configuration.topology` and enables confirms; throws when the broker
    /// cannot be reached, refuses the login, or rejects a declaration.
    public static func connect(_ configuration: AMQPConfiguration, logger: Logger = Logger(label: "pushworker.amqp")) async throws -> AMQPPublisher {
        let driver = ConnectionDriver(configuration: configuration, confirms: true, consume: nil, deliveries: nil, logger: logger)
        try await driver.start()
        return AMQPPublisher(driver: driver)
    }

    /// Publishes and waits for the broker's confirm. Throws on basic.nack, on the return of a
    /// mandatory message, and (retryably) when the connection drops before the confirm.
    public func publish(_ message: AMQPMessage) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
            driver.post(.publish(PendingPublish(message: message, continuation: continuation)))
        }
    }

    /// Publishes `messages` in their order (the broker keeps a channel's order) and returns when
    /// the broker has confirmed every one; throws the first failure, after all are settled. For
    /// moving messages from queue to queue without shuffling them.
    public func publish(contentsOf messages: [AMQPMessage]) async throws {
        guard !messages.isEmpty else { return }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
            let batch = BatchCompletion(count: messages.count, continuation: continuation)
            for message in messages {
                driver.post(.publish(PendingPublish(message: message) { batch.settle($0) }))
            }
        }
    }

    /// Whether `queue` exists, by a passive declare on a channel apart from the publishing one
    /// (a missing queue closes that channel, never the one with publishes in flight). A queue
    /// another connection holds exclusively (a producer's private reply queue) exists.
    /// Throws when the broker cannot be asked (connection closed, access refused).
    public func queueExists(_ queue: String) async throws -> Bool {
        // AMQP names are short strings: librabbitmq cannot even encode a longer one, and no
        // queue can have it.
        guard queue.utf8.count <= 255 else { return false }
        do {
            return try await perform(.inspect(queue)) != nil
        } catch let error as AMQPError where error.replyCode == 405 {
            return true
        }
    }

    /// Inspects, declares, deletes, binds or unbinds a queue on a channel apart from the publishing
    /// one (see `AMQPQueueOperation`). Returns the queue's status for `inspect` (nil: no such
    /// queue) and `declare`. Throws the broker's refusal with its reply code.
    @discardableResult
    public func perform(_ operation: AMQPQueueOperation) async throws -> AMQPQueueStatus? {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<AMQPQueueStatus?, Error>) in
            driver.post(.queue(operation, continuation))
        }
    }

    /// Waits for outstanding confirms (bounded by the RPC timeout), then closes the connection.
    public func close() async {
        await withCheckedContinuation { continuation in
            driver.post(.shutdown(continuation))
        }
    }

    deinit {
        // Without an explicit close the thread would otherwise keep the connection open forever.
        driver.post(.shutdown(nil))
    }
}

/// Resumes one continuation once every publish of a batch is settled, with the first error.
private final class BatchCompletion: Sendable {
    private struct State {
        var remaining: Int
        var error: AMQPError?
        var continuation: CheckedContinuation<Void, Error>?
    }

    private let state: Mutex<State>

    init(count: Int, continuation: CheckedContinuation<Void, Error>) {
        state = Mutex(State(remaining: count, continuation: continuation))
    }

    func settle(_ error: AMQPError?) {
        let finished: (CheckedContinuation<Void, Error>, AMQPError?)? = state.withLock { state in
            if state.error == nil { state.error = error }
            state.remaining -= 1
            guard state.remaining == 0, let continuation = state.continuation else { return nil }
            state.continuation = nil
            return (continuation, state.error)
        }
        guard let (continuation, error) = finished else { return }
        if let error { continuation.resume(throwing: error) } else { continuation.resume() }
    }
}
