import AMQP
import Foundation
import PushWorker
import Synchronization

/// Stands in for the broker in the pipeline's tests: keeps every published message, knows which
/// queues exist, and fails the publishes a test chooses.
final class RecordingPublisher: MessagePublishing {
    private let state: Mutex<(messages: [AMQPMessage], queues: Set<String>)>
    private let failure: @Sendable (AMQPMessage) -> AMQPError?

    init(queues: Set<String>, failure: @escaping @Sendable (AMQPMessage) -> AMQPError? = { _ in nil }) {
        state = Mutex(([], queues))
        self.failure = failure
    }

    func publish(_ message: AMQPMessage) async throws {
        if let error = failure(message) { throw error }
        state.withLock { $0.messages.append(message) }
    }

    func queueExists(_ queue: String) async throws -> Bool {
        state.withLock { $0.queues.contains(queue) }
    }

    var messages: [AMQPMessage] { state.withLock { $0.messages } }

    /// The messages published straight to `queue`.
    func messages(to queue: String) -> [AMQPMessage] { messages.filter { $0.exchange.isEmpty && $0.routingKey == queue } }

    func results(to queue: String) throws -> [PushResult] {
        try messages(to: queue).filter { $0.properties.type == "result" }.map { try JSONDecoder().decode(PushResult.self, from: Data($0.body)) }
    }

    /// The results packed in `results` messages (`results: batched`), in order.
    func packedResults(to queue: String) throws -> [PushResult] {
        var results: [PushResult] = []
        for message in messages(to: queue) where message.properties.type == "results" {
            let object = try JSONSerialization.jsonObject(with: Data(message.body)) as? [String: Any]
            for entry in object?["results"] as? [Any] ?? [] {
                results.append(try JSONDecoder().decode(PushResult.self, from: JSONSerialization.data(withJSONObject: entry)))
            }
        }
        return results
    }

    func summaries(to queue: String) throws -> [JobSummary] {
        try messages(to: queue).filter { $0.properties.type == "summary" }.map { try JSONDecoder().decode(JobSummary.self, from: Data($0.body)) }
    }
}
