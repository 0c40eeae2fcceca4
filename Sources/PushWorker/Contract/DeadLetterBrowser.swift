import AMQP

/// Reads every dead letter without removing it: consume until the queue is quiet, let `body`
/// choose the ones to acknowledge (remove), then close; the broker puts the rest back.
public enum DeadLetterBrowser {
    public static func browse(
        _ configuration: AMQPConfiguration, queue: String, quiet: Duration = .milliseconds(700),
        _ body: ([DeadLetter]) async throws -> [DeadLetter]
    ) async throws {
        let consumer = try await AMQPConsumer.connect(configuration, queue: queue, prefetch: 1000)
        var letters: [DeadLetter] = []
        while true {
            guard let delivery = try await consumer.next(waitingAtMost: quiet) else { break }
            letters.append(DeadLetter(delivery: delivery))
        }
        do {
            for letter in try await body(letters) { try await letter.delivery.ack() }
        } catch {
            await consumer.close()
            throw error
        }
        await consumer.close()
    }
}
